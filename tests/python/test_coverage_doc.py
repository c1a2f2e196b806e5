"""docs/coverage.md is the current output of the coverage generator, and covers every pattern."""

from __future__ import annotations

from pathlib import Path

import example_npu
from example_npu import coverage

DOC = Path(__file__).resolve().parents[2] / "docs" / "coverage.md"


def test_committed_coverage_table_is_current():
    generated = coverage.table()
    committed = DOC.read_text() if DOC.exists() else ""
    assert committed == generated, (
        "docs/coverage.md differs from what the checks give now; regenerate it from the "
        f"repository root with: .venv/bin/{coverage.REGENERATE}"
    )


def test_every_registered_pattern_appears_in_the_table():
    text = coverage.table()
    for name in example_npu.REGISTERED_PATTERNS:
        assert name.removeprefix("example_npu.") in text, name
