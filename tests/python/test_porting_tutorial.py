"""The porting tutorial (docs/porting/add-an-op.md) adds nn.softplus to a copy of this tree,
builds the copy's C++ library and its new C++ test, and runs its Python test against TVM's CPU
build: tools/porting_tutorial.py, run here as CI runs every doc block."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_porting_tutorial_builds_and_passes_on_a_copy_of_the_tree(summary_line):
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "porting_tutorial.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    minutes = (time.perf_counter() - start) / 60
    assert result.returncode == 0, f"{result.stdout[-8000:]}\n{result.stderr[-8000:]}"
    assert "porting tutorial: passed" in result.stdout
    assert "100% tests passed" in result.stdout  # the new C++ test ran
    assert re.search(r"\d+ passed in", result.stdout)  # the new Python test ran
    summary_line(f"porting tutorial (nn.softplus on a copy of the tree): {minutes:.1f} min")
