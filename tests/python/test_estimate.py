"""estimate(): the profile of a run, from compilation alone."""

from __future__ import annotations

import example_npu
import pytest
import tvm
import tvm_ffi
from example_npu import NPUConfig
from example_npu.config import PRESETS
from test_npu_model import TEST_MODELS, TINY, profile_of
from tvm import relax, tirx


@pytest.mark.parametrize("name", sorted(TEST_MODELS))
def test_estimate_equals_the_profile_of_a_run(name):
    mod = TEST_MODELS[name]
    for config in (None, TINY, NPUConfig(dataflow="weight_stationary", power_mode="low_power")):
        assert example_npu.estimate(mod, config) == profile_of(mod, config)


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("name", ["DefaultModel", "ConvBatchNormPoolSoftmax", "ConvBiasRelu6"])
def test_estimate_equals_the_profile_of_a_run_on_every_preset(name, preset):
    config = NPUConfig.preset(preset)
    assert example_npu.estimate(TEST_MODELS[name], config) == profile_of(TEST_MODELS[name], config)


def test_estimate_executes_no_npu_function():
    """A profiling session sees every NPU call made on its thread; estimate makes none."""
    tvm_ffi.get_global_func("example_npu.profiler_begin")()
    try:
        prof = example_npu.estimate(TEST_MODELS["DefaultModel"])
    finally:
        recorded = list(tvm_ffi.get_global_func("example_npu.profiler_end")())
    assert recorded == [] and prof.total_cycles > 0


def _relu_matmul(batch) -> tvm.IRModule:
    x = relax.Var("x", relax.TensorType((batch, 64), "float32"))
    w = relax.Var("w", relax.TensorType((64, 32), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.nn.relu(relax.op.matmul(x, w)))
        bb.emit_func_output(out)
    return bb.get()


def test_input_shapes_bind_symbolic_dims():
    symbolic = _relu_matmul(tirx.Var("n", "int64"))
    static = _relu_matmul(8)
    bound = example_npu.estimate(symbolic, input_shapes={"x": (8, 64)})
    assert bound == profile_of(static)
    with pytest.raises(ValueError, match="pass input_shapes"):
        example_npu.estimate(symbolic)
    with pytest.raises(ValueError, match="does not match"):
        example_npu.estimate(symbolic, input_shapes={"x": (8, 63)})
    with pytest.raises(ValueError, match="which main does not take"):
        example_npu.estimate(symbolic, input_shapes={"y": (8, 64)})


def test_estimate_of_a_cpu_only_model_raises():
    x = relax.Var("x", relax.TensorType((4, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.sin(x))
        bb.emit_func_output(out)
    with pytest.raises(ValueError, match="no NPU subgraph"):
        example_npu.estimate(bb.get())
