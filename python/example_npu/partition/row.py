"""One row of the example_npu pattern table: a pattern builder and the checks its match must pass.

A row's check runs every named call check, the empty-operand check on every matched op and the
row's region check, and records the first failure's reason on the call it concerns (and on the
chain's root), so the partition report can say why a call stayed on the CPU. table.py lists the
rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import tvm
from tvm import relax
from tvm.relax.dpl.pattern import DFPattern
from tvm.relax.transform import PatternCheckContext

from . import verdict
from .checks import compute
from .verdict import Verdict

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
    # A check across the matched calls (e.g. a fused bias must not change the result shape).
    region_check: Callable[[Mapping[str, Any]], Verdict] | None = None

    @property
    def full_name(self) -> str:
        return f"{PREFIX}.{self.name}"

    def check(self, context: PatternCheckContext) -> bool:
        root = context.annotated_expr["root"]
        try:
            return self._check(context, root)
        except Exception as err:  # noqa: BLE001  # a check bug must not break partitioning
            reason = f"the {self.name} support check failed ({type(err).__name__}: {err})"
            return verdict.explain(root, verdict.reject(reason))

    def _check(self, context: PatternCheckContext, root: Any) -> bool:
        if not verdict.explain(root, compute.check_no_leaking_intermediates(context)):
            return False
        for annotation, call_check in self.call_checks:
            call = context.annotated_expr[annotation]
            result = call_check(call)
            if not verdict.explain(call, result):
                if call is not root:  # the whole chain stays: its root learns why too
                    verdict.explain(root, result)
                return False
        # Every row, including rows without call checks (the quantized chains).
        for call in context.annotated_expr.values():
            if isinstance(call, relax.Call) and isinstance(call.op, tvm.ir.Op):
                if not verdict.explain(call, compute.check_empty_operands(call)):
                    return False
        if self.region_check is not None:
            return verdict.explain(root, self.region_check(context.annotated_expr))
        return True
