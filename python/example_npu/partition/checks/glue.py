"""Support checks of the glue ops: data movement, integer-to-float casts, layer normalisation,
clip bounds.

Data movement (reshape, flatten, squeeze, expand_dims, permute_dims, concat, split,
strided_slice, take, broadcast_to) never computes, so it runs for every NPU dtype (float32,
float16, int8, int16): the NPU executes it as a strided view or as DMA copies. layer_norm
computes in float and has the L1 limit of one row's working set (the reductions are checked in
spatial.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm import relax
from tvm.ir.expr import Constant

from ...config import dtype_bytes
from ...relax_types import op_name, tensor_dtype, tensor_shape
from ..verdict import ACCEPT, Verdict, current_config, first_failure, reject
from .compute import NPU_DTYPES, check_dtypes, check_static_shapes, check_tensor_sizes


def _tensors(call: relax.Call) -> list[Any]:
    """The call's result and every tensor operand, tuple fields (concat) included."""
    tensors = [call]
    for arg in call.args:
        if isinstance(arg, relax.Tuple):
            tensors += [field for field in arg.fields if isinstance(field.ty, relax.TensorType)]
        elif isinstance(arg.ty, relax.TensorType):
            tensors.append(arg)
    return tensors


def check_data_movement(call: relax.Call, tensors: list[Any] | None = None) -> Verdict:
    """Static shapes and one NPU dtype of any kind (a view or a copy does not compute)."""
    name = op_name(call)
    tensors = _tensors(call) if tensors is None else tensors
    result_type = call.ty
    if isinstance(result_type, tvm.ir.type.TupleType):  # split: every output
        for field in result_type.fields:
            if not isinstance(field, relax.TensorType):
                return reject(f"{name}: result field {field} is not a tensor")
    for tensor in tensors:
        if tensor_shape(tensor) is None:
            return reject(f"{name}: dynamic or unknown shape {tensor.ty}")
    dtypes = {tensor_dtype(tensor) for tensor in tensors}
    if len(dtypes) != 1:
        return reject(f"{name}: mixed dtypes {sorted(dtypes)}")
    (dtype,) = dtypes
    if dtype not in NPU_DTYPES:
        supported = sorted(NPU_DTYPES)
        return reject(f"{name}: dtype {dtype} has no NPU datapath (supported: {supported})")
    return ACCEPT


def int_values(expr: Any) -> list[int] | None:
    """The integers of a tuple / shape of literals, a PrimValue or an int constant; else None."""
    if isinstance(expr, (relax.Tuple, tvm_ffi.Array, list, tuple)):
        fields = expr.fields if isinstance(expr, relax.Tuple) else expr
        values = [int_values(field) for field in fields]
        if any(value is None or len(value) != 1 for value in values):
            return None
        return [value[0] for value in values]
    if isinstance(expr, relax.ShapeExpr):
        return int_values(list(expr.values))
    value = getattr(expr, "value", None)  # IntImm, PrimValue(IntImm), or a tensor constant
    if isinstance(value, tvm.tirx.IntImm):
        value = value.value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return [int(value)]
    if isinstance(expr, Constant) and hasattr(value, "numpy"):
        array = value.numpy()
        return [int(v) for v in array.reshape(-1)] if array.dtype.kind in "iu" else None
    return None


def check_strided_slice(call: relax.Call) -> Verdict:
    axes, begin, end = (int_values(arg) for arg in call.args[1:4])
    if axes is None or begin is None or end is None:
        return reject("strided_slice: axes, begin and end must be constants")
    strides = int_values(call.args[4]) if len(call.args) > 4 else [1] * len(axes)
    if strides is None:
        return reject("strided_slice: strides must be constants")
    if any(step < 1 for step in strides):
        return reject(f"strided_slice: strides {strides} (the NPU slices with positive steps)")
    return check_data_movement(call)


# A take whose rows fall into more runs than this stays on the CPU (each run is one DMA box).
TAKE_MAX_RUNS = 16


def check_take(call: relax.Call) -> Verdict:
    """take with constant indices: each run of rows stepping evenly upwards is a strided box.

    One run is a view (a scalar index, or an exported ``as_strided``'s gather: ``arange``
    reshaped); several runs (reflection padding's [1, 0, 1, 2, ..., n-1, n-2], a permutation)
    are DMA copies of the boxes into their slices of the output, as a ``concat``. More runs than
    that along axis 0 (the ONNX exporter's adaptive pooling windows) are the row gather of an
    embedding, its ids a constant."""
    indices = call.args[1]
    shape = tensor_shape(call.args[0])
    if not isinstance(indices, Constant) or indices.value.numpy().dtype.kind not in "iu":
        return reject("take: only constant indices are rows the NPU can copy")
    if shape is None:
        return reject("take: unknown input shape")
    runs = take_runs(call)
    axis = int(call.attrs.axis)
    if runs is None:
        return reject(
            f"take: indices outside axis {axis} of {shape} (mode fast reads out of bounds in "
            "TVM's build)"
        )
    if len(runs) > TAKE_MAX_RUNS and not constant_row_gather(call):
        return reject(
            f"take: the indices fall into {len(runs)} runs of evenly stepping rows of axis {axis} "
            f"(at most {TAKE_MAX_RUNS} DMA boxes; a row gather reads in-range int32 / int64 "
            "indices of axis 0)"
        )
    return check_data_movement(call, [call, call.args[0]])  # the indices are an attribute


