"""numpy references of the NPU's quantized glue ops (src/kernels/quantized_ops.h).

Written from the definitions, independent of the C++ kernels. The QDQ glue ops take TVM's float32
steps (its legalization of dequantize / quantize): dequantize is float32(q - zero_point) * scale,
the op runs in float32 (pooling and softmax sum in order, softmax with the C library's expf),
quantize divides by the scale in float32 and rounds half to even.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math

import numpy as np


def f64(value: float) -> float:
    """A float32 model parameter as the float64 the NPU graph carries."""
    return float(np.float32(value))


def dequantize(q: np.ndarray, params: tuple[float, int]) -> np.ndarray:
    """TVM's dequantize: the integer difference as float32, times the float32 scale."""
    return (q.astype(np.int64) - params[1]).astype(np.float32) * np.float32(params[0])


def quantize(value: np.ndarray, out: tuple[float, int], dtype: str, bounds=None) -> np.ndarray:
    """TVM's quantize of a float32 value, after a fused relu / clip's real bounds (low, high)."""
    value = np.asarray(value, dtype=np.float32)
    if bounds is not None:
        low, high = bounds
        value = np.clip(
            value,
            np.float32(-np.inf if low is None else low),
            np.float32(np.inf if high is None else high),
        )
    steps = np.rint(value / np.float32(out[0]))
    info = np.iinfo(dtype)
    return np.clip(steps + np.float32(out[1]), info.min, info.max).astype(dtype)


def requantize(x, x_params, out, dtype, bounds=None) -> np.ndarray:
    return quantize(dequantize(x, x_params), out, dtype, bounds)


def add(a, a_params, b, b_params, out, dtype, bounds=None) -> np.ndarray:
    return quantize(dequantize(a, a_params) + dequantize(b, b_params), out, dtype, bounds)


def multiply(a, a_params, b, b_params, out, dtype, bounds=None) -> np.ndarray:
    return quantize(dequantize(a, a_params) * dequantize(b, b_params), out, dtype, bounds)


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
    """NCHW max / average pooling with TVM's window rules (dilation 1): the dequantized taps
    maxed, or summed one by one in window order (not numpy's pairwise sum) and divided by the
    tap count."""
    n, c, h, w = x.shape
    rows = _window_axis(h, out_hw[0], pool_size[0], strides[0], 1, padding[0], padding[2])
    cols = _window_axis(w, out_hw[1], pool_size[1], strides[1], 1, padding[1], padding[3])
    real = dequantize(x, x_params)
    values = np.zeros((n, c, out_hw[0], out_hw[1]), dtype=np.float32)
    for oh, (r_in, r_pad) in enumerate(rows):
        for ow, (c_in, c_pad) in enumerate(cols):
            acc = np.full((n, c), -np.inf if kind == "max" else 0.0, dtype=np.float32)
            for ih in r_in:
                for iw in c_in:
                    tap = real[:, :, ih, iw]
                    acc = np.maximum(acc, tap) if kind == "max" else acc + tap
            if kind != "max":
                count = r_pad * c_pad if count_include_pad else max(len(r_in) * len(c_in), 1)
                acc = acc / np.float32(count)
            values[:, :, oh, ow] = acc
    return quantize(values, out, dtype)


# TVM's LLVM build calls the C library's expf; numpy's float32 exp is its own (SIMD) code and
# differs in the last bit for about a third of the inputs.
_LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
_LIBM.expf.restype = ctypes.c_float
_LIBM.expf.argtypes = [ctypes.c_float]


def softmax(x, x_params, out, dtype, axis) -> np.ndarray:
    """TVM's float32 softmax of the dequantized rows: max, expf(x - max), the sum in row order,
    a division, then quantize."""
    real = np.moveaxis(dequantize(x, x_params), axis, -1)
    probabilities = np.zeros(real.shape, dtype=np.float32)
    for index in np.ndindex(real.shape[:-1]):
        row = real[index]
        e = np.array([_LIBM.expf(float(v - row.max())) for v in row], dtype=np.float32)
        total = np.float32(0)
        for value in e:
            total = np.float32(total + value)
        probabilities[index] = e / total
    return np.moveaxis(quantize(probabilities, out, dtype), -1, axis)


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
