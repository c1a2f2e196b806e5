"""numpy integer references of the NPU's quantized glue ops (src/kernels/quantized_ops.h).

Written from the formulas, element by element with Python integers, independent of the C++
kernels: every real rescaling factor becomes m0 * 2^-shift (m0 in [2^30, 2^31), computed in
float64 from the float32 scales the model holds) and each result is rounded once, half up.
"""

from __future__ import annotations

import math

import numpy as np
from qdq_models import quantize_multiplier


def f64(value: float) -> float:
    """A float32 model parameter as the float64 the NPU graph carries."""
    return float(np.float32(value))


def scaled(value: int, real: float) -> int:
    """round_half_up(value * real) with real as the NPU's fixed-point multiplier."""
    m0, shift = quantize_multiplier(real)
    return (int(value) * m0 + (1 << (shift - 1))) >> shift


def output_range(dtype: str, out: tuple[float, int], bounds: tuple[float, float] | None):
    """[lo, hi] of the output: the dtype's range narrowed by a fused relu / clip's real bounds."""
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    if bounds is not None:
        low, high = bounds
        scale, zero_point = f64(out[0]), out[1]
        if low is not None:
            lo = max(lo, zero_point + int(np.rint(low / scale)))
        if high is not None:
            hi = min(hi, zero_point + int(np.rint(high / scale)))
    return lo, hi


def _finish(values, dtype, out, bounds=None) -> np.ndarray:
    lo, hi = output_range(dtype, out, bounds)
    return np.clip(np.asarray(values, dtype=object) + out[1], lo, hi).astype(dtype)


def requantize(x, x_params, out, dtype, bounds=None) -> np.ndarray:
    real = f64(x_params[0]) / f64(out[0])
    values = [scaled(v - x_params[1], real) for v in x.reshape(-1).tolist()]
    return _finish(values, dtype, out, bounds).reshape(x.shape)


def add(a, a_params, b, b_params, out, dtype, bounds=None) -> np.ndarray:
    """The exact sum of both fixed-point products, rounded once."""
    a, b = np.broadcast_arrays(a, b)
    ma, sa = quantize_multiplier(f64(a_params[0]) / f64(out[0]))
    mb, sb = quantize_multiplier(f64(b_params[0]) / f64(out[0]))
    shift = max(sa, sb)
    values = []
    for x, y in zip(a.reshape(-1).tolist(), b.reshape(-1).tolist(), strict=True):
        total = ((x - a_params[1]) * ma << (shift - sa)) + ((y - b_params[1]) * mb << (shift - sb))
        values.append((total + (1 << (shift - 1))) >> shift)
    return _finish(values, dtype, out, bounds).reshape(a.shape)


def multiply(a, a_params, b, b_params, out, dtype, bounds=None) -> np.ndarray:
    a, b = np.broadcast_arrays(a, b)
    real = f64(a_params[0]) * f64(b_params[0]) / f64(out[0])
    values = [
        scaled((x - a_params[1]) * (y - b_params[1]), real)
        for x, y in zip(a.reshape(-1).tolist(), b.reshape(-1).tolist(), strict=True)
    ]
    return _finish(values, dtype, out, bounds).reshape(a.shape)


def _window_axis(extent, out_size, kernel, stride, dilation, pad_lo, pad_hi):
    """Per output index: (input taps inside [0, extent), taps inside the user-padded input)."""
    result = []
    for o in range(out_size):
        taps = [o * stride - pad_lo + t * dilation for t in range(kernel)]
        inside = [i for i in taps if 0 <= i < extent]
        padded = sum(1 for i in taps if -pad_lo <= i < extent + pad_hi)
        result.append((inside, padded))
    return result


def pool2d(x, x_params, out, dtype, kind, pool_size, strides, padding, out_hw, count_include_pad):
    """NCHW integer max / average pooling with TVM's window rules (dilation 1)."""
    n, c, h, w = x.shape
    rows = _window_axis(h, out_hw[0], pool_size[0], strides[0], 1, padding[0], padding[2])
    cols = _window_axis(w, out_hw[1], pool_size[1], strides[1], 1, padding[1], padding[3])
    ratio = f64(x_params[0]) / f64(out[0])
    values = np.zeros((n, c, out_hw[0], out_hw[1]), dtype=object)
    xi = x.astype(np.int64) - x_params[1]
    for oh, (r_in, r_pad) in enumerate(rows):
        for ow, (c_in, c_pad) in enumerate(cols):
            window = xi[:, :, r_in][:, :, :, c_in].reshape(n, c, -1)
            if kind == "max":
                values[:, :, oh, ow] = [
                    [scaled(int(v), ratio) for v in row] for row in window.max(axis=2)
                ]
            else:
                count = r_pad * c_pad if count_include_pad else max(len(r_in) * len(c_in), 1)
                values[:, :, oh, ow] = [
                    [scaled(int(v), ratio / count) for v in row] for row in window.sum(axis=2)
                ]
    return _finish(values, dtype, out)


def softmax(x, x_params, out, dtype, axis) -> np.ndarray:
    """exp table E[d] = round(exp(-s d) 2^20), e / (sum(e) * s_out) rounded once."""
    table = [int(v) for v in np.rint(np.ldexp(np.exp(-f64(x_params[0]) * np.arange(256)), 20))]
    m0, shift = quantize_multiplier(1.0 / f64(out[0]))
    moved = np.moveaxis(x.astype(np.int64), axis, -1)
    values = np.zeros(moved.shape, dtype=object)
    for index in np.ndindex(moved.shape[:-1]):
        row = moved[index]
        e = [table[int(row.max() - v)] for v in row]
        denominator = sum(e) << shift
        values[index] = [(2 * v * m0 + denominator) // (2 * denominator) for v in e]
    return np.moveaxis(_finish(values, dtype, out), -1, axis)


def concat(xs, params, out, dtype, axis) -> np.ndarray:
    parts = [requantize(x, p, out, dtype) for x, p in zip(xs, params, strict=True)]
    return np.concatenate(parts, axis=axis)


def table_activation(x, x_params, out, dtype, fn) -> np.ndarray:
    """quantize(fn(dequantize(x))) as the float ops compute it: dequantize and quantize in
    float32, fn in float64 rounded to float32."""
    real = np.float32(x_params[0]) * (x.astype(np.float32) - np.float32(x_params[1]))
    y = np.float32(fn(real.astype(np.float64)))
    info = np.iinfo(dtype)
    q = np.rint(y / np.float32(out[0])) + np.float32(out[1])
    return np.clip(q, info.min, info.max).astype(dtype)


ACTIVATIONS = {
    "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
    "tanh": np.tanh,
    "gelu": lambda v: 0.5 * v * (1.0 + np.vectorize(math.erf)(v / math.sqrt(2.0))),
    "silu": lambda v: v / (1.0 + np.exp(-v)),
}
