"""The NPU model: tiling under small memories, roofline, fusion, power modes, scaling."""

from __future__ import annotations

import json

import example_npu
import numpy as np
import pytest
import tvm
from example_npu import NPUConfig
from example_npu.config import InvalidConfigError
from example_npu.frontend.builtin_models import default_model
from example_npu.partition.report import partition_with_report
from npu_models import add, conv3x3, conv_chain, gemm, inputs_for
from spec_models import SPEC_MODULES, run
from test_end_to_end import CpuBetweenRegions, _conv_bn_model
from test_fused_patterns import conv_model, linear_model
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
from tvm.relax.transform import FuseOpsByPattern, MergeCompositeFunctions, RunCodegen

TINY = NPUConfig(l1_sram_kb=16)


def profile_of(mod: tvm.IRModule, config: NPUConfig | None = None) -> example_npu.Profile:
    ex = tvm.compile(example_npu.partition_for_npu(mod, config=config), target="llvm")
    return example_npu.profile(ex, *inputs_for(mod))


TEST_MODELS = {
    **SPEC_MODULES,
    "CpuBetweenRegions": CpuBetweenRegions,
    "ConvBatchNormPoolSoftmax": _conv_bn_model(),
    "ConvBiasRelu6": conv_model("float32", "reshape", "relu6"),
    "DenseBiasGelu": linear_model("float32", "gelu", dense=True),
    "DefaultModel": default_model(),
}


@pytest.mark.parametrize("name", sorted(TEST_MODELS))
def test_tiny_l1_still_matches_with_more_tiles_and_traffic(name):
    mod = TEST_MODELS[name]
    inputs = inputs_for(mod, seed=3)
    tiny_module = example_npu.partition_for_npu(mod, config=TINY)
    np.testing.assert_allclose(run(tiny_module, inputs), run(mod, inputs), rtol=1e-5, atol=1e-5)
    default = profile_of(mod)
    tiny = profile_of(mod, TINY)
    assert sum(n.tiles for n in tiny.nodes) >= sum(n.tiles for n in default.nodes)
    assert tiny.bytes_moved["DRAM"] >= default.bytes_moved["DRAM"]


def test_tiny_l1_splits_work_that_the_default_keeps_whole():
    mod = conv3x3(32, 32, 32)
    assert sum(n.tiles for n in profile_of(mod, TINY).nodes) > sum(
        n.tiles for n in profile_of(mod).nodes
    )
    assert profile_of(mod, TINY).bytes_moved["DRAM"] > profile_of(mod).bytes_moved["DRAM"]


def roofline_ratio(prof: example_npu.Profile, config: NPUConfig, dtype_rate: float) -> float:
    peak_macs = config.matrix_engine_dim**2 * dtype_rate
    dram_bytes_per_cycle = config.dram_bandwidth_gb_per_s * 1e3 / config.clock_mhz
    bound = max(prof.macs / peak_macs, prof.bytes_moved["DRAM"] / dram_bytes_per_cycle)
    return prof.total_cycles / bound


@pytest.mark.parametrize("mod", [gemm(512, 512, 512), conv3x3(64, 56, 64)], ids=["gemm", "conv"])
def test_large_gemm_and_conv_run_near_the_roofline(mod):
    prof = profile_of(mod)
    assert 1.0 <= roofline_ratio(prof, NPUConfig(), dtype_rate=0.25) <= 1.25


def fused_and_separate_conv_relu() -> tuple[example_npu.Profile, example_npu.Profile]:
    mod = conv3x3(16, 32, 16, relu=True)
    fused = profile_of(mod)
    single_op = [
        p for p in get_patterns_with_prefix("example_npu") if p.name.endswith(("conv2d", ".relu"))
    ]
    separate = FuseOpsByPattern(single_op, bind_constants=False, annotate_codegen=True)(mod)
    separate = RunCodegen()(MergeCompositeFunctions()(separate))
    ex = tvm.compile(separate, target="llvm")
    return fused, example_npu.profile(ex, *inputs_for(mod))


def test_fusion_moves_fewer_dram_bytes_than_separate_subgraphs():
    fused, separate = fused_and_separate_conv_relu()
    assert len(separate.subgraphs) == 2 and len(fused.subgraphs) == 1
    assert fused.bytes_moved["DRAM"] < separate.bytes_moved["DRAM"]
    assert fused.total_cycles < separate.total_cycles


