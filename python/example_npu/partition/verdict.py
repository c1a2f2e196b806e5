"""Verdicts of the support checks and the NPU they plan for.

A check returns a :class:`Verdict`; its reason is what a user sees when an op stays on TVM's CPU
path (``partition_with_report`` collects them from this module's logger). ``target_config``
tells the checks which NPU is being partitioned for.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from tvm import relax

from ..config import DEFAULT_CONFIG, NPUConfig
from ..relax_types import op_name

logger = logging.getLogger("example_npu")

# The NPU the checks plan for. The pattern registry is global, so the config of one partitioning
# call reaches the checks through a context variable (per thread and task), like TVM's
# PassContext; outside target_config() it is the default NPU.
_TARGET_CONFIG: ContextVar[NPUConfig] = ContextVar(
    "example_npu_target_config", default=DEFAULT_CONFIG
)


@contextlib.contextmanager
def target_config(config: NPUConfig) -> Iterator[None]:
    """Makes the checks decide what fits for ``config`` while the block runs."""
    token = _TARGET_CONFIG.set(config)
    try:
        yield
    finally:
        _TARGET_CONFIG.reset(token)


def current_config() -> NPUConfig:
    """The NPUConfig the checks are planning for (see target_config)."""
    return _TARGET_CONFIG.get()


@dataclass(frozen=True)
class Verdict:
    """Outcome of a support check; ``reason`` says why an op stays on the CPU."""

    ok: bool
    reason: str = ""
    # The call is not the op this pattern is for (a plain conv2d seen by the depthwise pattern):
    # another row decides about it, so the reason is no reason for the CPU.
    other_pattern: bool = False

    def __bool__(self) -> bool:
        return self.ok


ACCEPT = Verdict(True)


def reject(reason: str) -> Verdict:
    return Verdict(False, reason)


def not_this_pattern(reason: str) -> Verdict:
    """A rejection that only says the call is another row's op (logged at DEBUG, not reported)."""
    return Verdict(False, reason, other_pattern=True)


def first_failure(verdicts: Iterable[Verdict]) -> Verdict:
    """The first rejecting verdict, evaluated lazily, or ACCEPT."""
    for verdict in verdicts:
        if not verdict:
            return verdict
    return ACCEPT


def explain(call: relax.Call, verdict: Verdict) -> bool:
    """Logs why a call stays on the CPU and returns the boolean FuseOpsByPattern expects."""
    if not verdict:
        level = logging.DEBUG if verdict.other_pattern else logging.INFO
        logger.log(level, "%s stays on the CPU: %s", op_name(call), verdict.reason)
    return verdict.ok
