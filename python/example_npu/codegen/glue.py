"""Codegen of the glue ops: Relax data movement, pooling variants and activations in NPU nodes.

The NPU graph has one node per tensor, so several Relax forms map onto a few NPU ops:

* ``reshape``, ``flatten``, ``squeeze`` and ``expand_dims`` are one ``reshape`` (a view);
* ``split``, ``strided_slice`` and ``take`` with constant indices are ``strided_slice`` boxes
  (views); a ``take`` has one box per run of evenly stepping rows, ``concat``-ed when there
  are several, and a ``reshape`` to the indices' shape;
* ``adaptive_avg_pool2d`` with an output size that divides the input is ``nn.avg_pool2d`` with
  window = stride = input / output; ``max_pool1d`` / ``avg_pool1d`` are 2-D pooling over a
  height-1 view of the input;
* ``nn.silu`` is ``x * sigmoid(x)``, the form TVM legalizes it to;
* torch.export's safe softmax (``where(all(x == -inf), 0, softmax(x))``) is one ``nn.softmax``
  node with ``zero_masked_rows``.

Each lowering returns the node id of the op's value (a tuple of ids for ``split``), or None when
the op is not a glue op and the generic path serialises it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tvm
from tvm import relax

from ..partition.checks.glue import int_values, take_runs

SAFE_SOFTMAX_COMPOSITE = "example_npu.safe_softmax"

_RESHAPES = ("reshape", "flatten", "squeeze", "expand_dims")


class _Emitter:
    """Adds nodes of one lowering to the graph being built."""

    def __init__(self, builder: Any, call: relax.Call, composite: str):
        self.builder = builder
        self.call = call
        self.composite = composite

    def node(self, op: str, inputs: list[int], ty: Any, attrs: dict[str, Any] | None = None):
        """A node whose shape and dtype are those of the Relax type ``ty``."""
        shape, dtype = self.builder.tensor_type(ty, f"{op} result")
        return self.shaped(op, inputs, shape, dtype, attrs or {})

    def shaped(self, op: str, inputs: list[int], shape: list[int], dtype: str, attrs: dict):
        return self.builder.add_node(
            {
                "op": op,
                "name": f"{op.split('.')[-1]}_{len(self.builder.nodes)}",
                "inputs": inputs,
                "shape": shape,
                "dtype": dtype,
                "attrs": attrs,
                "composite": self.composite,
            }
        )


def _input_shape(builder: Any, expr: Any) -> tuple[list[int], str]:
    return builder.tensor_type(expr.ty, "operand")


def _reshape(e: _Emitter, x: int) -> int:
    return e.node("reshape", [x], e.call.ty)


def _slice_begin(shape: list[int], call: relax.Call) -> tuple[list[int], list[int]]:
    """begin / step per input dim of strided_slice, with Python's slice normalisation."""
    axes, begin, end = (int_values(arg) for arg in call.args[1:4])
    strides = int_values(call.args[4]) if len(call.args) > 4 else None
    starts, steps = [0] * len(shape), [1] * len(shape)
    for k, axis in enumerate(axes):
        axis %= len(shape)
        step = strides[k] if strides else 1
        picked = range(shape[axis])[slice(begin[k], end[k], step)]
        starts[axis] = picked.start if len(picked) else 0
        steps[axis] = step
    return starts, steps


def _strided_slice(e: _Emitter, x: int) -> int:
    shape, _ = _input_shape(e.builder, e.call.args[0])
    begin, step = _slice_begin(shape, e.call)
    return e.node("strided_slice", [x], e.call.ty, {"begin": begin, "step": step})


def _take(e: _Emitter, x: int) -> int:
    shape, dtype = _input_shape(e.builder, e.call.args[0])
    axis = int(e.call.attrs.axis) % len(shape)
    runs = take_runs(e.call)
    boxes = []
    for first, step, count in runs:
        begin, steps, rows = [0] * len(shape), [1] * len(shape), list(shape)
        begin[axis], steps[axis], rows[axis] = first, step, count
        boxes.append(e.shaped("strided_slice", [x], rows, dtype, {"begin": begin, "step": steps}))
    taken = boxes[0]
    if len(boxes) > 1:
        rows = list(shape)
        rows[axis] = sum(count for _, _, count in runs)
        taken = e.shaped("concat", boxes, rows, dtype, {"axis": axis})
    return e.node("reshape", [taken], e.call.ty)


def _split(e: _Emitter, x: int) -> tuple | int:
    shape, dtype = _input_shape(e.builder, e.call.args[0])
    if not isinstance(e.call.ty, tvm.ir.type.TupleType):
        return x  # one section: Relax types the result as the input tensor itself
    axis = int(e.call.attrs.axis) % len(shape)
    outputs = []
    offset = 0
    for field in e.call.ty.fields:
        field_shape, _ = e.builder.tensor_type(field, "split result")
        begin = [0] * len(shape)
        begin[axis] = offset
        attrs = {"begin": begin, "step": [1] * len(shape)}
        outputs.append(e.shaped("strided_slice", [x], field_shape, dtype, attrs))
        offset += field_shape[axis]
    return tuple(outputs)