@pytest.mark.parametrize("name", sorted(TEST_MODELS))
def test_power_modes_order_latency_and_energy(name):
    """high_performance has the lowest latency; low_power the lowest energy per inference."""
    mod = TEST_MODELS[name]
    profiles = {
        mode: profile_of(mod, NPUConfig(power_mode=mode))
        for mode in ("high_performance", "balanced", "low_power")
    }
    latency = {mode: p.latency_us for mode, p in profiles.items()}
    energy = {mode: p.energy_uj for mode, p in profiles.items()}
    assert latency["high_performance"] < latency["balanced"] < latency["low_power"]
    assert energy["low_power"] < energy["balanced"] < energy["high_performance"]


def test_compute_bound_cycles_grow_linearly_with_macs():
    cycles = {k: profile_of(gemm(256, k, 256)).total_cycles for k in (256, 512, 1024)}
    assert cycles[512] / cycles[256] == pytest.approx(2.0, rel=0.1)
    assert cycles[1024] / cycles[256] == pytest.approx(4.0, rel=0.1)


def test_halving_dram_bandwidth_halves_memory_bound_speed():
    mod = add((1, 64, 64, 64))
    full = profile_of(mod, NPUConfig(dram_bandwidth_gb_per_s=16.0)).total_cycles
    half = profile_of(mod, NPUConfig(dram_bandwidth_gb_per_s=8.0)).total_cycles
    assert 1.8 <= half / full <= 2.05


def test_profile_reports_nodes_engines_and_traffic(tmp_path):
    prof = profile_of(default_model())
    assert prof.total_cycles > 0 and prof.energy_uj > 0 and prof.latency_us > 0
    engines = {node.engine for node in prof.nodes}
    assert {"matrix", "pooling", "activation"} <= engines
    assert prof.macs == sum(node.macs for node in prof.nodes) > 0
    assert all(prof.bytes_moved[t] > 0 for t in ("L1", "DRAM"))
    assert 0 < prof.utilization["matrix"] <= 1
    table = prof.table()
    assert "nn.conv2d+nn.relu" in table and "total:" in table
    trace = json.loads(prof.to_chrome_trace(tmp_path / "trace.json").read_text())
    tracks = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert {"matrix", "dma0", "groups"} <= tracks
    assert sum(e["ph"] == "X" for e in trace["traceEvents"]) > len(prof.nodes)


def test_groups_overlap_and_the_outputs_stay_exact(tmp_path):
    """The second convolution's loads start while the first computes: one NPU function of two
    convolutions takes fewer cycles than the two convolutions profiled alone, and computes what
    TVM's CPU build computes."""
    two, one = conv_chain(16, 32, count=2), conv_chain(16, 32, count=1)
    inputs = inputs_for(two, seed=4)
    partitioned = example_npu.partition_for_npu(two)
    np.testing.assert_allclose(run(partitioned, inputs), run(two, inputs), rtol=1e-5, atol=1e-5)
    prof = example_npu.profile(tvm.compile(partitioned, target="llvm"), *inputs)
    first, second = prof.subgraphs[0]["groups"]
    assert len(prof.subgraphs) == 1 and second["start"] < first["end"]
    assert prof.total_cycles < 2 * profile_of(one).total_cycles
    # The stream says why: a command of group 1 waits for a command of group 0.
    (npu_module,) = partitioned.attrs["external_mods"]
    lines = [line.split() for line in npu_module.inspect_source("commands").splitlines()]
    group0 = {words[0] for words in lines if words[1:2] == ["g0"]}
    deps_of_group1 = [
        set(word.removeprefix("deps=").split(","))
        for words in lines
        if words[1:2] == ["g1"]
        for word in words
        if word.startswith("deps=")
    ]
    assert any(deps & group0 for deps in deps_of_group1)
    trace = json.loads(prof.to_chrome_trace(tmp_path / "trace.json").read_text())
    tracks = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert {"groups", "groups 2"} <= tracks