def constant_row_gather(call: relax.Call) -> bool:
    """Whether a take with constant indices (more runs than DMA boxes) is a gather of rows of
    axis 0 with int32 / int64 indices all inside the table, as an embedding's."""
    shape = tensor_shape(call.args[0])
    indices = call.args[1].value.numpy()
    return (
        int(call.attrs.axis) % len(shape) == 0
        and str(indices.dtype) in ID_DTYPES
        and bool(((indices >= 0) & (indices < shape[0])).all())
    )


ID_DTYPES = ("int32", "int64")


def check_embedding(annotated: Mapping[str, Any]) -> Verdict:
    """take(table, ids) with run-time ids: a DMA gather of whole rows of axis 0, the ids int32 /
    int64 as the exporters give them (their int casts and reshapes ride along: the gather reads
    the original ids, and an id outside the table is a run-time error whatever its type)."""
    take, ids = annotated["root"], annotated["ids"]
    table = take.args[0]
    if isinstance(ids, Constant):
        return reject("take: constant indices are strided boxes, not a gather")
    shape, ids_shape = tensor_shape(table), tensor_shape(ids)
    if shape is None or ids_shape is None:
        return reject("take: dynamic or unknown shape of the table or the ids")
    if int(take.attrs.axis) % max(len(shape), 1) != 0 or not shape:
        return reject(f"take: run-time ids gather rows of axis 0 only (axis {take.attrs.axis})")
    index = take.args[1]
    for dtype in {tensor_dtype(ids), tensor_dtype(index)}:
        if dtype not in ID_DTYPES:
            return reject(f"take: {dtype} ids (the gather reads int32 / int64 ids)")
    if "fixup" in annotated:  # where(less(ids, 0), ids + rows, ids): negative ids from the end
        zero, rows = (annotated[name].value.numpy() for name in ("zero", "rows"))
        if zero.size != 1 or int(zero.reshape(-1)[0]) != 0:
            return reject("take: the ids' fix-up compares with something other than 0")
        if rows.size != 1 or int(rows.reshape(-1)[0]) != shape[0]:
            return reject(f"take: the ids' fix-up adds {rows.reshape(-1)[:1]}, not {shape[0]} rows")
    return check_data_movement(take, [take, table])


# Integer dtypes astype converts to float32 on the NPU (a tokenizer's int64 attention mask).
CAST_INPUT_DTYPES = ("int8", "uint8", "int16", "int32", "int64")


def check_astype(call: relax.Call) -> Verdict:
    """astype of an integer tensor to float32: each element rounded to the nearest float, ties
    to even, as TVM's build converts (exact up to 2**24 in magnitude); or of float32 to int32 /
    int64 ids, truncated toward zero as TVM's build converts (computed position ids)."""
    source, target = tensor_dtype(call.args[0]), tensor_dtype(call)
    to_float = target == "float32" and source in CAST_INPUT_DTYPES
    to_ids = source == "float32" and target in ID_DTYPES
    if not (to_float or to_ids):
        inputs = " / ".join(CAST_INPUT_DTYPES)
        return reject(
            f"astype: {source} -> {target} (the NPU converts {inputs} to float32, and float32 to"
            f" {' / '.join(ID_DTYPES)})"
        )
    return check_static_shapes(call)


def check_tile(call: relax.Call) -> Verdict:
    """tile: DMA copies of the input into each repeat's slice (a concat per repeated axis)."""
    shape = tensor_shape(call.args[0])
    repeats = [int(r) for r in call.attrs.repeats]
    if shape is not None and len(repeats) > len(shape):
        return reject(f"tile: {len(repeats)} repeats for a rank-{len(shape)} input")
    if any(r < 1 for r in repeats):
        return reject(f"tile: repeats {repeats} (the NPU copies at least once)")
    if any(r > TAKE_MAX_RUNS for r in repeats):
        return reject(f"tile: repeats {repeats} (at most {TAKE_MAX_RUNS} copies per axis)")
    return check_data_movement(call)


