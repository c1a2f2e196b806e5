"""What the canonicalizer's chain rewriters share (run-time masks in :mod:`.masks`, index
arithmetic in :mod:`.index_arith`): each builds a float form of a run-time value by walking the
chain of (canonicalized) bindings that computed it, emitting the new bindings next to the
originals, which become dead when nothing else reads them (dead-code elimination removes them
later)."""

from __future__ import annotations

from collections.abc import Callable

from tvm import relax


class ChainRewriter:
    """``emit`` binds an expression and returns its var; ``bound`` is the (canonicalized) value
    a var is bound to, None for parameters."""

    def __init__(
        self,
        emit: Callable[[relax.Expr], relax.Expr],
        bound: Callable[[relax.Expr], relax.Expr | None],
    ) -> None:
        self.emit = emit
        self.bound = bound

    def value_of(self, expr: relax.Expr) -> relax.Expr:
        """What ``expr`` is bound to, through aliases (a removed identity leaves ``y = x``); a
        parameter is itself."""
        while isinstance(expr, relax.Var) and self.bound(expr) is not None:
            expr = self.bound(expr)
        return expr
