"""Support checks of the quantized datapath (quantize, dequantize, QDQ-fused conv / matmul).

The NPU runs per-tensor activations (int8 or int16, any zero point) and int8 symmetric weights
(per tensor or per output channel); src/kernels/quantize.h is the arithmetic. Anything else stays
on TVM's CPU path with the reason given here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from tvm import relax
from tvm.ir.expr import Constant

from .checks import ACCEPT, Verdict, check_layouts, check_static_shapes, reject, tensor_dtype
from .checks import tensor_shape as _shape

ACTIVATION_DTYPES = ("int8", "int16")


def _const_values(expr: Any) -> np.ndarray | None:
    if isinstance(expr, Constant) and hasattr(expr.value, "numpy"):
        return expr.value.numpy()
    return None


def _scalar_params(call: relax.Call) -> Verdict:
    """scale and zero point are scalar constants with a positive finite scale."""
    name = call.op.name.removeprefix("relax.")
    scale, zero_point = (_const_values(arg) for arg in call.args[1:3])
    if scale is None or zero_point is None:
        return reject(f"{name}: scale and zero point must be constants")
    if scale.size != 1 or zero_point.size != 1:
        return reject(
            f"{name}: per-axis activation quantization is not supported (per tensor only)"
        )
    if str(scale.dtype) != "float32" or not np.isfinite(scale).all() or scale.reshape(-1)[0] <= 0:
        return reject(f"{name}: scale must be a positive finite float32")
    return ACCEPT


def check_quantize(call: relax.Call) -> Verdict:
    verdict = check_static_shapes(call)
    if not verdict:
        return verdict
    if tensor_dtype(call.args[0]) != "float32":
        return reject(f"quantize: input dtype {tensor_dtype(call.args[0])} (float32 only)")
    if tensor_dtype(call) not in ACTIVATION_DTYPES:
        return reject(f"quantize: out_dtype {tensor_dtype(call)} (int8 / int16 only)")
    return _scalar_params(call)


def check_dequantize(call: relax.Call) -> Verdict:
    verdict = check_static_shapes(call)
    if not verdict:
        return verdict
    if tensor_dtype(call.args[0]) not in ACTIVATION_DTYPES:
        return reject(f"dequantize: input dtype {tensor_dtype(call.args[0])} (int8 / int16 only)")
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
    if "transpose" in annotated:  # Linear: weight stored [out, in]
        return weight[0], 0
    return weight[-1], len(weight) - 1


def _check_weight(annotated: Mapping[str, Any]) -> Verdict:
    w_dq = annotated["w_dq"]
    weight, scale, zero_point = (_const_values(arg) for arg in w_dq.args)
    if weight is None or str(weight.dtype) != "int8":
        return reject("quantized weight must be an int8 constant")
    if scale is None or zero_point is None or str(scale.dtype) != "float32":
        return reject("weight scale (float32) and zero point must be constants")
    if np.any(zero_point != 0):
        return reject("weights must be symmetric (zero point 0)")
    channels, axis = _out_channels(annotated)
    if scale.size not in (1, channels):
        return reject(f"{scale.size} weight scales for {channels} output channels")
    if scale.size > 1 and int(w_dq.attrs.axis) % weight.ndim != axis:
        return reject(f"per-channel weight scales on axis {int(w_dq.attrs.axis)}, not {axis}")
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        return reject("weight scales must be positive")
    return ACCEPT


def _check_bias(annotated: Mapping[str, Any]) -> Verdict:
    add = annotated["add"]
    if _shape(add) != _shape(annotated["producer"]):
        return reject("add: the bias broadcast grows the result")
    bias = _const_values(annotated["bias"])
    if bias is None or str(bias.dtype) != "float32":
        return reject("bias must be a float32 constant")
    channels, _ = _out_channels(annotated)
    if bias.size != channels:
        return reject(f"bias of {bias.size} values for {channels} channels")
    out_rank = len(_shape(add))
    producer = annotated["producer"]
    if producer.op.name == "relax.nn.conv2d":
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
    x_scale = float(_const_values(annotated["x_dq"].args[1]).reshape(-1)[0])
    w_scale = _const_values(annotated["w_dq"].args[1]).astype("float64")
    y_scale = float(_const_values(annotated["root"].args[1]).reshape(-1)[0])
    multipliers = x_scale * w_scale / y_scale
    if np.any(multipliers < 2.0**-31) or np.any(multipliers >= 2.0**30):
        return reject("requantization multiplier outside [2^-31, 2^30)")
    return ACCEPT


def check_qnn_region(annotated: Mapping[str, Any]) -> Verdict:
    """The whole QDQ chain: activation and weight dequantize, producer, bias, output quantize."""
    producer = annotated["producer"]
    for verdict in (
        check_dequantize(annotated["x_dq"]),
        check_quantize_of_region(annotated["root"]),
        check_static_shapes(producer),
        check_layouts(producer) if producer.op.name == "relax.nn.conv2d" else ACCEPT,
        _check_weight(annotated),
        _check_bias(annotated) if "add" in annotated else ACCEPT,
        _check_requantization(annotated),
    ):
        if not verdict:
            return verdict
    if tensor_dtype(producer) != "float32":
        return reject(f"{producer.op.name}: float computation must be float32")
    return ACCEPT


def check_quantize_of_region(call: relax.Call) -> Verdict:
    if tensor_dtype(call) not in ACTIVATION_DTYPES:
        return reject(f"quantize: out_dtype {tensor_dtype(call)} (int8 / int16 only)")
    return _scalar_params(call)
