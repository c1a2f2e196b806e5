"""End to end: NPU-partitioned modules equal TVM's own CPU build of the same module, and numpy."""

from __future__ import annotations

import example_npu
import numpy as np
import pytest
import tvm
from spec_models import SPEC_MODULES, MatmulReLU, external_symbols, random_inputs, run
from tvm import relax
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
from tvm.relax.transform import FuseOpsByPattern, MergeCompositeFunctions, RunCodegen
from tvm.script import relax as R


def quick_start_flow(mod: tvm.IRModule) -> tvm.IRModule:
    """The specification's flow: one external call per composite."""
    patterns = get_patterns_with_prefix("example_npu")
    mod = FuseOpsByPattern(patterns, bind_constants=False, annotate_codegen=True)(mod)
    mod = MergeCompositeFunctions()(mod)
    return RunCodegen()(mod)


NUMPY_REFERENCES = {
    "MatmulReLU": lambda x, w: np.maximum(x @ w, 0),
    "MultipleOps": lambda x: np.maximum(x, 0).reshape(1, 16, 16, 2, 16, 2).max(axis=(3, 5)),
    "Softmax": lambda x: (
        np.exp(x - x.max(1, keepdims=True))
        / np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)
    ),
    "Conv2dReLU": lambda x, w: np.maximum(
        np.einsum(
            "nchwij,ocij->nohw", np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3)), w
        ),
        0,
    ),
}


