"""Reading Relax types and attributes as the NPU graph's JSON values (shared by every lowering)."""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import relax

from ..relax_types import static_shape


class CodegenError(ValueError):
    """The partitioned function contains something the NPU graph format cannot express."""


def tensor_type(ty: Any, what: str) -> tuple[list[int], str]:
    if isinstance(ty, tvm.ir.type.TupleType):
        ty = ty.fields[0]
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        raise CodegenError(f"{what}: expected a tensor with a static shape, got {ty}")
    shape = static_shape(ty)
    if shape is None:
        raise CodegenError(f"{what}: shape {ty.shape} is not static")
    return shape, str(ty.dtype)


def _attr_value(value: Any) -> Any:
    """Converts a Relax attribute field to plain JSON data."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tvm_ffi.Array, list, tuple)):
        return [_attr_value(item) for item in value]
    if hasattr(value, "value") and isinstance(value.value, (int, float)):
        return value.value  # IntImm / FloatImm
    return str(value)  # DataType and string-like objects


def attrs_to_dict(attrs: Any) -> dict[str, Any]:
    if attrs is None:
        return {}
    fields = type(attrs).__tvm_ffi_type_info__.fields
    return {field.name: _attr_value(getattr(attrs, field.name)) for field in fields}


def scalar_arg(expr: Any, what: str) -> float:
    value = getattr(expr, "value", None)
    if isinstance(value, (int, float)):
        return float(value)
    raise CodegenError(f"{what}: expected a scalar literal, got {expr}")
