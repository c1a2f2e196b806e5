"""docs/coverage.md is the current output of the coverage generator, and covers every pattern."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import example_npu

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "coverage.md"


def _load_generator():
    """tools/coverage_table.py: the generator lives outside the installed package."""
    spec = importlib.util.spec_from_file_location(
        "coverage_table", ROOT / "tools" / "coverage_table.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


coverage = _load_generator()


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
