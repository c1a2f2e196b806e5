"""The example_npu pattern table.

One row per pattern (row.py): name, a builder for its dataflow pattern, the annotated call the
check inspects, and the support check. Rows later in the table have higher priority (fused patterns
last). Build-dependent rows register only when their Relax op exists in the installed TVM.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import tvm
from tvm.relax.backend import _ffi_api as _registry_api
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix, register_patterns
from tvm.relax.dpl.pattern import DFPattern, is_const, is_op, is_tuple, wildcard

from .chains import chain_row
from .checks import compute, glue, quantized, spatial
from .quantized_rows import QUANTIZED_ROWS
from .row import PREFIX, CallCheck, PatternBuilder, PatternRow
from .verdict import Verdict


def _unary(op: str, extra_args: int = 0) -> PatternBuilder:
    def build() -> tuple[DFPattern, dict[str, DFPattern]]:
        data = wildcard()
        root = is_op(op)(data, *[wildcard() for _ in range(extra_args)])
        return root, {"input": data, "root": root}

    return build


def _binary(op: str) -> PatternBuilder:
    def build() -> tuple[DFPattern, dict[str, DFPattern]]:
        lhs, rhs = wildcard(), wildcard()
        root = is_op(op)(lhs, rhs)
        return root, {"lhs": lhs, "rhs": rhs, "root": root}

    return build


def _with_args(op: str) -> PatternBuilder:
    """op(data, ...) with any further (attribute-like) arguments."""

    def build() -> tuple[DFPattern, dict[str, DFPattern]]:
        data = wildcard()
        root = is_op(op)(data, varg_default_wildcard=True)
        return root, {"input": data, "root": root}

    return build


CONCAT_MAX_INPUTS = 16


def _concat() -> tuple[DFPattern, dict[str, DFPattern]]:
    """concat of an inline tuple of 1 to CONCAT_MAX_INPUTS tensors."""
    root = None
    for count in range(1, CONCAT_MAX_INPUTS + 1):
        call = is_op("relax.concat")(is_tuple([wildcard() for _ in range(count)]))
        root = call if root is None else root | call
    return root, {"root": root}


def _safe_softmax() -> tuple[DFPattern, dict[str, DFPattern]]:
    """torch.export's safe softmax: where(all(x == -inf, axis), 0, softmax(x, axis))."""
    x = wildcard()
    softmax = is_op("relax.nn.softmax")(x)
    equal = is_op("relax.equal")(x, is_const())
    kept = is_op("relax.astype")(is_op("relax.logical_not")(equal))
    row_max = is_op("relax.max")(kept)
    masked = is_op("relax.logical_not")(is_op("relax.astype")(row_max))
    fill = is_op("relax.full_like")(softmax, is_const())
    root = is_op("relax.where")(masked, fill, softmax)
    annotations = {"input": x, "softmax": softmax, "equal": equal, "row_max": row_max}
    return root, {**annotations, "fill": fill, "root": root}


def _prelu_where() -> tuple[DFPattern, dict[str, DFPattern]]:
    """PReLU as importers spell it elementwise: torch.export's where(x > 0, x, slope * x) and
    ONNX's where(x < 0, x * slope, x) (a slope over several axes)."""
    x, slope, zero = wildcard(), wildcard(), is_const()
    multiply = is_op("relax.multiply")
    scaled = multiply(slope, x) | multiply(x, slope)
    greater, less = is_op("relax.greater")(x, zero), is_op("relax.less")(x, zero)
    where = is_op("relax.where")
    root = where(greater, x, scaled) | where(less, scaled, x)
    annotations = {"input": x, "slope": slope, "zero": zero, "scaled": scaled}
    return root, {**annotations, "root": root}


def _embedding() -> tuple[DFPattern, dict[str, DFPattern]]:
    """take(table, ids) with run-time ids, with the int cast and the flattening reshape the
    exporters put on the ids (torch: astype(int32) then reshape), or the ONNX importer's
    negative-id fix-up of Gather, where(less(ids, 0), ids + rows, ids)."""
    table, ids, zero, rows = wildcard(), wildcard(), is_const(), is_const()
    # An integer cast rides along; float32 ids cast to int (computed position ids) are the
    # NPU's own cast before the gather.
    cast = is_op("relax.astype")(ids.has_dtype("int64") | ids.has_dtype("int32"))
    reshape = is_op("relax.reshape")
    fixup = is_op("relax.where")(is_op("relax.less")(ids, zero), is_op("relax.add")(ids, rows), ids)
    index = reshape(cast, wildcard()) | cast | reshape(ids, wildcard()) | fixup | ids
    root = is_op("relax.take")(table, index)
    return root, {"ids": ids, "fixup": fixup, "zero": zero, "rows": rows, "root": root}


