"""The quantization scheme: scales and zero points from calibrated ranges and from weights.

Affine quantization, as Relax's ops compute it::

    q = clip(round_half_to_even(x / scale) + zero_point, qmin, qmax)    # relax.op.quantize
    x ~ scale * (q - zero_point)                                         # relax.op.dequantize

- int8 activations: per tensor, asymmetric. The calibrated range [lo, hi] is first widened to
  contain 0 (so real 0 is exactly representable, which zero padding and relu need), then
  ``scale = (hi - lo) / 255`` and ``zero_point = clip(round(-128 - lo / scale), -128, 127)``.
- int16 activations: per tensor, symmetric: ``scale = max(|lo|, |hi|) / 32767``,
  ``zero_point = 0``.
- int8 weights: symmetric, ``zero_point = 0``, ``scale = max|w| / 127`` taken per output channel
  (``per_channel=True``) or over the whole tensor; values are clipped to [-127, 127] so the
  grid is symmetric.

A degenerate range (an all-zero tensor or channel) gets scale 1.0: every value is then 0 exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ACTIVATION_DTYPES = ("int8", "int16")
WEIGHT_DTYPES = ("int8",)


@dataclass(frozen=True)
class QuantParams:
    """Scale and zero point of one quantized tensor.

    ``scale`` is float32 and ``zero_point`` has the quantized dtype; both are 0-d (per tensor)
    or 1-D with one entry per slice along ``axis`` (per channel).
    """

    dtype: str
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int = -1

    @property
    def per_channel(self) -> bool:
        return self.scale.ndim == 1


def dtype_range(dtype: str) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def activation_params(lo: float, hi: float, dtype: str) -> QuantParams:
    """Per-tensor parameters of an activation whose calibrated range is [lo, hi]."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"calibrated range [{lo}, {hi}] is not finite (NaN or inf activations)")
    qmin, qmax = dtype_range(dtype)
    if dtype == "int8":
        span = hi - lo
        scale = np.float32(span / (qmax - qmin) if span > 0 else 1.0)
        zero_point = int(np.clip(np.round(qmin - lo / float(scale)), qmin, qmax))
    elif dtype == "int16":
        amax = max(-lo, hi)
        scale = np.float32(amax / qmax if amax > 0 else 1.0)
        zero_point = 0
    else:
        raise ValueError(f"unsupported activation dtype {dtype!r} (use one of {ACTIVATION_DTYPES})")
    if scale == 0:  # a range below float32's smallest normal number
        scale = np.float32(1.0)
    return QuantParams(dtype, np.array(scale, "float32"), np.array(zero_point, dtype))


def weight_params(weight: np.ndarray, axis: int, per_channel: bool, dtype: str = "int8"):
    """Symmetric parameters for ``weight`` and the quantized weight.

    ``axis`` is the output-channel axis of the weight as stored; with ``per_channel`` the scale
    has one entry per slice along it. Returns ``(QuantParams, quantized weight)``.
    """
    if dtype not in WEIGHT_DTYPES:
        raise ValueError(f"unsupported weight dtype {dtype!r} (use one of {WEIGHT_DTYPES})")
    weight = np.asarray(weight, dtype="float32")
    qmax = dtype_range(dtype)[1]  # symmetric grid: [-qmax, qmax]
    axis = axis % weight.ndim
    if per_channel:
        reduce_axes = tuple(i for i in range(weight.ndim) if i != axis)
        amax = np.abs(weight).max(axis=reduce_axes) if weight.size else np.zeros(0)
    else:
        amax = np.array(np.abs(weight).max() if weight.size else 0.0)
    scale = (amax / qmax).astype("float32")
    scale = np.where(scale > 0, scale, np.float32(1.0)).astype("float32")
    shape = [1] * weight.ndim
    if per_channel:
        shape[axis] = weight.shape[axis]
    quantized = np.clip(np.round(weight / scale.reshape(shape)), -qmax, qmax).astype(dtype)
    params = QuantParams(dtype, scale, np.zeros(scale.shape, dtype), axis)
    return params, quantized