def take_runs(call: relax.Call) -> list[tuple[int, int, int]] | None:
    """The rows of a constant-index take as runs (first row, step, count), after its mode
    (fast: in range only, else None; wrap; clip); each run is as long as the rows allow. A step
    of 0 repeats one row (BERT's token types, all 0: a broadcast), otherwise it is >= 1."""
    shape = tensor_shape(call.args[0])
    extent = shape[int(call.attrs.axis) % len(shape)]
    values = [int(v) for v in call.args[1].value.numpy().astype("int64").reshape(-1)]
    mode = str(call.attrs.mode)
    if mode == "wrap":
        values = [v % extent for v in values]
    elif mode == "clip":
        values = [min(max(v, 0), extent - 1) for v in values]
    elif any(v < 0 or v >= extent for v in values):
        return None
    runs: list[tuple[int, int, int]] = []
    k = 0
    while k < len(values):
        step = values[k + 1] - values[k] if k + 1 < len(values) else 1
        count = 1
        if step >= 0:
            while k + count < len(values) and values[k + count] - values[k] == step * count:
                count += 1
        if count == 1:
            step = 1  # a single row
        runs.append((values[k], step, count))
        k += count
    return runs


def _float_compute(call: relax.Call) -> Verdict:
    return first_failure((check_static_shapes(call), check_dtypes(call)))


def _l1_bytes() -> int:
    return current_config().l1_sram_bytes


def check_layer_norm(call: relax.Call) -> Verdict:
    verdict = _float_compute(call)
    if not verdict:
        return verdict
    shape = tensor_shape(call.args[0])
    rank = len(shape)
    axes = sorted(int(a) % rank for a in call.attrs.axes)
    if axes != list(range(rank - len(axes), rank)):
        return reject(f"layer_norm: axes {list(call.attrs.axes)} are not the trailing dims")
    row = int(np.prod(shape[rank - len(axes) :]))
    item = dtype_bytes(tensor_dtype(call))
    needed = row * (6 * item + 8)  # x, gamma, beta double buffered, float32 result slots
    if needed > _l1_bytes():
        return reject(f"layer_norm: a {row}-element row needs {needed} bytes of L1")
    return ACCEPT


def clip_bounds(call: relax.Call) -> tuple[float, float] | None:
    bounds = [getattr(arg, "value", None) for arg in call.args[1:3]]
    if any(not isinstance(b, (int, float)) or isinstance(b, bool) for b in bounds):
        return None
    return float(bounds[0]), float(bounds[1])


def check_clip(call: relax.Call) -> Verdict:
    """clip with literal bounds, infinite ones included (hardswish's [-inf, 6], [0, inf])."""
    if clip_bounds(call) is None:
        return reject("clip: bounds must be scalar literals")
    return _float_compute(call)


def check_safe_softmax(annotated: Mapping[str, Any]) -> Verdict:
    """softmax(x) with rows of x that are all -inf set to 0 (torch.export's safe softmax)."""
    softmax, equal, row_max, fill = (annotated[k] for k in ("softmax", "equal", "row_max", "fill"))
    mask_value = equal.args[1].value.numpy()
    if mask_value.size != 1 or not np.isneginf(mask_value).all():
        return reject("where: the mask compares with something other than -inf")
    fill_value = fill.args[1].value.numpy() if isinstance(fill.args[1], Constant) else None
    if fill_value is None or fill_value.size != 1 or float(fill_value) != 0.0:
        return reject("where: masked rows are filled with something other than 0")
    rank = len(tensor_shape(softmax))
    axis = int(softmax.attrs.axis) % rank
    max_axes = None if row_max.attrs.axis is None else [int(a) % rank for a in row_max.attrs.axis]
    if max_axes != [axis] or not bool(row_max.attrs.keepdims):
        return reject("where: the mask is not reduced along the softmax axis")
    if tensor_dtype(fill) != tensor_dtype(softmax):
        return reject("where: the fill changes the dtype")
    return ACCEPT


def check_select(annotated: Mapping[str, Any]) -> Verdict:
    """where(compare(a, b), x, y) of float32 values: the comparison is a 0 / 1 mask on the
    vector unit and the select copies the chosen element (NaN and infinities included)."""
    compare, root = annotated["compare"], annotated["root"]
    values = [root, *compare.args, *root.args[1:]]
    for value in values:
        if tensor_shape(value) is None:
            return reject(f"where: dynamic or unknown shape {value.ty}")
        if tensor_dtype(value) != "float32":
            return reject(
                f"where: {tensor_dtype(value)} values (the NPU compares and selects float32)"
            )
    return check_tensor_sizes(root, values)


def check_nan_guarded_softmax(annotated: Mapping[str, Any]) -> Verdict:
    """where(isnan(s), 0, s) of s = softmax(x): NaNs become +0.0, bit for bit."""
    softmax, fill = annotated["softmax"], annotated["fill"]
    value = fill.value.numpy()
    if value.size != 1 or float(value) != 0.0 or np.signbit(value).any():
        return reject("where: NaNs of the softmax are replaced by something other than +0.0")
    if tensor_dtype(fill) != tensor_dtype(softmax) or tensor_shape(
        annotated["root"]
    ) != tensor_shape(softmax):
        return reject("where: the guard changes the softmax's dtype or shape")
    return ACCEPT
