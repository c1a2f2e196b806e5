"""Every input that crashed, hung or raised the wrong error (issue 9's table, the fuzzer's
findings), replayed in a fuzz worker process.

Each file in tests/fuzz/regressions/ holds one input in fuzz.py's record format. It must end as
``ok`` or ``rejected`` (a ValueError / TypeError), as its ``expect`` outcome, and with ``match``
in the error message when the file gives one. A crash takes down only the worker, which the
next case restarts, so every regression is reported on its own.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

FUZZ = Path(__file__).resolve().parents[1] / "fuzz"
sys.path.insert(0, str(FUZZ))

from fuzz import GOOD, Worker, from_record  # noqa: E402
from generate import generate  # noqa: E402
from mutate import FuzzInput  # noqa: E402

FILES = sorted((FUZZ / "regressions").glob("*.json"))
# Only tells a hang from slow work on a machine other jobs keep busy: no test here measures
# speed in wall time (test_long_chains_compile_in_linear_time compares CPU time).
HANG_SECONDS = 1800.0


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    # The limit leaves room for ASan's shadow memory in the sanitizer run.
    process = Worker(tmp_path_factory.mktemp("fuzz") / "worker.log", max_rss_mb=12000)
    yield process
    process.stop()


def test_there_are_regressions():
    assert len(FILES) >= 25


def test_fuzz_modules_do_not_shadow_test_helpers():
    """tests/fuzz is put on sys.path here, so a module name both folders use would hide one."""
    helpers = {path.stem for path in Path(__file__).parent.glob("*.py")}
    assert not helpers & {path.stem for path in FUZZ.glob("*.py")}


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_fuzz_regression(path, worker):
    record = json.loads(path.read_text())
    outcome, detail = worker.run(from_record(record), timeout=HANG_SECONDS)
    assert outcome in GOOD, f"{record['description']}: {outcome}\n{detail}"
    assert outcome == record.get("expect", outcome), detail
    assert record.get("match", "") in detail


def _chain(count: int, op: str, attrs: dict, head: list[dict] | None = None) -> str:
    """Graph JSON: x (4, 16) -> the `head` nodes -> `count` nodes of `op` in a row."""
    nodes = [{"op": "input", "name": "x", "shape": [4, 16], "dtype": "float32"}, *(head or [])]
    for i in range(count):
        nodes.append(
            {
                "op": op,
                "name": f"n{i}",
                "inputs": [len(nodes) - 1],
                "shape": [4, 16],
                "dtype": "float32",
                "attrs": attrs,
            }
        )
    graph = {
        "version": 1,
        "symbol": "f",
        "nodes": nodes,
        "arg_nodes": [0],
        "heads": [len(nodes) - 1],
    }
    return json.dumps(graph)


# Found by the fuzzer's "append copies of the last node" or by hand on the rebased branch; too
# big to keep as files, so generated here: (nodes, graph JSON of n nodes, what it did before the
# fix).
LONG_CHAINS = {
    # Softmax does not fuse with softmax: one group per node.
    "200000 softmax groups": (
        200_000,
        lambda n: _chain(n, "nn.softmax", {"axis": -1}),
        "the on-chip high-water mark compared every group with every other: minutes",
    ),
    "20000 reshapes": (
        20_000,
        lambda n: _chain(
            n,
            "reshape",
            {},
            [{"op": "nn.relu", "name": "r", "inputs": [0], "shape": [4, 16], "dtype": "float32"}],
        ),
        "fuzz seed 1 index 7116: views resolved recursively, one stack frame per view: SIGSEGV",
    ),
    "a conv fused with 40000 clips": (
        40_000,
        lambda n: _chain(
            n,
            "clip",
            {"min": 0.0, "max": 6.0},
            [
                {"op": "const", "name": "w", "shape": [16, 16], "dtype": "float32"},
                {
                    "op": "matmul",
                    "name": "m",
                    "inputs": [0, 1],
                    "shape": [4, 16],
                    "dtype": "float32",
                },
            ],
        ),
        "fuzz seed 1 index 20158: the kept members of a fused chain were found by comparing "
        "every member with every later one, for every candidate tile: minutes",
    ),
}


def _worker_cpu_seconds(worker) -> float:
    """CPU time the worker process has used (user + system, all threads): work done, which a
    busy machine does not stretch as it stretches wall time."""
    fields = Path(f"/proc/{worker.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_seconds_to_run(worker, text: str, what: str) -> float:
    worker.run(from_record({"kind": "g", "text": _chain(1, "nn.relu", {})}), timeout=HANG_SECONDS)
    start = _worker_cpu_seconds(worker)
    outcome, detail = worker.run(from_record({"kind": "g", "text": text}), timeout=HANG_SECONDS)
    assert outcome == "ok", f"{what}: {outcome}\n{detail}"
    return _worker_cpu_seconds(worker) - start


@pytest.mark.parametrize("name", LONG_CHAINS)
def test_long_chains_compile_in_linear_time(name, worker, summary_line):
    """The chain and one 16 times shorter: linear work grows 16x, quadratic 256x; the bound
    64x leaves a wide margin and counts CPU time, not wall time."""
    count, build, before = LONG_CHAINS[name]
    short = _cpu_seconds_to_run(worker, build(count // 16), f"{name} / 16")
    full = _cpu_seconds_to_run(worker, build(count), name)
    summary_line(f"{name}: {full:.2f} s of worker CPU, {short:.2f} s for 1/16 of it")
    assert full <= 64 * max(short, 0.1), (
        f"{name} (before the fix: {before}): {full:.2f} s of CPU, {short:.2f} s for 1/16"
    )


def _graph(nodes: list[dict]) -> str:
    """Graph JSON of `nodes`: node 0 is the input, the last node the output."""
    graph = {"version": 1, "symbol": "f", "nodes": nodes, "arg_nodes": [0]}
    return json.dumps({**graph, "heads": [len(nodes) - 1]})


def _relu_of_rank(rank: int) -> str:
    """x of `rank` unit dims -> relu declared one dim short: rejected, naming both shapes."""
    shape = [1] * rank
    return _graph(
        [
            {"op": "input", "name": "x", "shape": shape, "dtype": "float32"},
            {"op": "nn.relu", "name": "y", "inputs": [0], "shape": shape[:-1], "dtype": "float32"},
        ]
    )


def _slice_with_long_attributes(length: int) -> str:
    return _graph(
        [
            {"op": "input", "name": "x", "shape": [2, 3], "dtype": "float32"},
            {
                "op": "strided_slice",
                "name": "y",
                "inputs": [0],
                "shape": [2, 3],
                "dtype": "float32",
                "attrs": {"begin": [0] * length, "step": [1] * length},
            },
        ]
    )


# Found by issue 17's independent fuzzer, too big to keep as files: (graph JSON, the expected
# outcome, text the message must contain, what happened before the fix). The worker also fails
# any message over the runtime's cap of 1000 characters (target.py).
GENERATED = {
    "a declared shape of 100000 dims": (
        lambda: _relu_of_rank(100_000),
        "rejected",
        "(1, 1, 1, 1, 1, 1, 1, 1, ... (99999 dims))",
        "both shapes in full: a 300 KB message",
    ),
    "a slice with 1000000 begin and step values": (
        lambda: _slice_with_long_attributes(1_000_000),
        "rejected",
        "must have the input's rank 2",
        "issue 17's fuzzer saw 3 MB messages from long attribute lists",
    ),
}


@pytest.mark.parametrize("name", GENERATED)
def test_generated_regression(name, worker):
    build, expect, match, before = GENERATED[name]
    outcome, detail = worker.run(from_record({"kind": "g", "text": build()}), timeout=HANG_SECONDS)
    assert outcome == expect, f"{name} (before the fix: {before}): {outcome}\n{detail}"
    assert match in detail


def _runtime_param_copies(copies: int, channels: int) -> str:
    """A qnn.conv2d whose quantization parameters are runtime arguments (the spec's
    bind_constants=False flow), repeated `copies` times over the same parameter inputs."""
    nodes = [
        {"op": "input", "name": "x", "shape": [1, 4, 8, 8], "dtype": "int8"},
        {"op": "input", "name": "w", "shape": [channels, 4, 1, 1], "dtype": "int8"},
        {"op": "input", "name": "s", "shape": [channels], "dtype": "float32"},
    ]
    conv = {
        "op": "qnn.conv2d",
        "inputs": [0, 1],
        "shape": [1, channels, 8, 8],
        "dtype": "int8",
        "attrs": {
            **{"strides": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": 1},
            **{"data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "NCHW"},
            "input_scale": 0.05,
            "input_zero_point": 0,
            "weight_scales": {"arg": 2},
            "output_scale": 0.1,
            "output_zero_point": 0,
        },
    }
    nodes += [dict(conv, name=f"c{i}") for i in range(copies)]
    heads = list(range(3, len(nodes)))
    return json.dumps(
        {"version": 1, "symbol": "f", "nodes": nodes, "arg_nodes": [0, 1, 2], "heads": heads}
    )


def test_runtime_parameters_are_bounded_over_all_their_references(worker):
    """fuzz seed 14 index 120911: 8905 copies of a node referring to a 65536-element runtime
    parameter bound 584M numbers into the attributes before any size check: out of memory."""
    record = {"kind": "g", "text": _runtime_param_copies(2_000, 65_536)}
    outcome, detail = worker.run(from_record(record), timeout=HANG_SECONDS)
    assert outcome == "rejected", f"{outcome}\n{detail}"
    assert "runtime parameters" in detail
    # A few references stay well inside the bound (the worker's random scales may still be
    # rejected when the module is called: they are not positive).
    small = {"kind": "g", "text": _runtime_param_copies(4, 32)}
    outcome, detail = worker.run(from_record(small), timeout=HANG_SECONDS)
    assert outcome in GOOD and "in all" not in detail, detail


def test_generated_program_with_an_empty_conv_input(worker):
    """Seed 127 of the program generator reaches a conv on a tensor with zero input channels;
    drawing its groups once divided by zero and stopped the whole fuzz run."""
    program = generate(np.random.default_rng(127))
    conv = program["steps"][-1]
    assert conv["op"] == "nn.conv1d" and 0 in conv["args"][1]["const"]
    outcome, detail = worker.run(FuzzInput("r", json.dumps(program).encode(), "seed 127"),
                                 timeout=HANG_SECONDS)  # fmt: skip
    assert outcome in GOOD, detail
