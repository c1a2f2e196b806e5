"""Codegen of the glue ops: Relax data movement, pooling variants and activations in NPU nodes.

The NPU graph has one node per tensor, so several Relax forms map onto a few NPU ops:

* ``reshape``, ``flatten``, ``squeeze`` and ``expand_dims`` are one ``reshape`` (a view);
* ``split``, ``strided_slice`` and ``take`` with constant indices are ``strided_slice`` boxes
  (views); a ``take`` has one box per run of evenly stepping rows (a repeated row is a
  ``broadcast_to`` of it), ``concat``-ed when there are several, and a ``reshape`` to the
  indices' shape; with more runs than boxes along axis 0 it is the row gather of an embedding
  (below) whose ids are the constant indices;
* ``max_pool1d`` / ``avg_pool1d`` are 2-D pooling over a height-1 view of the input;
* reductions, resampling, padding, transposed convolution and PReLU are lowered in
  ``spatial.py``;
* ``nn.silu`` is ``x * sigmoid(x)``, the form TVM legalizes it to;
* torch.export's safe softmax (``where(all(x == -inf), 0, softmax(x))``) is one ``nn.softmax``
  node with ``zero_masked_rows``, the ONNX exporter's guard (``where(isnan(s), 0, s)`` of
  ``s = softmax(x)``) one with ``zero_nan``;
* ``where(compare(a, b), x, y)`` is a comparison node giving a float32 0 / 1 mask and a
  ``where`` node reading it (the NPU has no ``bool`` datapath);
* ``take`` with run-time ids (an embedding lookup, with the ids' int casts and reshapes, or the
  ONNX importer's negative-id fix-up) is one ``take`` node: a DMA gather of table rows over the
  flattened original ids (``negative_from_end`` for the fix-up).

Each lowering returns the node id of the op's value (a tuple of ids for ``split``), or None when
the op is not a glue op and the generic path serialises it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tvm
from tvm import relax

from ..partition.checks.glue import TAKE_MAX_RUNS, constant_row_gather, int_values, take_runs
from ..relax_types import bindings_of
from .emitter import Emitter, input_shape
from .spatial import SPATIAL_LOWERINGS

SAFE_SOFTMAX_COMPOSITE = "example_npu.safe_softmax"
NAN_GUARDED_SOFTMAX_COMPOSITE = "example_npu.nan_guarded_softmax"
EMBEDDING_COMPOSITE = "example_npu.embedding"
SELECT_COMPOSITE = "example_npu.select"

_RESHAPES = ("reshape", "flatten", "squeeze", "expand_dims")


def _reshape(e: Emitter, x: int) -> int:
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


def _strided_slice(e: Emitter, x: int) -> int:
    shape, _ = input_shape(e.builder, e.call.args[0])
    begin, step = _slice_begin(shape, e.call)
    return e.node("strided_slice", [x], e.call.ty, {"begin": begin, "step": step})


def _take(e: Emitter, x: int) -> int:
    shape, dtype = input_shape(e.builder, e.call.args[0])
    axis = int(e.call.attrs.axis) % len(shape)
    runs = take_runs(e.call)
    if len(runs) > TAKE_MAX_RUNS and constant_row_gather(e.call):
        ids_shape, ids_dtype = input_shape(e.builder, e.call.args[1])
        count = int(np.prod(ids_shape, dtype=np.int64))
        flat = e.shaped("reshape", [e.operand(1)], [count], ids_dtype, {})
        attrs = {"negative_from_end": False}
        rows = e.shaped("take", [x, flat], [count, *shape[1:]], dtype, attrs)
        return e.node("reshape", [rows], e.call.ty)
    boxes = []
    for first, step, count in runs:
        begin, steps, rows = [0] * len(shape), [1] * len(shape), list(shape)
        begin[axis], steps[axis], rows[axis] = first, max(step, 1), count if step else 1
        box = e.shaped("strided_slice", [x], rows, dtype, {"begin": begin, "step": steps})
        if rows[axis] != count:  # one row repeated: a broadcast of the row
            repeated = rows[:axis] + [count] + rows[axis + 1 :]
            box = e.shaped("broadcast_to", [box], repeated, dtype, {})
        boxes.append(box)
    taken = boxes[0]
    if len(boxes) > 1:
        rows = list(shape)
        rows[axis] = sum(count for _, _, count in runs)
        taken = e.shaped("concat", boxes, rows, dtype, {"axis": axis})
    return e.node("reshape", [taken], e.call.ty)


def _split(e: Emitter, x: int) -> tuple | int:
    shape, dtype = input_shape(e.builder, e.call.args[0])
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


def _tile(e: Emitter, x: int) -> int:
    """One concat of the copies per repeated axis (repeats padded with 1s on the left)."""
    shape, dtype = input_shape(e.builder, e.call.args[0])
    repeats = [int(r) for r in e.call.attrs.repeats]
    repeats = [1] * (len(shape) - len(repeats)) + repeats
    value = x
    for axis, count in enumerate(repeats):
        if count > 1:
            shape = list(shape)
            shape[axis] *= count
            value = e.shaped("concat", [value] * count, shape, dtype, {"axis": axis})
    return e.node("reshape", [value], e.call.ty)


def _broadcast_to(e: Emitter, x: int) -> int:
    return e.node("broadcast_to", [x], e.call.ty)


def _pool1d(kind: str) -> Callable[[Emitter, int], int]:
    def lower(e: Emitter, x: int) -> int:
        shape, dtype = input_shape(e.builder, e.call.args[0])
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


def _silu(e: Emitter, x: int) -> int:
    gate = e.node("sigmoid", [x], e.call.ty)
    return e.node("multiply", [x, gate], e.call.ty)


_LOWERINGS: dict[str, Callable[[Emitter, int], Any]] = {
    **dict.fromkeys(_RESHAPES, _reshape),
    "strided_slice": _strided_slice,
    "take": _take,
    "split": _split,
    "broadcast_to": _broadcast_to,
    "tile": _tile,
    **SPATIAL_LOWERINGS,
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
        return Emitter(builder, call, composite).node("concat", inputs, call.ty, {"axis": axis})
    lowering = _LOWERINGS.get(op_name)
    if lowering is None:
        return None
    x = builder.eval_tensor(call.args[0], env, composite)
    return lowering(Emitter(builder, call, composite, env), x)


def lower_embedding(builder: Any, func: relax.Function, env: dict[Any, Any], composite: str):
    """The embedding composite as one NPU take node over the original ids, flattened (a view):
    the ids' int casts are left out (the gather checks every id against the table's rows)."""
    bindings = bindings_of(func)
    take = bindings.get(func.body.body, func.body.body)
    ids, negative_from_end = take.args[1], False
    while isinstance(bindings.get(ids), relax.Call):
        producer = bindings[ids]
        if producer.op.name == "relax.where":  # Gather's fix-up: negative ids from the end
            negative_from_end = True
            ids = producer.args[2]
        else:
            ids = producer.args[0]  # through astype / reshape
    e = Emitter(builder, take, composite, env)
    ids_shape, ids_dtype = input_shape(builder, ids)
    count = int(np.prod(ids_shape, dtype=np.int64))
    flat = e.shaped("reshape", [builder.eval_tensor(ids, env, composite)], [count], ids_dtype, {})
    shape, dtype = input_shape(builder, take.args[0])
    table = builder.eval_tensor(take.args[0], env, composite)
    attrs = {"negative_from_end": negative_from_end}
    rows = e.shaped("take", [table, flat], [count, *shape[1:]], dtype, attrs)
    return e.node("reshape", [rows], take.ty)


def lower_select(builder: Any, func: relax.Function, env: dict[Any, Any], composite: str):
    """where(compare(a, b), x, y) as a comparison node giving a float32 0 / 1 mask (the NPU has
    no bool datapath) and a where node that reads it."""
    bindings = bindings_of(func)
    where = bindings.get(func.body.body, func.body.body)
    compare = bindings.get(where.args[0], where.args[0])
    e = Emitter(builder, where, composite, env)
    operands = [builder.eval_tensor(arg, env, composite) for arg in compare.args]
    mask_shape, _ = builder.tensor_type(compare.ty, "where condition")
    mask = e.shaped(compare.op.name.removeprefix("relax."), operands, mask_shape, "float32", {})
    x, y = (builder.eval_tensor(arg, env, composite) for arg in where.args[1:])
    return e.node("where", [mask, x, y], where.ty)


def lower_safe_softmax(builder: Any, func: relax.Function, env: dict[Any, Any], composite: str):
    """The safe-softmax composite as one softmax node that zeroes fully masked rows, the
    NaN-guarded one as one softmax node that zeroes NaNs."""
    softmax = next(
        binding.value
        for block in func.body.blocks
        for binding in block.bindings
        if isinstance(binding.value, relax.Call)
        and getattr(binding.value.op, "name", "") == "relax.nn.softmax"
    )
    x = builder.eval_tensor(softmax.args[0], env, composite)
    axis = int(softmax.attrs.axis)
    return Emitter(builder, softmax, composite).node(
        "nn.softmax", [x], softmax.ty, {"axis": axis, _GUARD_ATTRS[composite]: True}
    )


_GUARD_ATTRS = {
    SAFE_SOFTMAX_COMPOSITE: "zero_masked_rows",
    NAN_GUARDED_SOFTMAX_COMPOSITE: "zero_nan",
}
