"""QDQ-form Relax modules (what ONNX QDQ models and quantize_model produce) and the integer
reference of exactly the arithmetic the NPU performs (src/kernels/quantize.h)."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax


def _c(value, dtype):
    return relax.const(np.asarray(value, dtype=dtype))


def qdq_module(
    kind: str,
    x_shape: tuple[int, ...],
    weight_q: np.ndarray,
    weight_scale: np.ndarray,
    x_params: tuple[float, int],
    y_params: tuple[float, int],
    bias: np.ndarray | None = None,
    activation: str | None = None,
    act_dtype: str = "int8",
    conv_attrs: dict | None = None,
    weight_zero_point: int = 0,
    int32_bias: bool = False,
    float_input: bool = False,
) -> tvm.IRModule:
    """main(x_q) = quantize(act(op(dequantize(x_q), dequantize(w_q)) + bias)); kind in conv2d /
    conv2d_transpose (IOHW weight, per-channel scales on axis 1) / matmul / dense. With int32_bias
    the bias is onnxruntime's: int32 integers under a dequantize with scale x_scale * w_scale
    (float32), as ``int32_bias_values`` computes. With float_input, main takes float x and
    quantizes it first."""
    x = relax.Var("x", relax.TensorType(x_shape, "float32" if float_input else act_dtype))
    x_scale, x_zp = x_params
    y_scale, y_zp = y_params
    channel_axis = {"conv2d": 0, "conv2d_transpose": 1, "matmul": 1, "dense": 0}[kind]
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            xq = x
            if float_input:
                xq = bb.emit(
                    relax.op.quantize(
                        x, _c(x_scale, "float32"), _c(x_zp, act_dtype), out_dtype=act_dtype
                    )
                )
            xf = bb.emit(relax.op.dequantize(xq, _c(x_scale, "float32"), _c(x_zp, act_dtype)))
            wf = bb.emit(
                relax.op.dequantize(
                    relax.const(weight_q),
                    _c(weight_scale, "float32"),
                    _c(np.full(weight_scale.shape, weight_zero_point, dtype="int8"), "int8"),
                    axis=channel_axis,
                )
            )
            if kind in ("conv2d", "conv2d_transpose"):
                conv = getattr(relax.op.nn, kind)
                y = bb.emit(conv(xf, wf, **(conv_attrs or {})))
                bias_shape = (1, -1, 1, 1)
            elif kind == "matmul":
                y = bb.emit(relax.op.matmul(xf, wf))
                bias_shape = (-1,)
            else:
                y = bb.emit(relax.op.matmul(xf, relax.op.permute_dims(wf)))
                bias_shape = (-1,)
            if bias is not None and int32_bias:
                bias_scale = np.float32(x_scale) * np.asarray(weight_scale, "float32")
                bias_dq = bb.emit(
                    relax.op.dequantize(
                        relax.const(int32_bias_values(bias, x_scale, weight_scale)),
                        relax.const(bias_scale.reshape(-1)),
                        relax.const(np.zeros(bias_scale.size, "int32")),
                        axis=0,
                    )
                )
                y = bb.emit(relax.op.add(y, bb.emit(relax.op.reshape(bias_dq, bias_shape))))
            elif bias is not None:
                y = bb.emit(relax.op.add(y, _c(bias.reshape(bias_shape), "float32")))
            if activation == "relu":
                y = bb.emit(relax.op.nn.relu(y))
            elif activation == "relu6":
                y = bb.emit(relax.op.clip(y, 0, 6))
            out = bb.emit_output(
                relax.op.quantize(
                    y, _c(y_scale, "float32"), _c(y_zp, act_dtype), out_dtype=act_dtype
                )
            )
        bb.emit_func_output(out)
    return bb.get()


def int32_bias_values(bias: np.ndarray, x_scale: float, weight_scale: np.ndarray) -> np.ndarray:
    """onnxruntime's int32 bias: round(bias / (x_scale * w_scale)) with the float32 product."""
    scale = np.float32(x_scale) * np.broadcast_to(np.asarray(weight_scale, "float32"), bias.shape)
    return np.rint(bias.astype(np.float64) / scale.astype(np.float64)).astype("int32")


def quantize_multiplier(real: float) -> tuple[int, int]:
    mantissa, exponent = np.frexp(real)
    m0 = int(round(mantissa * (1 << 31)))
    if m0 == 1 << 31:
        m0 //= 2
        exponent += 1
    return m0, 31 - int(exponent)


def requantize_reference(
    acc: np.ndarray,
    x_scale: float,
    weight_scale: np.ndarray,
    y_params: tuple[float, int],
    bias: np.ndarray | None,
    activation: str | None,
    act_dtype: str,
    bias_q: np.ndarray | None = None,
) -> np.ndarray:
    """acc: int64 accumulators with output channels last. The NPU's integer epilogue; bias_q
    (an int32 bias already in accumulator units) replaces the float bias when given."""
    y_scale, y_zp = y_params
    channels = acc.shape[-1]
    scales = np.broadcast_to(np.asarray(weight_scale, "float64").reshape(-1), (channels,))
    info = np.iinfo(act_dtype)
    lo, hi = int(info.min), int(info.max)
    if activation in ("relu", "relu6"):
        lo = max(lo, y_zp)
    if activation == "relu6":
        hi = min(hi, y_zp + int(np.rint(6.0 / np.float64(np.float32(y_scale)))))
    out = np.empty(acc.shape, dtype=np.int64)
    flat_acc = acc.reshape(-1, channels)
    flat_out = out.reshape(-1, channels)
    x_scale64 = np.float64(np.float32(x_scale))
    y_scale64 = np.float64(np.float32(y_scale))
    for c in range(channels):
        w_scale = np.float64(np.float32(scales[c]))
        m0, shift = quantize_multiplier(x_scale64 * w_scale / y_scale64)
        values = flat_acc[:, c].astype(object)
        if bias_q is not None:
            values = values + int(bias_q[c])
        elif bias is not None:
            values = values + int(np.rint(np.float64(np.float32(bias[c])) / (x_scale64 * w_scale)))
        scaled = [(int(v) * m0 + (1 << (shift - 1))) >> shift for v in values]
        flat_out[:, c] = np.clip(np.array(scaled, dtype=np.int64) + y_zp, lo, hi)
    return out.astype(act_dtype)
