"""Partition report: what went to the NPU and why the rest stayed on the CPU."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass, field

import tvm
from tvm import relax

from ..config import NPUConfig
from ..frontend.canonicalize import canonicalize
from .pipeline import partition_for_npu
from .verdict import logger as checks_logger

# Relax calls that are plumbing (the NPU functions' calls), not compute a user would expect on
# the NPU. A call_tir is compute: a frontend's own TIR function, counted by its name.
_PLUMBING_OPS = frozenset({"relax.call_dps_packed", "relax.call_packed"})
_CALL_TIR = "relax.call_tir"


def _no_pattern_reason(op: str) -> str:
    if op.startswith(_CALL_TIR + "("):
        return (
            f"the frontend emitted TIR function {op[len(_CALL_TIR) + 1 : -1]} as call_tir; "
            "only call_tir of TVM's own maximum / minimum and of topi's reflect / edge / wrap "
            "padding becomes an NPU op"
        )
    return f"no example_npu pattern for {op}"


def cpu_op_reasons(cpu_ops: Counter, checked: dict[str, set[str]]) -> dict[str, set[str]]:
    """The reasons of every op left on the CPU (keyed without ``relax.``): what its checks said,
    or that no pattern takes it. Reasons about ops that went to the NPU are dropped: a pattern
    that refused a call another pattern offloaded explains nothing."""
    reasons = {}
    for op in cpu_ops:
        key = op.removeprefix("relax.")
        reasons[key] = set(checked.get(key, ())) or {_no_pattern_reason(op)}
    return reasons


@dataclass
class PartitionReport:
    """Ops per side of the partition, with the reasons for every op kept on the CPU."""

    npu_functions: list[str] = field(default_factory=list)
    npu_ops: Counter = field(default_factory=Counter)
    cpu_ops: Counter = field(default_factory=Counter)
    # CPU op (without "relax.") -> why it stayed there; one entry per op of cpu_ops.
    reasons: dict[str, set[str]] = field(default_factory=dict)

    def cpu_reason(self, op: str) -> str:
        found = self.reasons.get(op.removeprefix("relax."))
        return "; ".join(sorted(found)) if found else _no_pattern_reason(op)

    def table(self) -> str:
        lines = [f"NPU functions: {len(self.npu_functions)}"]
        lines += [f"  NPU  {op:<24} x{count}" for op, count in sorted(self.npu_ops.items())]
        lines += [
            f"  CPU  {op:<24} x{count}  ({self.cpu_reason(op)})"
            for op, count in sorted(self.cpu_ops.items())
        ]
        return "\n".join(lines)


class _ReasonCollector(logging.Handler):
    """Collects the check reasons logged by this thread (another thread may be partitioning)."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.reasons: dict[str, set[str]] = {}
        self.thread = threading.get_ident()

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self.thread:
            return
        op, reason = record.args  # set by checks.explain
        self.reasons.setdefault(str(op), set()).add(str(reason))


def _count_ops(expr: relax.Expr) -> Counter:
    counts: Counter = Counter()

    def visit(node: object) -> None:
        if isinstance(node, relax.Call) and isinstance(node.op, tvm.ir.Op):
            if node.op.name == _CALL_TIR and isinstance(node.args[0], tvm.ir.GlobalVar):
                counts[f"{_CALL_TIR}({node.args[0].name_hint})"] += 1
            elif node.op.name not in _PLUMBING_OPS:
                counts[node.op.name] += 1

    relax.analysis.post_order_visit(expr, visit)
    return counts


def partition_with_report(
    mod: tvm.IRModule, config: NPUConfig | None = None
) -> tuple[tvm.IRModule, PartitionReport]:
    """partition_for_npu plus a report of which ops each side got and why."""
    # Counted after canonicalization: rewritten idioms and dead bindings are not ops of the model.
    original_ops = _count_ops(canonicalize(mod)["main"].body)
    collector = _ReasonCollector()
    previous_level = checks_logger.level
    checks_logger.addHandler(collector)
    checks_logger.setLevel(logging.INFO)
    try:
        partitioned = partition_for_npu(mod, config=config)
    finally:
        checks_logger.removeHandler(collector)
        checks_logger.setLevel(previous_level)
    cpu_ops = _count_ops(partitioned["main"].body)
    report = PartitionReport(
        npu_functions=[
            str(m.get_function("get_symbol")()) for m in partitioned.attrs.get("external_mods", [])
        ]
        if partitioned.attrs
        else [],
        npu_ops=original_ops - cpu_ops,
        cpu_ops=cpu_ops,
        reasons=cpu_op_reasons(cpu_ops, collector.reasons),
    )
    return partitioned, report