def test_profile_without_npu_work_raises():
    ex = tvm.compile(add((2, 2)), target="llvm")
    with pytest.raises(ValueError, match="no NPU subgraph"):
        example_npu.profile(ex, *inputs_for(add((2, 2))))


def test_config_json_round_trip_and_validation():
    config = NPUConfig(
        l1_sram_kb=64,
        power_mode="low_power",
        dram_bandwidth_gb_per_s=8.5,
        dataflow="weight_stationary",
    )
    assert NPUConfig.from_json(config.to_json()) == config
    for bad in (
        {"l1_sram_kb": 2},
        {"dram_bandwidth_gb_per_s": 0.0},
        {"power_mode": "turbo"},
        {"dataflow": "row_stationary"},
    ):
        with pytest.raises(InvalidConfigError):
            NPUConfig(**bad)
    with pytest.raises(InvalidConfigError, match="unknown"):
        NPUConfig.from_json('{"l4_kb": 1}')


def test_config_travels_with_the_module_and_shapes_the_plan():
    mod = example_npu.partition_for_npu(conv3x3(32, 32, 32), config=TINY)
    (npu_module,) = mod.attrs["external_mods"]
    graph = json.loads(npu_module.inspect_source())
    assert graph["npu_config"]["l1_sram_kb"] == 16
    commands = npu_module.inspect_source("commands")
    assert "L1 16 KB" in commands and "dma load" in commands and "matrix nn.conv2d" in commands


def test_the_cpp_compiler_rejects_a_config_the_python_side_did_not_validate():
    create = tvm.get_global_func("runtime.ExampleNPUJSONRuntimeCreate")
    graph = {
        "version": 1,
        "symbol": "f",
        "npu_config": {"l1_sram_kb": 1},
        "nodes": [
            {"op": "input", "name": "x", "shape": [2], "dtype": "float32"},
            {"op": "nn.relu", "name": "y", "inputs": [0], "shape": [2], "dtype": "float32"},
        ],
        "arg_nodes": [0],
        "heads": [1],
    }
    with pytest.raises(ValueError, match="l1_sram_kb"):
        create("f", json.dumps(graph), [])


def _softmax_module(row: int) -> tvm.IRModule:
    bb = tvm.relax.BlockBuilder()
    x = tvm.relax.Var("x", tvm.relax.TensorType((4, row), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(tvm.relax.op.nn.softmax(x, axis=-1))
        bb.emit_func_output(out)
    return bb.get()


def test_checks_plan_for_the_config_being_partitioned_for():
    """A softmax row of 16 KB (32 KB with its result) fits the default L1 but not a 16 KB one:
    with the small config the check keeps it on the CPU (no compile-time error), with the
    default it runs on the NPU; both give TVM's numbers."""
    mod = _softmax_module(4096)
    inputs = inputs_for(mod, seed=5)
    expected = run(mod, inputs)
    small, report = partition_with_report(mod, config=TINY)
    assert report.npu_functions == []
    assert "does not fit the 16384-byte L1" in report.cpu_reason("nn.softmax")
    np.testing.assert_allclose(run(small, inputs), expected, rtol=1e-5, atol=1e-6)
    default = example_npu.partition_for_npu(mod)
    assert "call_dps_packed" in default["main"].script()
    np.testing.assert_allclose(run(default, inputs), expected, rtol=1e-5, atol=1e-6)
    # Outside a partitioning call the checks are back to the default NPU.
    assert "call_dps_packed" in example_npu.partition_for_npu(mod)["main"].script()


def test_python_power_modes_mirror_the_cpp_operating_points():
    """config.POWER_MODES and npu_config.cc's table must not drift apart: the C++ profile's clock
    is the Python clock, and energy (the same work at every mode) scales as the Python V²."""
    from example_npu.config import POWER_MODES

    mod = conv3x3(16, 16, 16)
    energies = {}
    for mode, (clock_mhz, _volts) in POWER_MODES.items():
        prof = profile_of(mod, NPUConfig(power_mode=mode))
        assert prof.clock_mhz == clock_mhz
        energies[mode] = prof.energy_uj
    ref_mode, (_, ref_volts) = next(iter(POWER_MODES.items()))
    for mode, (_, volts) in POWER_MODES.items():
        assert energies[mode] / energies[ref_mode] == pytest.approx((volts / ref_volts) ** 2)
