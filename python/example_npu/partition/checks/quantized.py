"""Support checks of the quantized datapath (quantize, dequantize, QDQ chains and islands).

The NPU runs per-tensor activations (int8, uint8 or int16, any zero point) and int8 symmetric
weights (per tensor or per output channel), with a float32 or int32 (through ``dequantize``)
bias; src/kernels/quantize.h and quantized_ops.h are the arithmetic. Anything else stays on TVM's
CPU path with the reason given here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from tvm import relax
from tvm.ir.expr import Constant

from ...relax_types import constant_value, tensor_dtype
from ...relax_types import tensor_shape as _shape
from ..verdict import ACCEPT, Verdict, first_failure, reject
from .compute import (
    check_layouts,
    check_out_dtype,
    check_pool,
    check_softmax,
    check_static_shapes,
)
from .spatial import check_conv2d_transpose

ACTIVATION_DTYPES = ("int8", "uint8", "int16")
# Lookup tables and softmax exponent tables cover 8-bit inputs only.
TABLE_DTYPES = ("int8", "uint8")
_LUT_DTYPES = (*TABLE_DTYPES, "float32")


def _scalar_params(call: relax.Call) -> Verdict:
    """scale and zero point are scalar constants with a positive normal float32 scale (the NPU
    computes TVM's float32 steps with it; a subnormal one is not a quantization step)."""
    name = call.op.name.removeprefix("relax.")
    scale, zero_point = (constant_value(arg) for arg in call.args[1:3])
    if scale is None or zero_point is None:
        return reject(f"{name}: scale and zero point must be constants")
    if scale.size != 1 or zero_point.size != 1:
        return reject(
            f"{name}: per-axis activation quantization is not supported (per tensor only)"
        )
    value = scale.reshape(-1)[0]
    if str(scale.dtype) != "float32" or not np.isfinite(value) or value < np.finfo("float32").tiny:
        return reject(f"{name}: scale must be a positive normal float32")
    return ACCEPT


def check_quantize(call: relax.Call) -> Verdict:
    verdict = check_static_shapes(call)
    if not verdict:
        return verdict
    if tensor_dtype(call.args[0]) != "float32":
        return reject(f"quantize: input dtype {tensor_dtype(call.args[0])} (float32 only)")
    if tensor_dtype(call) not in ACTIVATION_DTYPES:
        return reject(f"quantize: out_dtype {tensor_dtype(call)} (int8 / uint8 / int16 only)")
    return _scalar_params(call)


def check_dequantize(call: relax.Call) -> Verdict:
    verdict = check_static_shapes(call)
    if not verdict:
        return verdict
    if tensor_dtype(call.args[0]) not in ACTIVATION_DTYPES:
        return reject(
            f"dequantize: input dtype {tensor_dtype(call.args[0])} (int8 / uint8 / int16 only)"
        )
    if tensor_dtype(call) != "float32":
        return reject(f"dequantize: out_dtype {tensor_dtype(call)} (float32 only)")
    return _scalar_params(call)


def _out_channels(annotated: Mapping[str, Any]) -> tuple[int, int]:
    """(number of output channels, the weight axis that indexes them)."""
    producer = annotated["producer"]
    weight = _shape(annotated["w_dq"])
    if producer.op.name == "relax.nn.conv2d":
        axis = str(producer.attrs.kernel_layout).index("O")
        return weight[axis], axis
    if producer.op.name == "relax.nn.conv2d_transpose":  # IOHW, O per group
        return weight[1] * int(producer.attrs.groups), 1
    if "transpose" in annotated:  # Linear: weight stored [out, in]
        return weight[0], 0
    return weight[-1], len(weight) - 1


def _check_symmetric_constant(call: relax.Call, dtype: str, what: str, channels: int) -> Verdict:
    """dequantize(`dtype` constant, positive float32 scales (one or per channel), zero point 0)."""
    values, scale, zero_point = (constant_value(arg) for arg in call.args)
    if values is None or str(values.dtype) != dtype:
        return reject(f"a quantized {what} must be an {dtype} constant")
    if scale is None or zero_point is None or str(scale.dtype) != "float32":
        return reject(f"{what} scale (float32) and zero point must be constants")
    if np.any(zero_point != 0):
        return reject(f"{what}s must be symmetric (zero point 0)")
    if scale.size not in (1, channels):
        return reject(f"{scale.size} {what} scales for {channels} output channels")
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        return reject(f"{what} scales must be positive and finite")
    return ACCEPT


def _check_weight(annotated: Mapping[str, Any]) -> Verdict:
    w_dq = annotated["w_dq"]
    channels, axis = _out_channels(annotated)
    verdict = _check_symmetric_constant(w_dq, "int8", "weight", channels)
    if not verdict:
        return verdict
    scale, ndim = constant_value(w_dq.args[1]), len(_shape(w_dq))
    if scale.size > 1 and int(w_dq.attrs.axis) % ndim != axis:
        return reject(f"per-channel weight scales on axis {int(w_dq.attrs.axis)}, not {axis}")
    return ACCEPT


def _check_bias(annotated: Mapping[str, Any]) -> Verdict:
    add = annotated["add"]
    if _shape(add) != _shape(annotated["producer"]):
        return reject("add: the bias broadcast grows the result")
    channels, _ = _out_channels(annotated)
    bias_expr = annotated["bias"]
    if isinstance(bias_expr, relax.Call):  # onnxruntime's int32 bias in accumulator units
        verdict = _check_symmetric_constant(bias_expr, "int32", "bias", channels)
        if not verdict:
            return verdict
        bias = constant_value(bias_expr.args[0])
    else:
        bias = constant_value(bias_expr)
        if bias is None or str(bias.dtype) != "float32":
            return reject("bias must be a float32 constant")
    if bias.size != channels:
        return reject(f"bias of {bias.size} values for {channels} channels")
    out_rank = len(_shape(add))
    producer = annotated["producer"]
    if producer.op.name in _CONVOLUTIONS:
        channel_axis = str(producer.attrs.data_layout).index("C")
    else:
        channel_axis = out_rank - 1
    aligned = [1] * (out_rank - len(_shape(annotated["bias_term"]))) + _shape(
        annotated["bias_term"]
    )
    if any(extent != 1 for d, extent in enumerate(aligned) if d != channel_axis):
        return reject("bias must broadcast along the output channels only")
    return ACCEPT


def _check_requantization(annotated: Mapping[str, Any]) -> Verdict:
    x_scale = float(constant_value(annotated["x_dq"].args[1]).reshape(-1)[0])
    w_scale = constant_value(annotated["w_dq"].args[1]).astype("float64")
    y_scale = float(constant_value(annotated["root"].args[1]).reshape(-1)[0])
    multipliers = x_scale * w_scale / y_scale
    if np.any(multipliers < 2.0**-31) or np.any(multipliers >= 2.0**30):
        return reject("requantization multiplier outside [2^-31, 2^30)")
    return ACCEPT


_CONVOLUTIONS = ("relax.nn.conv2d", "relax.nn.conv2d_transpose")


def _check_producer(producer: relax.Call) -> Verdict:
    """The float op's own attributes: a conv's layouts, a transposed conv's whole check."""
    if producer.op.name == "relax.nn.conv2d":
        return check_layouts(producer)
    if producer.op.name == "relax.nn.conv2d_transpose":
        return check_conv2d_transpose(producer)
    return ACCEPT


def check_qnn_region(annotated: Mapping[str, Any]) -> Verdict:
    """The whole QDQ chain: activation and weight dequantize, producer, bias, output quantize."""
    producer = annotated["producer"]
    for verdict in (
        check_dequantize(annotated["x_dq"]),
        check_quantize_of_region(annotated["root"]),
        check_static_shapes(producer),
        _check_producer(producer),
        _check_weight(annotated),
        _check_bias(annotated) if "add" in annotated else ACCEPT,
        _check_requantization(annotated),
    ):
        if not verdict:
            return verdict
    if tensor_dtype(producer) != "float32":
        return reject(f"{producer.op.name}: float computation must be float32")
    return ACCEPT


def check_clip_bounds(call: relax.Call) -> Verdict:
    """clip(x, lo, hi) with literal bounds, lo <= hi: a clamp of the quantized result."""
    bounds = [getattr(arg, "value", None) for arg in call.args[1:]]
    if any(not isinstance(bound, (int, float)) for bound in bounds):
        return reject(f"clip: bounds {bounds} are not literals")
    if bounds[0] > bounds[1]:
        return reject(f"clip: empty range {bounds}")
    return ACCEPT


def check_quantize_of_region(call: relax.Call) -> Verdict:
    if tensor_dtype(call) not in ACTIVATION_DTYPES:
        return reject(f"quantize: out_dtype {tensor_dtype(call)} (int8 / uint8 / int16 only)")
    return _scalar_params(call)


# ---- QDQ islands around the glue ops (quantized_patterns.py) ----------------------------------

_MIN_MULTIPLIER, _MAX_MULTIPLIER = 2.0**-31, 2.0**30


def _scale(call: relax.Call) -> float:
    return float(constant_value(call.args[1]).reshape(-1)[0])


def _rescales_fit(name: str, *factors: float) -> Verdict:
    """Every real rescaling factor must be representable as the NPU's fixed-point multiplier."""
    for factor in factors:
        if not _MIN_MULTIPLIER <= factor < _MAX_MULTIPLIER:
            return reject(f"{name}: rescaling factor {factor:.3g} outside [2^-31, 2^30)")
    return ACCEPT


def _island_boundaries(annotated: Mapping[str, Any], inputs: list[str]) -> Verdict:
    """The dequantize of every input and the output quantize: per tensor, constant, integer."""
    for name in inputs:
        verdict = check_dequantize(annotated[name])
        if not verdict:
            return verdict
    return check_quantize_of_region(annotated["root"])


def _activation(annotated: Mapping[str, Any]) -> Verdict:
    activation = annotated.get("activation")
    if activation is not None and activation.op.name == "relax.clip":
        return check_clip_bounds(activation)
    return ACCEPT


def check_requantize_region(annotated: Mapping[str, Any]) -> Verdict:
    """quantize([relu | clip](dequantize(x))): a rescale with a clamp."""
    verdict = first_failure(
        (
            _island_boundaries(annotated, ["x_dq"]),
            _activation(annotated),
            check_static_shapes(annotated["root"]),
        )
    )
    if not verdict:
        return verdict
    return _rescales_fit("requantize", _scale(annotated["x_dq"]) / _scale(annotated["root"]))


def check_binary_region(annotated: Mapping[str, Any]) -> Verdict:
    """quantize([relu | clip](add | multiply(dequantize(a), dequantize(b))))."""
    op = annotated["op"]
    verdict = first_failure(
        (
            _island_boundaries(annotated, ["lhs_dq", "rhs_dq"]),
            _activation(annotated),
            check_static_shapes(op),
        )
    )
    if not verdict:
        return verdict
    lhs, rhs, out = (
        _scale(annotated["lhs_dq"]),
        _scale(annotated["rhs_dq"]),
        _scale(annotated["root"]),
    )
    name = op.op.name.removeprefix("relax.")
    if name == "add":
        return _rescales_fit(name, lhs / out, rhs / out)
    return _rescales_fit(name, lhs * rhs / out)


def check_activation_matmul_region(annotated: Mapping[str, Any]) -> Verdict:
    """quantize(matmul(dequantize(a), dequantize(b))) of two run-time tensors (attention's q.k^T
    and p.v): one integer matmul, b (int8, any zero point) as its weight."""
    op, rhs = annotated["op"], annotated["rhs_dq"]
    if isinstance(rhs.args[0], Constant):
        return reject("matmul: a constant weight is the qnn_matmul chain's")
    verdict = first_failure(
        (
            _island_boundaries(annotated, ["lhs_dq", "rhs_dq"]),
            check_static_shapes(op),
            check_out_dtype(op),
        )
    )
    if not verdict:
        return verdict
    if tensor_dtype(rhs.args[0]) != "int8":
        return reject(
            f"matmul: {tensor_dtype(rhs.args[0])} right operand (the integer matmul reads int8)"
        )
    if min(len(_shape(annotated["lhs_dq"])), len(_shape(rhs))) < 2:
        return reject("matmul: the integer matmul takes operands of rank >= 2")
    lhs, rhs_scale, out = (_scale(annotated[n]) for n in ("lhs_dq", "rhs_dq", "root"))
    return _rescales_fit("matmul", lhs * rhs_scale / out)


def check_pool_region(annotated: Mapping[str, Any]) -> Verdict:
    """quantize(max_pool2d | avg_pool2d(dequantize(x))): the float op's own checks, then scales."""
    op = annotated["op"]
    verdict = first_failure((_island_boundaries(annotated, ["x_dq"]), check_pool(op)))
    if not verdict:
        return verdict
    ratio = _scale(annotated["x_dq"]) / _scale(annotated["root"])
    taps = int(op.attrs.pool_size[0]) * int(op.attrs.pool_size[1])
    return _rescales_fit(op.op.name.removeprefix("relax."), ratio, ratio / taps)


def mean_pool_layout(call: relax.Call) -> str | None:
    """ "NCHW" / "NHWC" when mean reduces the two spatial axes of a 4-D tensor, else None."""
    shape = _shape(call.args[0])
    if shape is None or len(shape) != 4 or call.attrs.axis is None:
        return None
    axes = sorted(int(axis) % 4 for axis in call.attrs.axis)
    return {(2, 3): "NCHW", (1, 2): "NHWC"}.get(tuple(axes))


def check_mean_region(annotated: Mapping[str, Any]) -> Verdict:
    """quantize(mean(dequantize(x), spatial axes)): global average pooling."""
    op = annotated["op"]
    verdict = first_failure((_island_boundaries(annotated, ["x_dq"]), check_static_shapes(op)))
    if not verdict:
        return verdict
    layout = mean_pool_layout(op)
    if layout is None:
        return reject("mean: only the two spatial axes of a 4-D tensor run as integer pooling")
    shape = _shape(op.args[0])
    taps = shape[2] * shape[3] if layout == "NCHW" else shape[1] * shape[2]
    ratio = _scale(annotated["x_dq"]) / _scale(annotated["root"])
    return _rescales_fit("mean", ratio, ratio / taps)


def check_softmax_region(annotated: Mapping[str, Any]) -> Verdict:
    """quantize(softmax(dequantize(x))) with 8-bit x: integer softmax by an exponent table."""
    verdict = first_failure(
        (_island_boundaries(annotated, ["x_dq"]), check_softmax(annotated["op"]))
    )
    if not verdict:
        return verdict
    dtype = tensor_dtype(annotated["x_dq"].args[0])
    if dtype not in TABLE_DTYPES:
        return reject(f"softmax: {dtype} input (the exponent table covers 8-bit inputs)")
    return _rescales_fit("softmax", 1.0 / _scale(annotated["root"]))


def check_concat_region(annotated: Mapping[str, Any]) -> Verdict:
    """quantize(concat(dequantize(x_i)...)): each input requantized into its slice."""
    names = sorted(name for name in annotated if name.startswith("dq_"))
    verdict = first_failure(
        (_island_boundaries(annotated, names), check_static_shapes(annotated["root"]))
    )
    if not verdict:
        return verdict
    out = _scale(annotated["root"])
    return _rescales_fit("concat", *(_scale(annotated[name]) / out for name in names))


def check_lookup_table(call: relax.Call) -> Verdict:
    """take(table, x, axis=0) with a 256-entry table of 8-bit integers (int8 x may map to uint8
    results and back), or of finite float32 values (a float function of x, canonicalize_qdq's
    rule 5)."""
    table = constant_value(call.args[0])
    data = call.args[1]
    dtype = tensor_dtype(data)
    if dtype not in TABLE_DTYPES:
        return reject(f"take: {dtype} indices (an 8-bit table lookup needs int8 / uint8)")
    if table is None or table.shape != (256,) or str(table.dtype) not in _LUT_DTYPES:
        return reject("take: the table must be a 256-entry int8, uint8 or float32 constant")
    if str(table.dtype) == "float32" and not np.all(np.isfinite(table)):
        return reject("take: a float32 table must be finite")
    if call.attrs.axis is None or int(call.attrs.axis) != 0:
        return reject("take: a table lookup takes axis 0")
    if dtype == "int8" and str(call.attrs.mode) != "wrap":
        return reject('take: int8 indices need mode="wrap" (negative values index from the end)')
    return check_static_shapes(call)
