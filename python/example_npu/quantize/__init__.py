"""Post-training quantization: ``quantize_model`` turns a float32 Relax model into QDQ form.

- :mod:`.calibrate`: validates the calibration set, runs the float model (TVM's CPU build) and
  records activation ranges (``minmax`` or ``percentile``).
- :mod:`.scheme`: scales and zero points (asymmetric int8 / symmetric int16 activations,
  symmetric int8 weights per output channel or per tensor).
- :mod:`.fold`: folds inference BatchNorm into the convolution before it (as ONNX exporters do).
- :mod:`.rewrite`: finds conv2d / matmul / Linear layers with constant weights (plus an optional
  bias and relu/relu6) and rewrites them, and the glue units, into dequantize -> op -> quantize.
- :mod:`.units`: the glue ops and elementwise islands between layers that get QDQ around them.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import tvm
from tvm import relax

from .calibrate import METHODS, collect_ranges, normalize_batches
from .fold import fold_batch_norm
from .rewrite import Layer, find_layers, rewrite
from .scheme import ACTIVATION_DTYPES, WEIGHT_DTYPES, QuantParams, activation_params
from .units import find_units

__all__ = ["Layer", "QuantParams", "find_layers", "quantize_model"]


def _check_options(weight_dtype, activation_dtype, method, percentile) -> None:
    if weight_dtype not in WEIGHT_DTYPES:
        raise ValueError(
            f"quantize_model: unsupported weight_dtype {weight_dtype!r}; supported: "
            f"{', '.join(WEIGHT_DTYPES)}"
        )
    if activation_dtype not in ACTIVATION_DTYPES:
        raise ValueError(
            f"quantize_model: unsupported activation_dtype {activation_dtype!r}; supported: "
            f"{', '.join(ACTIVATION_DTYPES)} (int16 activations use int8 weights)"
        )
    if method not in METHODS:
        raise ValueError(
            f"quantize_model: unknown calibration method {method!r}; use one of "
            f"{', '.join(METHODS)}"
        )
    if isinstance(percentile, bool) or not isinstance(percentile, int | float):
        raise TypeError(f"quantize_model: percentile must be a number, got {percentile!r}")
    if not 50.0 < percentile <= 100.0:
        raise ValueError(f"quantize_model: percentile must be in (50, 100], got {percentile}")


def quantize_model(
    mod: tvm.IRModule,
    calibration_data: Iterable[Any],
    *,
    weight_dtype: str = "int8",
    activation_dtype: str = "int8",
    per_channel: bool = True,
    method: str = "minmax",
    percentile: float = 99.99,
) -> tvm.IRModule:
    """Post-training quantization of ``mod["main"]`` into QDQ form.

    ``calibration_data`` is an iterable of batches; a batch is an array (single-input model), a
    sequence of arrays in parameter order, or a dict keyed by parameter name. Each must match
    ``main``'s parameter shapes (static dims) and dtype (float32).

    Every conv2d / matmul / Linear layer whose weight is a constant becomes
    ``quantize(act(dequantize(x_q) (*) dequantize(W_q) + bias))``: int8 weights (symmetric, per
    output channel when ``per_channel``), activations of ``activation_dtype`` (int8: asymmetric
    per tensor; int16: symmetric), a float32 bias. Other ops run in float between a dequantize
    and the next quantize; inputs and outputs of ``main`` stay float32. ``method`` picks the
    activation range: ``"minmax"`` (global min/max) or ``"percentile"`` (the
    ``100 - percentile`` and ``percentile`` percentiles, clipping rare outliers).

    Returns a new module; ``mod`` is not changed. Compile it as is for TVM's CPU build, or pass
    it to ``example_npu.partition_for_npu``.
    """
    if not isinstance(mod, tvm.IRModule):
        raise TypeError(f"quantize_model: expected a tvm.IRModule, got {type(mod).__name__}")
    if "main" not in [gv.name_hint for gv in mod.get_global_vars()]:
        raise ValueError("quantize_model: the module has no 'main' function")
    func = mod["main"]
    if not isinstance(func, tvm.relax.Function):
        raise TypeError(f"quantize_model: main is a {type(func).__name__}, not a Relax function")
    _check_options(weight_dtype, activation_dtype, method, percentile)
    if not isinstance(per_channel, bool):
        raise TypeError(f"quantize_model: per_channel must be a bool, got {per_channel!r}")
    batches = normalize_batches(func, calibration_data)

    mod = relax.transform.CanonicalizeBindings()(fold_batch_norm(mod))
    func = mod["main"]
    layers = find_layers(func)
    if not layers:
        warnings.warn(
            "quantize_model: main has no conv2d/matmul layer with a constant float32 weight; "
            "the module is returned unchanged",
            stacklevel=2,
        )
        return mod
    units = find_units(func, layers)
    tensors = [v for layer in layers for v in (layer.data, layer.output)]
    tensors += [v for unit in units for v in (*unit.inputs, unit.output)]
    ranges = collect_ranges(mod, batches, tensors, method, float(percentile))
    activations = {
        var: activation_params(lo, hi, activation_dtype) for var, (lo, hi) in ranges.items()
    }
    for unit in units:  # shape ops and max pooling keep their input's parameters
        if unit.shares_input_params:
            activations[unit.output] = activations[unit.inputs[0]]
    return rewrite(
        mod, layers, units, activations, per_channel=per_channel, weight_dtype=weight_dtype
    )
