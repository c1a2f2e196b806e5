"""TFLite's own integer kernels of elementwise int8 ops, as 256-entry tables.

For most elementwise ops of a TFLite model the answer is ``quantize(f(dequantize(x)))`` and
:mod:`.qdq` tabulates f in float32. Some TFLite ops define their int8 output by a fixed-point
kernel instead, which differs from that float function by a step on some inputs: LEAKY_RELU (two
Q31 multipliers) and HARD_SWISH (16-bit fixed point with its own roundings). For a TFLite model
``canonicalize_qdq`` asks :func:`kernel_table` first: each entry of ``KERNELS`` is the shape TVM's
TFLite frontend lowers the op to (a template of Relax ops over the dequantized input) and a numpy
re-implementation of TFLite's reference kernel evaluated on the 256 possible inputs. An op of one
int8 input and output has 256 possible inputs, so the table is exactly TFLite's kernel.

To add an op: write its kernel as a function of (input params, output params, dtype, attributes)
returning the int32 results for ``input_grid(dtype)`` and add a ``Kernel`` with the template TVM
lowers it to. The templates are matched exactly (op names, constants, the one input); anything
else falls back to the float table.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
from tvm import relax

from ..relax_types import constant_value

Params = tuple[float, int]  # (scale, zero point) of a per-tensor quantized tensor

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1


def input_grid(dtype: str) -> np.ndarray:
    """The 256 integers of an 8-bit dtype in ``take(table, x, mode="wrap")``'s index order."""
    grid = np.arange(256, dtype=np.int64)
    return np.where(grid >= 128, grid - 256, grid) if dtype == "int8" else grid


# ---- TFLite's fixed-point primitives (quantization_util.cc, common.h, gemmlowp) -----------------


def quantize_multiplier(real_multiplier: float) -> tuple[int, int]:
    """QuantizeMultiplier: (Q31 multiplier, shift) with real = fixed * 2^(shift - 31)."""
    if real_multiplier == 0.0:
        return 0, 0
    mantissa, shift = math.frexp(real_multiplier)
    fixed = int(math.copysign(math.floor(abs(mantissa) * (1 << 31) + 0.5), mantissa))
    if fixed == 1 << 31:
        fixed, shift = fixed // 2, shift + 1
    if shift < -31:
        return 0, 0
    return fixed, shift