@pytest.mark.parametrize("name", sorted(SPEC_MODULES))
@pytest.mark.parametrize("flow", ["quick_start", "partition_for_npu"])
def test_spec_modules_match_tvm_cpu_build_and_numpy(name, flow):
    mod = SPEC_MODULES[name]
    offloaded = (
        quick_start_flow(mod) if flow == "quick_start" else example_npu.partition_for_npu(mod)
    )
    assert external_symbols(offloaded), "nothing was offloaded"
    inputs = random_inputs(mod, seed=7)
    npu = run(offloaded, inputs)
    np.testing.assert_allclose(npu, run(mod, inputs), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(npu, NUMPY_REFERENCES[name](*inputs), rtol=1e-4, atol=1e-4)


@tvm.script.ir_module
class CpuBetweenRegions:
    """relu -> (sin on the CPU: no NPU pattern) -> matmul + relu: two NPU regions."""

    @R.function
    def main(x: R.Tensor((4, 16), "float32"), w: R.Tensor((16, 8), "float32")):
        with R.dataflow():
            a = R.nn.relu(x)
            b = R.sin(a)
            c = R.matmul(b, w)
            d = R.nn.relu(c)
            R.output(d)
        return d


def test_partly_offloaded_model_runs_cpu_ops_between_npu_regions():
    mod = example_npu.partition_for_npu(CpuBetweenRegions)
    assert len(external_symbols(mod)) == 2
    inputs = random_inputs(CpuBetweenRegions, seed=3)
    x, w = inputs
    np.testing.assert_allclose(run(mod, inputs), run(CpuBetweenRegions, inputs), rtol=1e-5)
    np.testing.assert_allclose(
        run(mod, inputs), np.maximum(np.sin(np.maximum(x, 0)) @ w, 0), rtol=1e-4
    )


@tvm.script.ir_module
class Float64Matmul:
    @R.function
    def main(x: R.Tensor((3, 5), "float64"), w: R.Tensor((5, 2), "float64")):
        with R.dataflow():
            y = R.matmul(x, w)
            R.output(y)
        return y


def test_float64_matmul_falls_back_to_cpu_and_is_correct():
    mod = example_npu.partition_for_npu(Float64Matmul)
    assert external_symbols(mod) == []
    x, w = random_inputs(Float64Matmul)
    np.testing.assert_allclose(run(mod, [x, w]), x @ w, rtol=1e-12)


def _conv_bn_model(training: bool = False) -> tvm.IRModule:
    rng = np.random.default_rng(1)
    x = relax.Var("x", relax.TensorType((1, 4, 10, 10), "float32"))
    weight = relax.const(rng.standard_normal((8, 4, 3, 3)).astype("float32"))
    params = [relax.const(rng.uniform(0.5, 1.5, 8).astype("float32")) for _ in range(4)]
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            conv = bb.emit(relax.op.nn.conv2d(x, weight, padding=(1, 1, 1, 1)))
            bn = bb.emit(relax.op.nn.batch_norm(conv, *params, axis=1, training=training))
            pooled = bb.emit(relax.op.nn.avg_pool2d(relax.TupleGetItem(bn, 0), (2, 2), (2, 2)))
            out = bb.emit_output(relax.op.nn.softmax(pooled, axis=1))
        bb.emit_func_output(out)
    return bb.get()


def test_bound_weights_conv_batchnorm_pool_softmax_fully_offloaded():
    model = _conv_bn_model()
    mod = example_npu.partition_for_npu(model)
    assert len(external_symbols(mod)) == 1
    inputs = random_inputs(model, seed=5)
    np.testing.assert_allclose(run(mod, inputs), run(model, inputs), rtol=1e-5, atol=1e-6)


def test_batch_norm_tuple_outputs_through_quick_start_flow():
    model = _conv_bn_model()
    mod = quick_start_flow(model)
    inputs = random_inputs(model, seed=6)
    np.testing.assert_allclose(run(mod, inputs), run(model, inputs), rtol=1e-5, atol=1e-6)


def test_training_batch_norm_stays_on_cpu_and_is_correct():
    model = _conv_bn_model(training=True)
    mod = example_npu.partition_for_npu(model)
    assert all("batch_norm" not in symbol for symbol in external_symbols(mod))
    inputs = random_inputs(model, seed=8)
    np.testing.assert_allclose(run(mod, inputs), run(model, inputs), rtol=1e-5, atol=1e-6)


def test_quick_start_numbers_equal_numpy():
    x, w = random_inputs(MatmulReLU, seed=42)
    out = run(quick_start_flow(MatmulReLU), [x, w])
    np.testing.assert_allclose(out, np.maximum(x @ w, 0), rtol=1e-6)


@pytest.mark.parametrize("x_shape", [(5, 24), (2, 3, 24), (24,)])
def test_dense_linear_form_matches_tvm_cpu_build(x_shape):
    """matmul(x, permute_dims(w)): the NPU reads the transposed weight through strides."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(x_shape, "float32"))
    w = relax.Var("w", relax.TensorType((40, 24), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.matmul(x, relax.op.permute_dims(w)))
        bb.emit_func_output(out)
    mod = bb.get()
    offloaded = example_npu.partition_for_npu(mod)
    assert external_symbols(offloaded), "nothing was offloaded"
    rng = np.random.default_rng(5)
    inputs = [rng.uniform(-1, 1, s).astype("float32") for s in (x_shape, (40, 24))]
    np.testing.assert_allclose(run(offloaded, inputs), run(mod, inputs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", [relax.op.nn.max_pool2d, relax.op.nn.avg_pool2d])
def test_pool_window_that_fits_nowhere_stays_on_cpu_and_matches(op):
    """Relax infers an empty (1, 2, 3, 0) result; TVM builds it, so partitioning must not raise."""
    from example_npu.partition.report import partition_with_report

    x = relax.Var("x", relax.TensorType((1, 2, 3, 2), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(op(x, pool_size=(1, 2), dilation=(1, 2)))
        bb.emit_func_output(out)
    model = bb.get()
    mod, report = partition_with_report(model)
    assert external_symbols(mod) == []
    assert "does not fit the padded input" in report.cpu_reason(f"relax.nn.{op.__name__}")
    inputs = random_inputs(model, seed=9)
    assert run(mod, inputs).shape == run(model, inputs).shape == (1, 2, 3, 0)


@pytest.mark.parametrize("op", ["relu", "relu6", "max_pool2d"])
def test_nan_and_inf_propagate_as_in_tvms_llvm_build(op):
    """TVM's max / min ignore NaN (relu(NaN) = 0, clip(NaN, 0, 6) = 6); the NPU matches it."""
    build = {
        "relu": relax.op.nn.relu,
        "relu6": lambda x: relax.op.clip(x, 0, 6),
        "max_pool2d": lambda x: relax.op.nn.max_pool2d(
            relax.op.reshape(x, (1, 1, 2, 4)), (2, 2), (2, 2)
        ),
    }[op]
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((8,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(build(x))
        bb.emit_func_output(out)
    mod = bb.get()
    data = np.array([np.nan, -1, 2, 7, -np.nan, np.inf, -np.inf, 0.5], "float32")
    offloaded = example_npu.partition_for_npu(mod)
    assert "call_dps_packed" in offloaded["main"].script()
    results = []
    for m in (mod, offloaded):
        vm = relax.VirtualMachine(tvm.compile(m, target="llvm"), tvm.cpu())
        results.append(vm["main"](tvm.runtime.tensor(data)).numpy())
    np.testing.assert_array_equal(results[1], results[0])


def test_grouped_conv_whose_group_exceeds_l1_runs_on_the_npu():
    """wav2vec2's positional convolution (768 channels in 16 groups, 128 taps, padding 64): one
    group's weights (1.2 MB) are larger than L1, so tiles hold part of a group. It used to stop
    partitioning with "the smallest tile does not fit L1"."""
    x = relax.Var("x", relax.TensorType((1, 768, 49), "float32"))
    weight = np.random.default_rng(0).normal(0, 0.02, (768, 48, 128)).astype("float32")
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv1d(x, relax.const(weight), padding=64, groups=16))
            out = bb.emit_output(relax.op.nn.gelu(y))
        bb.emit_func_output(out)
    mod = bb.get()
    offloaded = example_npu.partition_for_npu(mod)
    assert len(external_symbols(offloaded)) == 1
    data = [np.random.default_rng(1).normal(size=(1, 768, 49)).astype("float32")]
    np.testing.assert_allclose(run(offloaded, data), run(mod, data), rtol=1e-4, atol=1e-4)
