"""Issue 9's limits, seen from Python: empty tensors, the DRAM and tile limits, config ranges.

Hostile graph JSON and module bytes are in tests/fuzz/regressions (test_fuzz_regressions.py);
this file covers what a user reaches through the public API.
"""

from __future__ import annotations

import json
import math

import example_npu
import numpy as np
import pytest
import tvm
from example_npu import InvalidConfigError, NPUConfig
from example_npu.config import FIELD_RANGES
from example_npu.partition.report import partition_with_report
from spec_models import external_symbols, run
from tvm import relax

R = relax.op


def module(fn, *shapes) -> tvm.IRModule:
    bb = relax.BlockBuilder()
    params = [relax.Var(f"p{i}", relax.TensorType(s, "float32")) for i, s in enumerate(shapes)]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(fn(bb, *params))
        bb.emit_func_output(out)
    return bb.get()


def reasons(report) -> list[str]:
    return [reason for found in report.reasons.values() for reason in found]


# name -> (builder, shapes, offloaded). An empty result is computed by doing nothing, on the NPU
# as in TVM; a non-empty result of an empty operand (zeros for K = 0) stays on the CPU.
ZERO_SIZE = {
    "relu(matmul) M=0": (lambda bb, a, b: R.nn.relu(bb.emit(R.matmul(a, b))), [(0, 4), (4, 8)], 1),
    "matmul K=0": (lambda bb, a, b: R.matmul(a, b), [(2, 0), (0, 8)], 0),
    "matmul N=0": (lambda bb, a, b: R.matmul(a, b), [(2, 4), (4, 0)], 1),
    "max_pool2d batch 0": (lambda bb, x: R.nn.max_pool2d(x, (2, 2)), [(0, 3, 4, 4)], 1),
    "softmax empty axis": (lambda bb, x: R.nn.softmax(x, axis=1), [(3, 0)], 1),
    "conv2d no channels": (lambda bb, x, w: R.nn.conv2d(x, w), [(1, 0, 4, 4), (2, 0, 3, 3)], 0),
    "add empty": (lambda bb, x, y: R.add(x, y), [(0,), (1,)], 1),
}


@pytest.mark.parametrize("name", sorted(ZERO_SIZE))
def test_zero_size_tensors_compute_what_tvm_computes(name):
    """Issue 9: relu(matmul((0, 4), (4, 8))) killed the process (SIGFPE in the tiling)."""
    fn, shapes, offloaded = ZERO_SIZE[name]
    mod = module(fn, *shapes)
    partitioned, report = partition_with_report(mod)
    assert bool(external_symbols(partitioned)) == bool(offloaded)
    if not offloaded:
        assert any("empty operand" in reason for reason in reasons(report))
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape).astype("float32") for shape in shapes]
    expected = run(mod, inputs)
    actual = run(partitioned, inputs)
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)


def test_an_op_larger_than_the_dram_stays_on_the_cpu():
    mod = module(lambda bb, x: R.nn.relu(x), (1024, 1024))
    small = NPUConfig(dram_mb=4)  # input and output are 4 MB each
    partitioned, report = partition_with_report(mod, config=small)
    assert external_symbols(partitioned) == []
    assert any("DRAM" in reason for reason in reasons(report))
    assert external_symbols(example_npu.partition_for_npu(mod, config=NPUConfig(dram_mb=16)))


def test_a_region_over_the_dram_or_the_tile_limit_raises_value_error():
    """Per op it fits; the whole region (or its tile count) does not: a clear ValueError."""

    def chain(bb, x):
        return R.nn.softmax(bb.emit(R.nn.relu(x)), axis=-1)

    # 2 MB per tensor: 4 MB per op, 6 MB for the region (relu's result is kept in DRAM).
    mod = module(chain, (512, 1024))
    with pytest.raises(ValueError, match="NPUConfig.dram_mb"):
        example_npu.partition_for_npu(mod, config=NPUConfig(dram_mb=5))
    with pytest.raises(ValueError, match="NPUConfig.max_tiles"):
        example_npu.partition_for_npu(mod, config=NPUConfig(max_tiles=8))


def test_python_config_ranges_mirror_the_cpp_table():
    cpp = json.loads(tvm.get_global_func("example_npu.npu_config_field_ranges")())
    assert set(cpp) == set(FIELD_RANGES)
    defaults = NPUConfig()
    for name, info in cpp.items():
        assert FIELD_RANGES[name] == (info["min"], info["max"]), name
        assert getattr(defaults, name) == info["default"], name


@pytest.mark.parametrize("name", sorted(FIELD_RANGES))
def test_every_config_field_is_range_checked_on_both_sides(name):
    low, high = FIELD_RANGES[name]
    is_int = isinstance(getattr(NPUConfig(), name), int)
    step = 1 if is_int else 0
    below = low - step if is_int else low / 2
    above = high + step if is_int else high * 2
    create = tvm.get_global_func("runtime.ExampleNPUJSONRuntimeCreate")
    for value in (below, above):
        with pytest.raises(InvalidConfigError, match=name):
            NPUConfig(**{name: value})
        graph = {
            "version": 1,
            "symbol": "f",
            "npu_config": {name: value},
            "nodes": [
                {"op": "input", "name": "x", "shape": [2], "dtype": "float32"},
                {"op": "nn.relu", "name": "y", "inputs": [0], "shape": [2], "dtype": "float32"},
            ],
            "arg_nodes": [0],
            "heads": [1],
        }
        with pytest.raises(ValueError, match=name):
            create("f", json.dumps(graph), [])
    for value in (low, high) if name not in ("l1_sram_kb", "tile_height", "tile_width") else ():
        NPUConfig(**{name: value})  # the bounds themselves are valid


@pytest.mark.parametrize(
    "text",
    ["[" * 100000, b'{"l1_sram_kb": 1\xff}', "[1, 2]", "17", '{"l1_sram_kb": true}', "{"],
)
def test_malformed_config_json_raises_invalid_config_error(text):
    with pytest.raises(InvalidConfigError):
        NPUConfig.from_json(text)


def test_config_rejects_non_finite_and_wrong_types():
    for bad in (math.nan, math.inf, "1", None, True):
        with pytest.raises(InvalidConfigError):
            NPUConfig(dram_bandwidth_gb_per_s=bad)
    with pytest.raises(InvalidConfigError):
        NPUConfig(power_mode=["balanced"])


@pytest.mark.parametrize(
    "text",
    [
        '{"dram_bandwidth_gb_\udcf4per_s": 8}',  # lone surrogate: bad UTF-8 decoded leniently
        '{"energy_l1\ufffd_pj_per_byte": 2.8}',
        '{"vector_elements": "\u00b2\u00b2"}',
        '{"power_mode": "turbo\u202e"}',
        '{"' + "x" * 5000 + '": 1}',
    ],
)
def test_config_error_messages_are_short_printable_ascii(text):
    """A config file is untrusted: what the error quotes from it is escaped and cut."""
    with pytest.raises(InvalidConfigError) as err:
        NPUConfig.from_json(text)
    message = str(err.value)
    assert message.isascii() and message.isprintable(), message
    assert len(message) <= InvalidConfigError.MAX_CHARS + 3
