"""The quantized (QDQ) rows of the pattern table: each row is one integer NPU op.

Two kinds: islands around a glue op (``dequantize -> op -> quantize``, builders in
quantized_patterns.py: lookup tables, requantize, add / multiply, activation matmul, pooling,
mean, softmax, concat; and onnxruntime's ``MatMulInteger``, whose result is float32) and producer
chains ``quantize(activation?(producer(dequantize(x), dequantize(w_const)) + bias?))`` on the
matrix engine. table.py puts them above every float row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tvm.relax.dpl.pattern import DFPattern, is_const, is_op, wildcard

from ..frontend.qdq import MAX_CONCAT_INPUTS
from . import quantized_patterns
from .chains import producer_epilogue
from .checks import compute, quantized
from .checks.integer_matmul import check_integer_matmul_region
from .row import CallCheck, PatternBuilder, PatternRow
from .verdict import Verdict


def _qnn_bias() -> DFPattern:
    """A float32 constant, or onnxruntime's int32 constant under dequantize."""
    return is_const() | is_op("relax.dequantize")(is_const(), is_const(), is_const())


_QNN_ACTIVATIONS = {
    "relu": ("relax.nn.relu", 0, compute.check_elementwise),
    "clip": ("relax.clip", 2, quantized.check_clip_bounds),
}


def _qnn_chain(producer: str, bias: bool, activation: str | None) -> PatternBuilder:
    """quantize(activation?(add?(producer(dequantize(x), dequantize(w_const)), bias)))."""

    def build() -> tuple[DFPattern, dict[str, DFPattern]]:
        x_q = wildcard()
        x_dq = is_op("relax.dequantize")(x_q, is_const(), is_const())
        w_dq = is_op("relax.dequantize")(is_const(), is_const(), is_const())
        annotations: dict[str, DFPattern] = {"input": x_q, "x_dq": x_dq, "w_dq": w_dq}
        root = producer_epilogue(producer, x_dq, w_dq, bias, None, _qnn_bias, annotations)
        if activation is not None:
            op, extra_args, _ = _QNN_ACTIVATIONS[activation]
            extra = [wildcard() for _ in range(extra_args)]
            root = annotations["activation"] = is_op(op)(root, *extra)
        root = is_op("relax.quantize")(root, is_const(), is_const())
        annotations["root"] = root
        return root, annotations

    return build


def _qnn_row(producer: str, bias: bool, activation: str | None) -> PatternRow:
    name = "qnn_" + producer + ("_bias" if bias else "") + (f"_{activation}" if activation else "")
    call_checks: tuple[tuple[str, CallCheck], ...] = ()
    if activation is not None:
        call_checks = (("activation", _QNN_ACTIVATIONS[activation][2]),)
    return PatternRow(
        name,
        _qnn_chain(producer, bias, activation),
        call_checks,
        region_check=quantized.check_qnn_region,
    )


def _island_row(
    name: str, build: PatternBuilder, region_check: Callable[[Mapping[str, Any]], Verdict]
) -> PatternRow:
    """A QDQ island around a glue op (quantized_patterns.py): one integer NPU op."""
    return PatternRow(name, build, (), region_check=region_check)


_QNN_GLUE_ROWS: tuple[PatternRow, ...] = (
    PatternRow(
        "qnn_lut",
        quantized_patterns.lookup_table,
        (("root", quantized.check_lookup_table),),
        ("relax.take",),
    ),
    *[
        _island_row(
            "qnn_requantize" + (f"_{act}" if act else ""),
            quantized_patterns.requantize(act),
            quantized.check_requantize_region,
        )
        for act in (None, "relu", "clip")
    ],
    *[
        _island_row(
            f"qnn_{name}" + (f"_{act}" if act else ""),
            quantized_patterns.binary(f"relax.{name}", act),
            quantized.check_binary_region,
        )
        for name in ("add", "multiply")
        for act in (None, "relu", "clip")
    ],
    _island_row(
        "qnn_activation_matmul",
        quantized_patterns.binary("relax.matmul", None),
        quantized.check_activation_matmul_region,
    ),
    *[
        _island_row(
            f"qnn_{op}", quantized_patterns.unary(f"relax.nn.{op}"), quantized.check_pool_region
        )
        for op in ("max_pool2d", "avg_pool2d")
    ],
    *[
        _island_row(
            f"qnn_integer_matmul{suffix}",
            quantized_patterns.integer_matmul(with_zero_point),
            check_integer_matmul_region,
        )
        for suffix, with_zero_point in (("", False), ("_zero_point", True))
    ],
    _island_row("qnn_mean", quantized_patterns.unary("relax.mean"), quantized.check_mean_region),
    _island_row(
        "qnn_softmax", quantized_patterns.unary("relax.nn.softmax"), quantized.check_softmax_region
    ),
    *[
        _island_row(f"qnn_concat{n}", quantized_patterns.concat(n), quantized.check_concat_region)
        for n in range(2, MAX_CONCAT_INPUTS + 1)
    ],
)

# Glue islands first, then the producer chains (a later row has the higher priority).
QUANTIZED_ROWS: tuple[PatternRow, ...] = (
    *_QNN_GLUE_ROWS,
    *[
        _qnn_row(producer, bias, act)
        for producer in ("conv2d", "conv2d_transpose", "matmul", "dense")
        for bias in (False, True)
        for act in (None, "relu", "clip")
    ],
)