# Comparisons whose result the NPU carries as a float32 0 / 1 mask into a select.
_COMPARISONS = ("greater", "greater_equal", "less", "less_equal", "equal", "not_equal")


def _select() -> tuple[DFPattern, dict[str, DFPattern]]:
    """where(compare(a, b), x, y): torch's softplus and Mish (where(x > 20, x, log1p(exp(x)))),
    a constant causal mask (canonicalized to mask > 0.5), clamps written as selects."""
    a, b = wildcard(), wildcard()
    compare = is_op(f"relax.{_COMPARISONS[0]}")(a, b)
    for name in _COMPARISONS[1:]:
        compare = compare | is_op(f"relax.{name}")(a, b)
    root = is_op("relax.where")(compare, wildcard(), wildcard())
    return root, {"compare": compare, "root": root}


def _nan_guarded_softmax() -> tuple[DFPattern, dict[str, DFPattern]]:
    """The ONNX exporter's masked softmax: where(isnan(softmax(x)), 0, softmax(x))."""
    x = wildcard()
    softmax = is_op("relax.nn.softmax")(x)
    fill = is_const()
    root = is_op("relax.where")(is_op("relax.isnan")(softmax), fill, softmax)
    return root, {"input": x, "softmax": softmax, "fill": fill, "root": root}


def _row(name: str, build: PatternBuilder, check: CallCheck, *requires: str) -> PatternRow:
    return PatternRow(name, build, (("root", check),), requires)


def _guarded_softmax_row(
    name: str, build: PatternBuilder, region_check: Callable[[Mapping[str, Any]], Verdict]
) -> PatternRow:
    """A softmax wrapped in a guard (-inf rows, NaN results): the softmax is checked as itself,
    the guard around it by `region_check`."""
    return PatternRow(name, build, (("softmax", compute.check_softmax),), region_check=region_check)


# Vector-unit math as the C library computes it (TVM's build calls the same sqrtf, expf, logf,
# erff): decomposed layer norms, erf GELUs, ELU / Mish (exp, log), RMSNorm (rsqrt); ONNX's
# Round / Floor / Ceil (round half to even, as TVM's).
UNARY_MATH = ("sqrt", "rsqrt", "exp", "log", "erf", "abs", "negative", "round", "floor", "ceil")

# Reductions of the pooling engine besides mean (TVM's identities and combiners).
_REDUCTIONS = ("mean", "sum", "max", "min", "variance")

_DATA_MOVEMENT = (
    "reshape",
    "flatten",
    "squeeze",
    "expand_dims",
    "permute_dims",
    "split",
    "broadcast_to",
)