def _truncating_divide(numerator: np.ndarray, divisor: int) -> np.ndarray:
    """C's integer division (rounds toward zero)."""
    return np.sign(numerator) * (np.abs(numerator) // divisor)


def rounding_divide_by_pot(values: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp's RoundingDivideByPOT: a right shift rounding half away from zero."""
    if exponent == 0:
        return values
    mask = (1 << exponent) - 1
    threshold = (mask >> 1) + (values < 0)
    return (values >> exponent) + ((values & mask) > threshold)


def multiply_by_quantized_multiplier(values: np.ndarray, real_multiplier: float) -> np.ndarray:
    """MultiplyByQuantizedMultiplier(values, QuantizeMultiplier(real_multiplier)): the doubling
    high multiply (rounding half away from zero) and the rounding right shift."""
    fixed, shift = quantize_multiplier(real_multiplier)
    a = values.astype(np.int64) * (1 << max(shift, 0))
    product = a * fixed
    nudged = product + np.where(product >= 0, 1 << 30, 1 - (1 << 30))
    return rounding_divide_by_pot(_truncating_divide(nudged, 1 << 31), max(-shift, 0))


def _saturating_rounding_doubling_high_mul16(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp's SaturatingRoundingDoublingHighMul on int16."""
    product = a.astype(np.int64) * b
    nudged = product + np.where(product >= 0, 1 << 14, 1 - (1 << 14))
    high = _truncating_divide(nudged, 1 << 15)
    return np.where((a == INT16_MIN) & (b == INT16_MIN), INT16_MAX, high)


def _saturating_doubling_high_mul16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """TFLite's SaturatingDoublingHighMul: like the above but rounding toward zero."""
    high = _truncating_divide(a.astype(np.int64) * b, 1 << 15)
    return np.where((a == INT16_MIN) & (b == INT16_MIN), INT16_MAX, high)


def _saturating_left_shift16(values: np.ndarray, amount: int) -> np.ndarray:
    return np.clip(values * (1 << amount), INT16_MIN, INT16_MAX)


def _int16_multiplier(real_multiplier: float) -> tuple[int, int]:
    """QuantizeMultiplier then DownScaleInt32ToInt16Multiplier: (Q15 multiplier, shift)."""
    fixed, shift = quantize_multiplier(real_multiplier)
    if fixed >= (1 << 31) - 1 - (1 << 15):
        return INT16_MAX, shift
    return (fixed + (1 << 15)) >> 16, shift


# ---- the kernels: (input params, output params, dtype, attributes) -> results on input_grid ------


def leaky_relu(source: Params, output: Params, dtype: str, alpha: float) -> np.ndarray:
    """TFLite's int8 LEAKY_RELU: the identity or the alpha multiplier, by the input's sign; the
    multipliers are float32 products widened to double, as LeakyReluPrepare computes them."""
    (in_scale, in_zero), (out_scale, out_zero) = source, output
    shifted = input_grid(dtype) - in_zero
    identity = float(np.float32(in_scale) / np.float32(out_scale))
    alpha_multiplier = float(np.float32(in_scale) * np.float32(alpha) / np.float32(out_scale))
    scaled = np.where(
        shifted >= 0,
        multiply_by_quantized_multiplier(shifted, identity),
        multiply_by_quantized_multiplier(shifted, alpha_multiplier),
    )
    return scaled + out_zero


def hard_swish(source: Params, output: Params, dtype: str) -> np.ndarray:
    """TFLite's quantized HARD_SWISH (reference_ops::HardSwish with HardSwishPrepare's
    parameters): the input on a 2^7 finer scale in int16, a "relu-ish" factor in [0, 1] as Q15
    (3.0 is 32768), their product with a truncating doubling high multiply, one rounding shift."""
    (in_scale, in_zero), (out_scale, out_zero) = source, output
    hires_input_scale = np.float32(1.0 / 128.0) * np.float32(in_scale)
    reluish_scale = np.float32(3.0) / np.float32(32768.0)
    out_fixed, out_exponent = _int16_multiplier(float(hires_input_scale / np.float32(out_scale)))
    relu_fixed, relu_exponent = _int16_multiplier(float(hires_input_scale / reluish_scale))
    if out_exponent > 0:
        return None  # HardSwishPrepare refuses such a model (output scale under input / 128)
    hires = (input_grid(dtype) - in_zero) * (1 << 7)
    preshift_output = _saturating_rounding_doubling_high_mul16(hires, out_fixed)
    reluish = hires
    if relu_exponent > 0:
        reluish = _saturating_left_shift16(reluish, relu_exponent - 1)
    reluish = _saturating_rounding_doubling_high_mul16(reluish, relu_fixed)
    if relu_exponent > 0:
        reluish = _saturating_left_shift16(reluish, 1)
    if relu_exponent < 0:
        reluish = rounding_divide_by_pot(reluish, -relu_exponent)
    reluish = (reluish + (1 << 15)) >> 1
    product = _saturating_doubling_high_mul16(reluish, preshift_output)
    return rounding_divide_by_pot(product, -out_exponent) + out_zero


# ---- templates: the Relax TVM's TFLite frontend emits for each op --------------------------------

X = "x"  # the template's input: a dequantize of the op's one 8-bit tensor
RELU6_X_PLUS_3 = ("relax.clip", ("relax.add", X, 3.0), 0.0, 6.0)  # HARD_SWISH: x * this / 6


@dataclass(frozen=True)
class Kernel:
    """A TFLite op: the template TVM lowers it to and its integer kernel. ``attributes`` reads
    the kernel's extra arguments from the template's root call."""

    name: str
    template: Any
    kernel: Callable[..., np.ndarray | None]
    attributes: Callable[[relax.Call], tuple] = lambda call: ()


KERNELS = (
    Kernel(
        "LEAKY_RELU",
        ("relax.nn.leakyrelu", X),
        leaky_relu,
        lambda call: (float(call.attrs.alpha),),
    ),
    Kernel("HARD_SWISH", ("relax.divide", ("relax.multiply", X, RELU6_X_PLUS_3), 6.0), hard_swish),
)


def _scalar(expr: Any) -> float | None:
    """The value of a scalar tensor constant or literal (clip's bounds), else None."""
    value = constant_value(expr)
    return float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None


class _Matcher:
    """Matches one template against bound Relax values, collecting the one dequantized input."""

    def __init__(self, lookup: Callable[[Any], Any]):
        self.lookup = lookup
        self.dequantize: relax.Call | None = None

    def _value(self, expr: Any) -> Any:
        return self.lookup(expr) if isinstance(expr, relax.Var) else expr

    def match(self, expr: Any, template: Any) -> bool:
        if isinstance(template, float):
            return _scalar(expr) == template
        value = self._value(expr)
        if not isinstance(value, relax.Call) or not isinstance(value.op, tvm.ir.Op):
            return False
        if template == X:
            return self._input(value)
        name, *args = template
        if value.op.name != name or len(value.args) != len(args):
            return False
        return all(self.match(arg, sub) for arg, sub in zip(value.args, args, strict=True))

    def _input(self, call: relax.Call) -> bool:
        """A dequantize of the same tensor with the same parameters as any seen before."""
        if call.op.name != "relax.dequantize" or not isinstance(call.args[0], relax.Var):
            return False
        if self.dequantize is None:
            self.dequantize = call
            return True
        first = self.dequantize
        return call.args[0].same_as(first.args[0]) and all(
            _scalar(a) == _scalar(b) and _scalar(a) is not None
            for a, b in zip(call.args[1:], first.args[1:], strict=True)
        )


def kernel_table(
    value: relax.Call, lookup: Callable[[Any], Any], output: Params, dtype: str
) -> tuple[relax.Var, np.ndarray] | None:
    """(the 8-bit input, its 256-entry table) when ``value`` (the float argument of a quantize
    with ``output`` parameters and ``dtype``; ``lookup`` gives a variable's bound value) is an
    op in KERNELS, else None."""
    for kernel in KERNELS:
        matcher = _Matcher(lookup)
        if not matcher.match(value, kernel.template) or matcher.dequantize is None:
            continue
        source_var, scale, zero_point = matcher.dequantize.args
        in_scale, in_zero = _scalar(scale), _scalar(zero_point)
        if str(source_var.ty.dtype) != dtype or in_scale is None or in_zero is None:
            continue
        source = (in_scale, int(in_zero))
        results = kernel.kernel(source, output, dtype, *kernel.attributes(value))
        if results is None:
            continue
        info = np.iinfo(dtype)
        return source_var, np.clip(results, info.min, info.max).astype(dtype)
    return None
