"""Reading Relax expressions: the static shapes, dtypes, op names and constants every stage asks
about (one definition each, so the frontend's rewrites and the partition checks agree)."""

from __future__ import annotations

from typing import Any

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import Constant


def static_shape(ty: Any) -> list[int] | None:
    """Static shape of a tensor type, or None when unknown, symbolic or not a tensor."""
    if not isinstance(ty, relax.TensorType) or not isinstance(ty.shape, relax.ShapeExpr):
        return None
    try:
        # Through the FFI array: indexing the ShapeExpr asks the FFI for its length per dim.
        return [int(dim) for dim in ty.shape.values]
    except TypeError:
        return None


def tensor_shape(expr: Any) -> list[int] | None:
    """Static shape of a tensor-typed expression (a tuple's first field), or None."""
    ty = expr.ty
    if isinstance(ty, tvm.ir.type.TupleType):
        ty = ty.fields[0]
    return static_shape(ty)


def tensor_dtype(expr: Any) -> str:
    """dtype of a tensor-typed expression (a tuple's first field); "unknown" otherwise."""
    ty = expr.ty
    if isinstance(ty, tvm.ir.type.TupleType):
        ty = ty.fields[0]
    return _dtype_of_type(ty) or "unknown"


def op_name(call: relax.Call) -> str:
    return call.op.name.removeprefix("relax.")


def _dtype_of_type(ty: Any) -> str:
    return str(ty.dtype) if isinstance(ty, relax.TensorType) else ""


def dtype_of(expr: Any) -> str:
    """dtype of a tensor-typed expression; "" for anything else (tuples, shapes, objects)."""
    return _dtype_of_type(expr.ty)


def shape_of(expr: Any) -> tuple[int, ...] | None:
    """Static shape of a tensor-typed expression; None when unknown, symbolic or not a tensor."""
    shape = static_shape(expr.ty)
    return None if shape is None else tuple(shape)


def call_op_name(expr: Any) -> str:
    """Full name of the Relax op ``expr`` calls ("relax.add"); "" when it is not an op call."""
    if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
        return str(expr.op.name)
    return ""


def is_call(expr: Any, *names: str) -> bool:
    """True when ``expr`` calls one of the Relax ops ``names`` (full names)."""
    return call_op_name(expr) in names  # "" (not an op call) is no op's name


def constant_value(expr: Any) -> np.ndarray | None:
    """The value of a tensor constant, or of a scalar literal (clip's bounds); else None."""
    if not isinstance(expr, Constant):
        return None
    value = expr.value
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def bindings_of(func: relax.Function) -> dict[relax.Var, relax.Expr]:
    """Each variable of ``func``'s body to the value it is bound to (a composite's calls)."""
    return {b.var: b.value for block in func.body.blocks for b in block.bindings}


def is_integer_dtype(dtype: str) -> bool:
    """int8 ... int64 and uint8 ... uint64 (not bool)."""
    return dtype.startswith(("int", "uint"))
