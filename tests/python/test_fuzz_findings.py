"""Issue 17's wrong results, through partition_for_npu and against TVM's CPU build.

An independent fuzzer found Relax programs whose offloaded result differed from what TVM's LLVM
build computes for the same module: each is rebuilt here in Relax, partitioned, run, and
compared with the unpartitioned module compiled for the CPU. (Crashes and bad errors found by
the same fuzzer are replayed from tests/fuzz/regressions by test_fuzz_regressions.py.)
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from example_npu import partition_for_npu
from spec_models import external_symbols
from tvm import relax

R = relax.op


def module(fn, *specs: tuple[tuple[int, ...], str]) -> tvm.IRModule:
    bb = relax.BlockBuilder()
    params = [relax.Var(f"p{i}", relax.TensorType(s, d)) for i, (s, d) in enumerate(specs)]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(fn(bb, *params))
        bb.emit_func_output(out)
    return bb.get()


def run(mod: tvm.IRModule, arrays: list[np.ndarray]) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return vm["main"](*[tvm.runtime.tensor(a) for a in arrays]).numpy()


def offloaded_and_cpu(mod: tvm.IRModule, arrays: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    partitioned = partition_for_npu(mod)
    assert external_symbols(partitioned), "nothing was offloaded: the case tests nothing"
    return run(partitioned, arrays), run(mod, arrays)


def test_matmul_of_a_constant_and_a_sliced_input():
    """The rhs, a slice of the input, was staged in an L2 area sized by the slice while the
    staging copied the whole input: right numbers, and a heap overflow (ASan) that crashed the
    process later ("double free or corruption")."""
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((64, 1)).astype("float32")

    def build(bb, x):
        sliced = bb.emit(R.strided_slice(x, axes=[1], begin=[16], end=[22]))
        return R.matmul(relax.const(weight), sliced)

    x = rng.standard_normal((1, 32)).astype("float32")
    npu, cpu = offloaded_and_cpu(module(build, ((1, 32), "float32")), [x])
    np.testing.assert_allclose(npu, cpu, rtol=1e-6, atol=1e-6)


def _batch_norm_inputs(rng, channels: int) -> list[np.ndarray]:
    gamma, beta, mean = (rng.standard_normal(channels).astype("float32") for _ in range(3))
    return [gamma, beta, mean, rng.uniform(0.5, 2.0, channels).astype("float32")]


@pytest.mark.parametrize(
    "layout, axis", [("NCW", 1), ("NCW", 2), ("NWC", 0), ("NWC", 1), ("NWC", 2)]
)
def test_batch_norm_after_conv1d_along_any_axis(layout, axis):
    """A batch_norm fused after a conv1d read its parameters along the tile dim its axis had in
    the conv1d's 3-D output, not in the conv's 4-D tile: every axis but NCW's channels was wrong
    (max diff 11, once 2.5e29)."""
    rng = np.random.default_rng(axis)
    x_shape = (2, 9, 5) if layout == "NWC" else (2, 5, 9)
    w_shape = (3, 5, 6) if layout == "NWC" else (6, 5, 3)
    out_shape = (2, 7, 6) if layout == "NWC" else (2, 6, 7)
    kernel_layout = "WIO" if layout == "NWC" else "OIW"
    channels = out_shape[axis]

    def build(bb, x, w, gamma, beta, mean, var):
        y = bb.emit(R.nn.conv1d(x, w, data_layout=layout, kernel_layout=kernel_layout))
        norm = bb.emit(R.nn.batch_norm(y, gamma, beta, mean, var, axis=axis, training=False))
        return relax.TupleGetItem(norm, 0)

    params = [((channels,), "float32")] * 4
    mod = module(build, (x_shape, "float32"), (w_shape, "float32"), *params)
    arrays = [rng.standard_normal(x_shape).astype("float32")]
    arrays += [rng.standard_normal(w_shape).astype("float32"), *_batch_norm_inputs(rng, channels)]
    npu, cpu = offloaded_and_cpu(mod, arrays)
    np.testing.assert_allclose(npu, cpu, rtol=1e-5, atol=1e-5)


def test_batch_norm_after_a_matmul_whose_batch_merges_into_rows():
    """matmul -> matmul by a constant [1, 3] -> batch_norm(axis=1) of [2, 1, 3] -> mean: six
    fresh modules gave -0.48, NaN or inf (the fused batch_norm read past its one-element
    parameters); numpy gives -0.94."""
    rng = np.random.default_rng(3)
    w1 = rng.standard_normal((4, 1)).astype("float32")
    w2 = rng.standard_normal((1, 3)).astype("float32")

    def build(bb, x, gamma, beta, mean, var):
        y = bb.emit(R.matmul(bb.emit(R.matmul(x, relax.const(w1))), relax.const(w2)))
        norm = bb.emit(R.nn.batch_norm(y, gamma, beta, mean, var, axis=1, training=False))
        return R.mean(bb.emit(relax.TupleGetItem(norm, 0)))

    mod = module(build, ((2, 1, 4), "float32"), *[((1,), "float32")] * 4)
    arrays = [rng.standard_normal((2, 1, 4)).astype("float32"), *_batch_norm_inputs(rng, 1)]
    expected = run(mod, arrays)
    for _ in range(3):  # fresh modules: the defect read whatever memory followed the parameters
        npu, _ = offloaded_and_cpu(mod, arrays)
        np.testing.assert_allclose(npu, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_max_pool_windows_in_the_padding_or_of_minus_inf_give_tvms_value(dtype, layout):
    """TVM pads max pooling with the dtype's lowest value and starts its reduction there: a
    window wholly in the padding, or of -inf only, gives -65504 in float16 (the NPU gave -inf)
    and -3.4e38 in float32."""
    shape = (1, 2, 4, 4) if layout == "NCHW" else (1, 4, 4, 2)
    x = np.random.default_rng(7).standard_normal(shape).astype(dtype)
    x.reshape(-1)[::3] = -np.inf

    def build(bb, data):
        return R.nn.max_pool2d(data, (2, 2), strides=(2, 2), padding=(2, 2, 2, 2), layout=layout)

    npu, cpu = offloaded_and_cpu(module(build, (shape, dtype)), [x])
    lowest = np.finfo(dtype).min
    assert (cpu == lowest).any(), "no window in the padding: the case tests nothing"
    np.testing.assert_array_equal(npu, cpu)
