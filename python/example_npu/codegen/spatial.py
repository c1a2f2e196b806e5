"""Codegen of reductions and of the spatial ops of detection / segmentation networks.

* ``mean`` / ``sum`` / ``max`` / ``min`` / ``variance`` name their reduced ``axes`` (all of them
  when Relax's ``axis`` is None); ``argmax`` / ``argmin`` reduce one axis or all;
* ``topk`` is one ``topk`` node per result it returns (``output``: "values" or "indices"), each
  with the whole selection's attributes (k read from the result shape: Relax's k < 1 is the
  whole axis); "both" is the tuple of the two nodes;
* ``adaptive_avg_pool2d`` whose output size divides the input is ``nn.avg_pool2d`` with window =
  stride = input / output (the pooling engine's plain window); other output sizes are the NPU's
  own ``nn.adaptive_avg_pool2d`` with uneven, possibly overlapping windows;
* ``image.resize2d`` reads its output size from the result shape (Relax's ``size`` argument is
  not a tensor); ``nn.conv2d_transpose`` keeps Relax's attributes with the dtype unchanged;
* ``nn.prelu``'s per-axis slope is reshaped so that it broadcasts onto the input along ``axis``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tvm import relax

from ..relax_types import bindings_of
from .emitter import Emitter, input_shape

_REDUCTIONS = ("mean", "sum", "max", "min", "variance")


def _reduced_axes(rank: int, axis: Any) -> list[int]:
    if axis is None:
        return list(range(rank))
    values = [axis] if isinstance(getattr(axis, "value", axis), int) else list(axis)
    return [int(a) for a in values]


def _reduce(op: str) -> Callable[[Emitter, int], int]:
    def lower(e: Emitter, x: int) -> int:
        shape, _ = input_shape(e.builder, e.call.args[0])
        attrs = e.call.attrs
        axes = _reduced_axes(len(shape), attrs.axis)
        return e.node(op, [x], e.call.ty, {"axes": axes, "keepdims": bool(attrs.keepdims)})

    return lower


def _topk(e: Emitter, x: int) -> Any:
    shape, _ = input_shape(e.builder, e.call.args[0])
    a = e.call.attrs
    axis = int(a.axis) % len(shape)
    ret_type = str(a.ret_type)
    outputs = ("values", "indices") if ret_type == "both" else (ret_type,)
    types = list(e.call.ty.fields) if ret_type == "both" else [e.call.ty]
    nodes = []
    for output, ty in zip(outputs, types, strict=True):
        out_shape, _ = e.builder.tensor_type(ty, f"topk {output}")
        attrs = {"axis": axis, "k": out_shape[axis], "largest": bool(a.largest), "output": output}
        nodes.append(e.node("topk", [x], ty, attrs))
    return tuple(nodes) if ret_type == "both" else nodes[0]


def pool_window(pool: list[int]) -> dict[str, Any]:
    """The attributes of a plain pooling window of ``pool`` that tiles its input exactly."""
    return {
        "pool_size": pool,
        "strides": pool,
        "dilation": [1, 1],
        "padding": [0, 0, 0, 0],
        "ceil_mode": False,
        "count_include_pad": False,
    }


def adaptive_output_size(call: Any, size: list[int]) -> list[int]:
    """adaptive_avg_pool2d's output {H, W} (None: the input size; one value: a square)."""
    out = call.attrs.output_size
    out = size if out is None else [int(v) for v in out]
    return out * 2 if len(out) == 1 else out


def _adaptive_avg_pool2d(e: Emitter, x: int) -> int:
    shape, _ = input_shape(e.builder, e.call.args[0])
    layout = str(e.call.attrs.layout)
    size = [shape[layout.index("H")], shape[layout.index("W")]]
    out = adaptive_output_size(e.call, size)
    if any(s % o for s, o in zip(size, out, strict=True)):
        return e.node("nn.adaptive_avg_pool2d", [x], e.call.ty, {"layout": layout})
    attrs = pool_window([s // o for s, o in zip(size, out, strict=True)])
    attrs.update(layout=layout, out_layout=layout)
    return e.node("nn.avg_pool2d", [x], e.call.ty, attrs)


def _resize2d(e: Emitter, x: int) -> int:
    a = e.call.attrs
    attrs = {
        "layout": str(a.layout),
        "method": str(a.method),
        "coordinate_transformation_mode": str(a.coordinate_transformation_mode),
        "rounding_method": str(a.rounding_method),
    }
    return e.node("image.resize2d", [x], e.call.ty, attrs)


def _conv2d_transpose(e: Emitter, x: int) -> int:
    a = e.call.attrs
    attrs = {
        "strides": [int(v) for v in a.strides],
        "padding": [int(v) for v in a.padding],
        "output_padding": [int(v) for v in a.output_padding],
        "dilation": [int(v) for v in a.dilation],
        "groups": int(a.groups),
        "data_layout": str(a.data_layout),
        "kernel_layout": str(a.kernel_layout),
        "out_layout": str(a.out_layout),
    }
    return e.node("nn.conv2d_transpose", [x, e.operand(1)], e.call.ty, attrs)


def _prelu(e: Emitter, x: int) -> int:
    shape, _ = input_shape(e.builder, e.call.args[0])
    slope_shape, dtype = input_shape(e.builder, e.call.args[1])
    slope = e.operand(1)
    axis = int(e.call.attrs.axis) % len(shape)
    trailing = len(shape) - 1 - axis
    if trailing and slope_shape != [1]:
        slope = e.shaped("reshape", [slope], slope_shape + [1] * trailing, dtype, {})
    return e.node("nn.prelu", [x, slope], e.call.ty)


PRELU_WHERE_COMPOSITE = "example_npu.prelu_where"


def lower_prelu_where(builder: Any, func: relax.Function, env: dict[Any, Any], composite: str):
    """The elementwise PReLU composite (where(x > 0, x, slope * x) or where(x < 0, x * slope, x))
    as one nn.prelu node whose slope broadcasts onto x."""
    bindings = bindings_of(func)
    where = bindings.get(func.body.body, func.body.body)
    compare = bindings.get(where.args[0], where.args[0])
    x = compare.args[0]
    scaled = where.args[2] if compare.op.name == "relax.greater" else where.args[1]
    scaled = bindings.get(scaled, scaled)
    slope = scaled.args[1] if scaled.args[0].same_as(x) else scaled.args[0]
    inputs = [builder.eval_tensor(arg, env, composite) for arg in (x, slope)]
    return Emitter(builder, where, composite, env).node("nn.prelu", inputs, where.ty)


SPATIAL_LOWERINGS: dict[str, Callable[[Emitter, int], Any]] = {
    **{op: _reduce(op) for op in (*_REDUCTIONS, "argmax", "argmin")},
    "nn.adaptive_avg_pool2d": _adaptive_avg_pool2d,
    "image.resize2d": _resize2d,
    "nn.conv2d_transpose": _conv2d_transpose,
    "nn.prelu": _prelu,
    "topk": _topk,
}
