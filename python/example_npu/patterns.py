"""The example_npu pattern table.

One row per pattern: name, a builder for its dataflow pattern, the annotated call the check
inspects, and the support check. Rows later in the table have higher priority (fused patterns
last). Build-dependent rows register only when their Relax op exists in the installed TVM.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tvm
from tvm.relax.backend import _ffi_api as _registry_api
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix, register_patterns
from tvm.relax.dpl.pattern import DFPattern, is_op, wildcard
from tvm.relax.transform import PatternCheckContext

from . import checks
from .checks import Verdict

PREFIX = "example_npu"

PatternBuilder = Callable[[], tuple[DFPattern, dict[str, DFPattern]]]
CallCheck = Callable[..., Verdict]


@dataclass(frozen=True)
class PatternRow:
    """One entry of the pattern table."""

    name: str
    build: PatternBuilder
    # Annotation name -> check for that matched call; every listed call must pass.
    call_checks: tuple[tuple[str, CallCheck], ...]
    # Relax ops that must exist in the installed TVM for the row to register.
    requires_ops: tuple[str, ...] = ()

    @property
    def full_name(self) -> str:
        return f"{PREFIX}.{self.name}"

    def check(self, context: PatternCheckContext) -> bool:
        for annotation, call_check in self.call_checks:
            call = context.annotated_expr[annotation]
            if not checks.explain(call, call_check(call)):
                return False
        return True


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


def _dense() -> tuple[DFPattern, dict[str, DFPattern]]:
    """The Linear-layer form the PyTorch importer emits: matmul(x, permute_dims(w))."""
    data, weight = wildcard(), wildcard()
    transpose = is_op("relax.permute_dims")(weight)
    root = is_op("relax.matmul")(data, transpose)
    return root, {"input": data, "weight": weight, "transpose": transpose, "root": root}


def _with_relu(producer_op: str, producer_key: str) -> PatternBuilder:
    def build() -> tuple[DFPattern, dict[str, DFPattern]]:
        data, weight = wildcard(), wildcard()
        producer = is_op(producer_op)(data, weight)
        root = is_op("relax.nn.relu")(producer)
        return root, {"input": data, "weight": weight, producer_key: producer, "root": root}

    return build


def _row(name: str, build: PatternBuilder, check: CallCheck, *requires: str) -> PatternRow:
    return PatternRow(name, build, (("root", check),), requires)


PATTERN_TABLE: tuple[PatternRow, ...] = (
    _row("quantize", _unary("relax.quantize", extra_args=2), checks.check_not_executable),
    _row("dequantize", _unary("relax.dequantize", extra_args=2), checks.check_not_executable),
    _row("add", _binary("relax.add"), checks.check_elementwise),
    _row("subtract", _binary("relax.subtract"), checks.check_elementwise),
    _row("multiply", _binary("relax.multiply"), checks.check_elementwise),
    _row("divide", _binary("relax.divide"), checks.check_elementwise),
    _row("relu", _unary("relax.nn.relu"), checks.check_elementwise),
    _row("relu6", _unary("relax.clip", extra_args=2), checks.check_relu6, "relax.clip"),
    _row("gelu", _unary("relax.nn.gelu"), checks.check_elementwise),
    _row("gelu_tanh", _unary("relax.nn.gelu_tanh"), checks.check_elementwise, "relax.nn.gelu_tanh"),
    _row("sigmoid", _unary("relax.sigmoid"), checks.check_elementwise, "relax.sigmoid"),
    _row("tanh", _unary("relax.tanh"), checks.check_elementwise, "relax.tanh"),
    _row("softmax", _unary("relax.nn.softmax"), checks.check_softmax),
    _row("batch_norm", _unary("relax.nn.batch_norm", extra_args=4), checks.check_batch_norm),
    _row("max_pool2d", _unary("relax.nn.max_pool2d"), checks.check_pool),
    _row("avg_pool2d", _unary("relax.nn.avg_pool2d"), checks.check_pool),
    _row("matmul", _binary("relax.matmul"), checks.check_matmul),
    PatternRow(
        "dense", _dense, (("root", checks.check_matmul), ("transpose", checks.check_elementwise))
    ),
    _row("conv1d", _binary("relax.nn.conv1d"), checks.check_conv),
    _row("conv2d", _binary("relax.nn.conv2d"), checks.check_conv),
    _row("depthwise_conv2d", _binary("relax.nn.conv2d"), checks.check_depthwise),
    PatternRow(
        "matmul_relu_fused",
        _with_relu("relax.matmul", "matmul"),
        (("matmul", checks.check_matmul), ("root", checks.check_elementwise)),
    ),
    PatternRow(
        "conv2d_relu_fused",
        _with_relu("relax.nn.conv2d", "conv"),
        (("conv", checks.check_conv), ("root", checks.check_elementwise)),
    ),
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
