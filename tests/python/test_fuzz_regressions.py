"""Every input that crashed, hung or raised the wrong error (issue 9's table, the fuzzer's
findings), replayed in a fuzz worker process.

Each file in tests/fuzz/regressions/ holds one input in fuzz.py's record format. It must end as
``ok`` or ``rejected`` (a ValueError / TypeError), as its ``expect`` outcome, and with ``match``
in the error message when the file gives one. A crash takes down only the worker, which the
next case restarts, so every regression is reported on its own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parents[1] / "fuzz"
sys.path.insert(0, str(FUZZ))

from fuzz import GOOD, Worker, from_record  # noqa: E402

FILES = sorted((FUZZ / "regressions").glob("*.json"))


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    # The limit leaves room for ASan's shadow memory in the sanitizer run.
    process = Worker(tmp_path_factory.mktemp("fuzz") / "worker.log", max_rss_mb=12000)
    yield process
    process.stop()


def test_there_are_regressions():
    assert len(FILES) >= 25


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_fuzz_regression(path, worker):
    record = json.loads(path.read_text())
    outcome, detail = worker.run(from_record(record), timeout=120.0)
    assert outcome in GOOD, f"{record['description']}: {outcome}\n{detail}"
    assert outcome == record.get("expect", outcome), detail
    assert record.get("match", "") in detail


def _softmax_chain(groups: int) -> str:
    """A chain of softmaxes: softmax does not fuse with softmax, so one group per node."""
    nodes = [{"op": "input", "name": "x", "shape": [4, 16], "dtype": "float32"}]
    nodes += [
        {"op": "nn.softmax", "name": f"s{i}", "inputs": [i], "shape": [4, 16],
         "dtype": "float32", "attrs": {"axis": -1}}
        for i in range(groups)
    ]  # fmt: skip
    return json.dumps(
        {"version": 1, "symbol": "f", "nodes": nodes, "arg_nodes": [0], "heads": [groups]}
    )


def test_a_long_chain_of_groups_compiles_in_linear_time(worker):
    """200,000 groups (too big to keep as a file): the on-chip high-water mark compared every
    group with every other (minutes); the groups running at each start are now swept in order."""
    record = {"kind": "g", "text": _softmax_chain(200_000)}
    outcome, detail = worker.run(from_record(record), timeout=60.0)
    assert outcome == "ok", detail
