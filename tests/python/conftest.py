"""Test-suite guard: in CI a skipped test is a failure.

The tests import example_npu directly, so a missing build fails loudly; this hook also catches
any skip marker (such as the specification's has_example_npu check) from hiding a broken build.
Tests can add result lines (measured numbers) to the end of the run with ``summary_line``; the
terminal summary also prints the random op-case counts of test_random_ops.py.
"""

from __future__ import annotations

import os
import sys

import pytest

_SUMMARY_LINES: list[str] = []


@pytest.fixture
def summary_line():
    """Appends a line to the "results" section printed at the end of the test run."""
    return _SUMMARY_LINES.append


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if os.environ.get("CI") and skipped and exitstatus == 0:
        reporter.write_line(
            f"CI: {len(skipped)} test(s) skipped; skips are failures in CI", red=True
        )
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Prints the measured results and the random op-case summary (test_random_ops.py)."""
    if _SUMMARY_LINES:
        terminalreporter.section("results")
        for line in _SUMMARY_LINES:
            terminalreporter.write_line(line)
    op_cases = sys.modules.get("op_cases")
    text = config.stash.get(op_cases.SUMMARY_KEY, None) if op_cases else None
    if text:
        terminalreporter.write_sep("-", "example_npu random op cases (build/random_ops_summary.md)")
        terminalreporter.write(text)
