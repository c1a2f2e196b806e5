"""Reading Relax types: the static shapes and dtypes every stage asks about."""

from __future__ import annotations

from typing import Any

import tvm
from tvm import relax


def static_shape(ty: Any) -> list[int] | None:
    """Static shape of a tensor type, or None when unknown, symbolic or not a tensor."""
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        return None
    try:
        return [int(dim) for dim in ty.shape]
    except TypeError:
        return None


def tensor_shape(expr: Any) -> list[int] | None:
    """Static shape of a tensor-typed expression (a tuple's first field), or None."""
    ty = expr.ty
    if isinstance(ty, tvm.ir.type.TupleType):
        ty = ty.fields[0]
    return static_shape(ty)


def tensor_dtype(expr: Any) -> str:
    ty = expr.ty
    if isinstance(ty, tvm.ir.type.TupleType):
        ty = ty.fields[0]
    return str(ty.dtype) if isinstance(ty, relax.TensorType) else "unknown"


def op_name(call: relax.Call) -> str:
    return call.op.name.removeprefix("relax.")