def _broadcast_to(e: _Emitter, x: int) -> int:
    return e.node("broadcast_to", [x], e.call.ty)


def _mean(e: _Emitter, x: int) -> int:
    shape, _ = _input_shape(e.builder, e.call.args[0])
    attrs = e.call.attrs
    axes = list(range(len(shape))) if attrs.axis is None else [int(a) for a in attrs.axis]
    return e.node("mean", [x], e.call.ty, {"axes": axes, "keepdims": bool(attrs.keepdims)})


def _pool_window(pool: list[int]) -> dict[str, Any]:
    return {
        "pool_size": pool,
        "strides": pool,
        "dilation": [1, 1],
        "padding": [0, 0, 0, 0],
        "ceil_mode": False,
        "count_include_pad": False,
    }


def _adaptive_avg_pool2d(e: _Emitter, x: int) -> int:
    shape, _ = _input_shape(e.builder, e.call.args[0])
    layout = str(e.call.attrs.layout)
    size = [shape[layout.index("H")], shape[layout.index("W")]]
    out = size if e.call.attrs.output_size is None else [int(v) for v in e.call.attrs.output_size]
    out = out * 2 if len(out) == 1 else out
    attrs = _pool_window([s // o for s, o in zip(size, out, strict=True)])
    attrs.update(layout=layout, out_layout=layout)
    return e.node("nn.avg_pool2d", [x], e.call.ty, attrs)


def _pool1d(kind: str) -> Callable[[_Emitter, int], int]:
    def lower(e: _Emitter, x: int) -> int:
        shape, dtype = _input_shape(e.builder, e.call.args[0])
        a = e.call.attrs
        layout = str(a.layout)  # NCW or NWC
        lifted = [shape[0], shape[1], 1, shape[2]] if layout == "NCW" else [shape[0], 1, *shape[1:]]
        out_shape, _ = e.builder.tensor_type(e.call.ty, "pool result")
        out_lifted = (
            [out_shape[0], out_shape[1], 1, out_shape[2]]
            if layout == "NCW"
            else [out_shape[0], 1, *out_shape[1:]]
        )
        layout_2d = "NCHW" if layout == "NCW" else "NHWC"
        attrs = {
            "pool_size": [1, int(a.pool_size[0])],
            "strides": [1, int(a.strides[0])],
            "dilation": [1, int(a.dilation[0])],
            "padding": [0, int(a.padding[0]), 0, int(a.padding[1])],
            "ceil_mode": bool(a.ceil_mode),
            "count_include_pad": bool(a.count_include_pad),
            "layout": layout_2d,
            "out_layout": layout_2d,
        }
        image = e.shaped("reshape", [x], lifted, dtype, {})
        pooled = e.shaped(f"nn.{kind}_pool2d", [image], out_lifted, dtype, attrs)
        return e.node("reshape", [pooled], e.call.ty)

    return lower


def _silu(e: _Emitter, x: int) -> int:
    gate = e.node("sigmoid", [x], e.call.ty)
    return e.node("multiply", [x, gate], e.call.ty)


_LOWERINGS: dict[str, Callable[[_Emitter, int], Any]] = {
    **dict.fromkeys(_RESHAPES, _reshape),
    "strided_slice": _strided_slice,
    "take": _take,
    "split": _split,
    "broadcast_to": _broadcast_to,
    "mean": _mean,
    "nn.adaptive_avg_pool2d": _adaptive_avg_pool2d,
    "nn.max_pool1d": _pool1d("max"),
    "nn.avg_pool1d": _pool1d("avg"),
    "nn.silu": _silu,
}


def lower_glue_op(builder: Any, call: relax.Call, env: dict[Any, Any], composite: str) -> Any:
    """Emits the nodes of a glue op and returns its value, or None for other ops."""
    op_name = call.op.name.removeprefix("relax.")
    if op_name == "concat":
        inputs = [builder.eval_tensor(field, env, composite) for field in call.args[0].fields]
        axis = int(call.attrs.axis) if call.attrs.axis is not None else 0
        return _Emitter(builder, call, composite).node("concat", inputs, call.ty, {"axis": axis})
    lowering = _LOWERINGS.get(op_name)
    if lowering is None:
        return None
    x = builder.eval_tensor(call.args[0], env, composite)
    return lowering(_Emitter(builder, call, composite), x)


def lower_safe_softmax(builder: Any, func: relax.Function, env: dict[Any, Any], composite: str):
    """The safe-softmax composite as one softmax node that zeroes fully masked rows."""
    softmax = next(
        binding.value
        for block in func.body.blocks
        for binding in block.bindings
        if isinstance(binding.value, relax.Call)
        and getattr(binding.value.op, "name", "") == "relax.nn.softmax"
    )
    x = builder.eval_tensor(softmax.args[0], env, composite)
    axis = int(softmax.attrs.axis)
    return _Emitter(builder, softmax, composite).node(
        "nn.softmax", [x], softmax.ty, {"axis": axis, "zero_masked_rows": True}
    )