PATTERN_TABLE: tuple[PatternRow, ...] = (
    # Data movement: views and DMA copies, any NPU dtype.
    *[_row(op, _with_args(f"relax.{op}"), glue.check_data_movement) for op in _DATA_MOVEMENT],
    _row("concat", _concat, glue.check_data_movement),
    _row("strided_slice", _with_args("relax.strided_slice"), glue.check_strided_slice),
    _row("take", _with_args("relax.take"), glue.check_take),
    PatternRow("embedding", _embedding, (), region_check=glue.check_embedding),
    _row("astype", _unary("relax.astype"), glue.check_astype),
    _row("tile", _with_args("relax.tile"), glue.check_tile),
    # Reductions and normalisation.
    *[_row(op, _unary(f"relax.{op}"), spatial.check_reduction) for op in _REDUCTIONS],
    *[_row(op, _unary(f"relax.{op}"), spatial.check_arg_reduction) for op in ("argmax", "argmin")],
    _row("topk", _unary("relax.topk"), spatial.check_topk),
    _row(
        "adaptive_avg_pool2d",
        _unary("relax.nn.adaptive_avg_pool2d"),
        spatial.check_adaptive_avg_pool2d,
    ),
    *[
        _row(name, _unary(f"relax.nn.{name}", extra_args=2), spatial.check_group_norm)
        for name in ("group_norm", "instance_norm")
    ],
    # Resampling and padding of detection / segmentation networks.
    _row("resize2d", _unary("relax.image.resize2d", extra_args=1), spatial.check_resize2d),
    _row("pad", _with_args("relax.nn.pad"), spatial.check_pad),
    _row("layer_norm", _unary("relax.nn.layer_norm", extra_args=2), glue.check_layer_norm),
    _row("max_pool1d", _unary("relax.nn.max_pool1d"), compute.check_pool),
    _row("avg_pool1d", _unary("relax.nn.avg_pool1d"), compute.check_pool),
    _row("quantize", _unary("relax.quantize", extra_args=2), quantized.check_quantize),
    _row("dequantize", _unary("relax.dequantize", extra_args=2), quantized.check_dequantize),
    _row("add", _binary("relax.add"), compute.check_elementwise),
    _row("subtract", _binary("relax.subtract"), compute.check_elementwise),
    _row("multiply", _binary("relax.multiply"), compute.check_elementwise),
    _row("divide", _binary("relax.divide"), compute.check_elementwise),
    _row("maximum", _binary("relax.maximum"), compute.check_elementwise),
    _row("minimum", _binary("relax.minimum"), compute.check_elementwise),
    _row("relu", _unary("relax.nn.relu"), compute.check_elementwise),
    _row("silu", _unary("relax.nn.silu"), compute.check_elementwise, "relax.nn.silu"),
    _row("clip", _unary("relax.clip", extra_args=2), glue.check_clip, "relax.clip"),
    _row("relu6", _unary("relax.clip", extra_args=2), compute.check_relu6, "relax.clip"),
    _row("gelu", _unary("relax.nn.gelu"), compute.check_elementwise),
    _row(
        "gelu_tanh", _unary("relax.nn.gelu_tanh"), compute.check_elementwise, "relax.nn.gelu_tanh"
    ),
    _row("sigmoid", _unary("relax.sigmoid"), compute.check_elementwise, "relax.sigmoid"),
    _row("tanh", _unary("relax.tanh"), compute.check_elementwise, "relax.tanh"),
    *[
        _row(op, _unary(f"relax.{op}"), compute.check_elementwise, f"relax.{op}")
        for op in UNARY_MATH
    ],
    _row("power", _binary("relax.power"), compute.check_elementwise, "relax.power"),
    _row("leakyrelu", _unary("relax.nn.leakyrelu"), compute.check_elementwise),
    _row("prelu", _binary("relax.nn.prelu"), spatial.check_prelu),
    PatternRow("select", _select, (), region_check=glue.check_select),
    PatternRow(
        "prelu_where",
        _prelu_where,
        (("scaled", compute.check_elementwise),),
        region_check=spatial.check_prelu_where,
    ),
    _row("softmax", _unary("relax.nn.softmax"), compute.check_softmax),
    _row("log_softmax", _unary("relax.nn.log_softmax"), spatial.check_log_softmax),
    _guarded_softmax_row("safe_softmax", _safe_softmax, glue.check_safe_softmax),
    _guarded_softmax_row(
        "nan_guarded_softmax", _nan_guarded_softmax, glue.check_nan_guarded_softmax
    ),
    _row("batch_norm", _unary("relax.nn.batch_norm", extra_args=4), compute.check_batch_norm),
    _row("max_pool2d", _unary("relax.nn.max_pool2d"), compute.check_pool),
    _row("avg_pool2d", _unary("relax.nn.avg_pool2d"), compute.check_pool),
    _row("matmul", _binary("relax.matmul"), compute.check_matmul),
    chain_row("dense", bias=False, activation=None),
    _row("conv1d", _binary("relax.nn.conv1d"), compute.check_conv),
    _row("conv2d", _binary("relax.nn.conv2d"), compute.check_conv),
    _row("depthwise_conv2d", _binary("relax.nn.conv2d"), compute.check_depthwise),
    _row(
        "conv2d_transpose",
        _binary("relax.nn.conv2d_transpose"),
        spatial.check_conv2d_transpose,
    ),
    # Fused chains, longest last so they win over their prefixes.
    chain_row("matmul", bias=False, activation="relu"),
    chain_row("dense", bias=False, activation="relu"),
    chain_row("conv2d", bias=False, activation="relu"),
    *[
        chain_row(producer, bias=True, activation=None)
        for producer in ("conv2d", "matmul", "dense")
    ],
    *[chain_row("conv2d", bias=True, activation=act) for act in ("relu", "relu6")],
    *[
        chain_row(producer, bias=True, activation=act)
        for producer in ("matmul", "dense")
        for act in ("relu", "gelu")
    ],
    # Quantized QDQ chains and islands: each is one integer op, above every float pattern.
    *QUANTIZED_ROWS,
)


def op_exists(name: str) -> bool:
    """True when the installed TVM registers the Relax op ``name``."""
    try:
        tvm.ir.Op.get(name)
    except (AttributeError, ValueError, RuntimeError):
        return False
    return True


def available_rows() -> list[PatternRow]:
    """Rows whose Relax ops exist in this TVM build, lowest priority first."""
    return [row for row in PATTERN_TABLE if all(op_exists(op) for op in row.requires_ops)]


def register() -> list[str]:
    """Registers the table, replacing any example_npu.* patterns registered before.

    TVM's wheel ships upstream's example_npu pattern file whose checks accept everything; left
    in the registry, its rows would offload calls our checks reject. The caller imports that
    module first (so a later import is a no-op) and this removes its rows.
    """
    stale = sorted({pattern.name for pattern in get_patterns_with_prefix(PREFIX + ".")})
    if stale:
        _registry_api.RemovePatterns(stale)
    rows = available_rows()
    register_patterns([(row.full_name, *row.build(), row.check) for row in rows])
    return [row.full_name for row in rows]
