"""NPUConfig's hardware-description fields and presets (python/example_npu/config.py): each field
changes the cycle model the way its documentation says, checked against byte and MAC counts
numpy computes, and every preset is a valid configuration the CLI accepts by name."""

from __future__ import annotations

import json
import math

import example_npu
import numpy as np
import pytest
import tvm
from example_npu import InvalidConfigError, NPUConfig
from example_npu.config import PRESETS
from tvm import relax

R = relax.op


def _conv_module(groups: int, channels: int = 32, size: int = 16) -> tuple[tvm.IRModule, int]:
    """relu(conv2d 3x3, same padding) with constant weights, and its MAC count."""
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((channels, channels // groups, 3, 3)).astype("float32")
    x = relax.Var("x", relax.TensorType((1, channels, size, size), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            conv = bb.emit(R.nn.conv2d(x, relax.const(weight), padding=(1, 1, 1, 1), groups=groups))
            out = bb.emit_output(R.nn.relu(conv))
        bb.emit_func_output(out)
    macs = size * size * channels * (channels // groups) * 9
    return bb.get(), macs


def _matmul_module(rows: int = 8, depth: int = 256, cols: int = 256) -> tuple[tvm.IRModule, int]:
    """relu(x @ W) with a constant weight, and the weight's bytes."""
    weight = np.random.default_rng(1).standard_normal((depth, cols)).astype("float32")
    x = relax.Var("x", relax.TensorType((rows, depth), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(R.nn.relu(bb.emit(R.matmul(x, relax.const(weight)))))
        bb.emit_func_output(out)
    return bb.get(), weight.nbytes


def test_the_default_config_keeps_the_default_machine():
    config = NPUConfig()
    assert (config.dataflow, config.depthwise_engine, config.elementwise_engine) == (
        "output_stationary",
        "vector",
        "vector",
    )
    assert (config.weight_memory, config.feature_map_memory, config.op_setup_cycles) == (
        "dram",
        "dram",
        0,
    )
    assert config.clock_mhz == 800.0


def test_string_fields_are_checked_on_both_sides():
    create = tvm.get_global_func("runtime.ExampleNPUJSONRuntimeCreate")
    for name in (
        "depthwise_engine",
        "elementwise_engine",
        "weight_memory",
        "weight_layout",
        "feature_map_memory",
    ):
        with pytest.raises(InvalidConfigError, match=name):
            NPUConfig(**{name: "tape"})
        graph = {
            "version": 1,
            "symbol": "f",
            "npu_config": {name: "tape"},
            "nodes": [
                {"op": "input", "name": "x", "shape": [2], "dtype": "float32"},
                {"op": "nn.relu", "name": "y", "inputs": [0], "shape": [2], "dtype": "float32"},
            ],
            "arg_nodes": [0],
            "heads": [1],
        }
        with pytest.raises(ValueError, match=f"{name} 'tape' is not one of"):
            create("f", json.dumps(graph), [])


def test_peak_clock_scales_every_power_mode():
    mod, _ = _matmul_module()
    fast = example_npu.estimate(mod, NPUConfig(power_mode="low_power", peak_clock_mhz=500.0))
    slow = NPUConfig(power_mode="low_power", peak_clock_mhz=500)
    assert fast.clock_mhz == 200.0 == slow.clock_mhz


def test_feature_maps_in_the_sram_arena_leave_only_weights_off_chip():
    """With every feature map in the arena, the DRAM (off-chip) traffic is the weights, read
    once here (they fit on chip): exactly their numpy byte count."""
    mod, weight_bytes = _matmul_module()
    in_dram = example_npu.estimate(mod)
    arena = NPUConfig(feature_map_memory="sram", sram_arena_kb=1024)
    in_sram = example_npu.estimate(mod, arena)
    assert in_sram.bytes_moved["DRAM"] == weight_bytes
    io_bytes = (8 * 256 + 8 * 256) * 4
    assert in_dram.bytes_moved["DRAM"] == weight_bytes + io_bytes
    assert in_sram.bytes_moved["L2"] == in_dram.bytes_moved["L2"] + io_bytes
    # An arena too small for the feature maps holds none of them.
    too_small = example_npu.estimate(mod, NPUConfig(feature_map_memory="sram", sram_arena_kb=8))
    assert too_small.bytes_moved == in_dram.bytes_moved
    # The intermediates-only arena keeps a single op's inputs and outputs in DRAM.
    inter = NPUConfig(feature_map_memory="sram_intermediates", sram_arena_kb=1024)
    assert example_npu.estimate(mod, inter).bytes_moved == in_dram.bytes_moved


def test_weights_in_flash_cost_flash_bandwidth():
    """Weights read from a slow flash take at least their bytes over its bandwidth, and move the
    same bytes (flash counts as off-chip, DRAM traffic)."""
    mod, weight_bytes = _matmul_module()
    dram = example_npu.estimate(mod, NPUConfig(power_mode="high_performance"))
    config = NPUConfig(
        power_mode="high_performance", weight_memory="flash", flash_bandwidth_gb_per_s=0.25
    )
    flash = example_npu.estimate(mod, config)
    assert flash.bytes_moved == dram.bytes_moved
    flash_cycles = weight_bytes / (0.25 * 1e3 / config.clock_mhz)  # bytes / (bytes per cycle)
    assert flash.total_cycles >= flash_cycles > dram.total_cycles


def test_depthwise_on_the_mac_array_runs_at_its_rate():
    mod, macs = _conv_module(groups=32)
    config = NPUConfig(depthwise_engine="matrix", depthwise_macs_per_cycle=8)
    prof = example_npu.estimate(mod, config)
    assert prof.macs == macs
    assert prof.busy_cycles["matrix"] >= math.ceil(macs / 8) > prof.busy_cycles["vector"]
    on_vector = example_npu.estimate(mod)
    assert on_vector.busy_cycles["matrix"] == 0 and on_vector.busy_cycles["vector"] > 0


def test_elementwise_work_on_the_mac_array_serializes_with_it():
    """A float add moved onto the MAC array: its cycles count as matrix busy cycles, at
    elementwise_elements_per_cycle (float32 at a quarter of the 8-bit rate)."""
    x = relax.Var("x", relax.TensorType((64, 256), "float32"))
    y = relax.Var("y", relax.TensorType((64, 256), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            out = bb.emit_output(R.add(x, y))
        bb.emit_func_output(out)
    mod = bb.get()
    config = NPUConfig(elementwise_engine="matrix", elementwise_elements_per_cycle=2.0)
    prof = example_npu.estimate(mod, config)
    assert prof.busy_cycles["vector"] == 0
    assert prof.busy_cycles["matrix"] >= 64 * 256 * 4 / 2.0


def test_op_setup_cycles_are_paid_once_per_fused_op():
    mod, _ = _conv_module(groups=1)
    base = example_npu.estimate(mod)
    setup = example_npu.estimate(mod, NPUConfig(op_setup_cycles=1000))
    groups = len(base.nodes)
    assert sum(setup.busy_cycles.values()) - sum(base.busy_cycles.values()) == 1000 * groups


def test_block_dataflow_cycles_follow_the_block_shape():
    """A 1x1 convolution has one tap: its MAC-array cycles are the blocks it covers."""
    x = relax.Var("x", relax.TensorType((1, 64, 8, 8), "float32"))
    weight = np.ones((32, 64, 1, 1), "float32")
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(R.nn.conv2d(x, relax.const(weight)))
        bb.emit_func_output(out)
    config = NPUConfig(dataflow="block", mac_block_pixels=4, mac_block_channels=8)
    prof = example_npu.estimate(bb.get(), config)
    # 64 pixels / 4 x 32 channels / 8 x 64 input channels / 8, 4 passes for float32.
    blocks = 16 * 4 * 8 * 4
    assert blocks <= prof.busy_cycles["matrix"] <= blocks + 4 * 64  # + issue cycles per command


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_are_valid_and_round_trip(name):
    config = NPUConfig.preset(name)
    assert NPUConfig.from_json(config.to_json()) == config
    macs = int(name.rsplit("-", 1)[1])
    assert config.mac_block_pixels * config.mac_block_channels * config.mac_block_depth == macs
    assert config.clock_mhz == (500.0 if "u55" in name else 1000.0)
    assert NPUConfig.preset(name, sram_arena_kb=64).sram_arena_kb == 64
    with pytest.raises(InvalidConfigError, match="unknown NPU preset"):
        NPUConfig.preset(name + "x")
