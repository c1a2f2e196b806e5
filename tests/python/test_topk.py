"""topk on the NPU (kernels/topk.cc) against TVM's CPU build, bit for bit: values and int32 /
int64 indices, largest and smallest, every axis, k from 2 to the whole axis, rows full of ties
(TVM's contrib sort orders equal values by the lower index, for largest and smallest alike)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from example_npu import NPUConfig
from example_npu.analysis.estimate import estimate
from example_npu.frontend.canonicalize import canonicalize
from example_npu.partition.report import partition_with_report
from test_glue_ops import data, module, offloaded_and_compared, run
from tvm import relax

op = relax.op


def _ties(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Few distinct values (and signed zeros): most rows have ties at the k-th place."""
    x = data(shape, "float32", seed).round()
    x[x == 0] = np.float32(-0.0) * (np.arange(np.count_nonzero(x == 0)) % 2)
    return x


@pytest.mark.parametrize("ret_type", ["both", "values", "indices"])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize(
    ("shape", "axis", "k"),
    [((2, 10, 5), 1, 3), ((3, 40), -1, 5), ((2, 3, 4, 6), 0, 2), ((4, 7), -1, 7), ((1, 9), 1, 0)],
)
def test_topk_equals_tvm_with_ties(ret_type, largest, shape, axis, k):
    def body(bb, v):
        return op.topk(v["x"], k=k, axis=axis, ret_type=ret_type, largest=largest, dtype="int64")

    mod = module({"x": (shape, "float32")}, body)
    offloaded_and_compared(mod, [_ties(shape)])
    offloaded_and_compared(mod, [data(shape, "float32", seed=3)])


@pytest.mark.parametrize(
    ("shape", "k", "dtype"),
    [
        ((2, 40), 5, "float16"),
        ((1, 8400), 300, "float32"),
        ((3, 50, 2), 7, "int8"),
        ((2, 300), 20, "uint8"),
    ],
    ids=["float16", "yolov10-300-of-8400", "int8", "uint8"],
)
def test_topk_of_float16_8_bit_and_of_a_detector_sized_selection(shape, k, dtype):
    """8-bit rows (values exact on the float32 datapath) have ties everywhere."""

    def body(bb, v):
        return op.topk(v["x"], k=k, axis=1, largest=dtype != "uint8", dtype="int64")

    mod = module({"x": (shape, dtype)}, body)
    offloaded_and_compared(mod, [data(shape, dtype, seed=1).round()])


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_topk_inside_a_region_with_int32_indices(index_dtype):
    """relu -> topk -> scale of the values: one NPU function, the scale fused onto the values."""
    shape = (2, 10, 5)

    def body(bb, v):
        top = bb.emit(op.topk(op.nn.relu(v["x"]), k=3, axis=1, dtype=index_dtype))
        return relax.Tuple([op.multiply(top[0], relax.const(2.0)), top[1]])

    mod = module({"x": (shape, "float32")}, body)
    partitioned, report = partition_with_report(canonicalize(mod))
    assert not report.cpu_ops, report.table()
    assert report.npu_ops["relax.topk"] == 1, report.table()
    x = _ties(shape)
    for got, want in zip(run(partitioned, [x]), run(mod, [x]), strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_rows_longer_than_l1_stream_through_in_chunks():
    """RT-DETR's query selection: the 300 best of 8400 anchors x 80 classes flattened (2.7 MB
    per row, L1 holds 256 KB), with ties from rounding."""
    shape = (1, 8400 * 80)
    mod = module({"x": (shape, "float32")}, lambda bb, v: op.topk(v["x"], k=300, dtype="int64"))
    x = (data(shape, "float32", seed=2) * 64).round()
    offloaded_and_compared(mod, [x])


def test_topk_that_the_npu_cannot_hold_stays_on_the_cpu_with_its_reason():
    mod = module(
        {"x": ((2, 100_000), "float32")}, lambda bb, v: op.topk(v["x"], k=20_000, dtype="int64")
    )
    _, report = partition_with_report(mod)
    assert "k = 20000 results" in report.cpu_reason("relax.topk"), report.table()


def test_topk_cost_counts_its_selection_work_and_dma_bytes():
    """Vector work per row: a threshold compare per element plus a k-lane shift per expected
    entry of a random row (k (1 + ln(n / k)) entries), over the vector lanes; DRAM traffic is the
    rows read once (values and indices together too) plus the values (float32) and indices
    (int64) written."""
    rows, n = 8, 512

    def profile(k: int, ret_type: str):
        body = lambda bb, v: op.topk(v["x"], k=k, ret_type=ret_type, dtype="int64")  # noqa: E731
        return estimate(module({"x": ((rows, n), "float32")}, body))

    lanes = NPUConfig().vector_unit_width
    for k in (2, 8, 64):
        work = rows * (n + math.ceil(k * k * (1 + math.log(n / k))))
        cycles = profile(k, "values").busy_cycles["vector"]
        assert work / lanes <= cycles <= work / lanes + 8, (k, cycles, work / lanes)
    read = rows * n * 4
    assert profile(2, "values").bytes_moved["DRAM"] == read + rows * 2 * 4
    assert profile(2, "indices").bytes_moved["DRAM"] == read + rows * 2 * 8
    # Values and indices of one topk: one selection of rows read once.
    both = profile(2, "both")
    assert both.bytes_moved["DRAM"] == read + rows * 2 * (4 + 8)
    assert both.busy_cycles["vector"] < 1.2 * profile(2, "values").busy_cycles["vector"]


@pytest.mark.parametrize("path", ["torch", "onnx-dynamo", "onnx17"])
def test_torch_topk_and_onnx_topk_import_to_one_npu_function(path):
    """torch.topk (smallest, along a middle axis; values and indices both returned) through
    torch.export and ONNX TopK: one NPU function; equal to PyTorch / onnxruntime on distinct
    values, and to TVM's CPU build of the same import on ties."""
    import real_models
    import torch

    class Smallest(torch.nn.Module):
        def forward(self, x):
            values, indices = torch.topk(x.relu() * 2.0, 4, dim=1, largest=False)
            return values, indices

    shape = (2, 12, 5)
    distinct = np.random.default_rng(4).permutation(120).reshape(shape).astype("float32") + 1
    module = Smallest()
    if path == "torch":
        mod = real_models.import_torch(module, distinct)
        with torch.no_grad():
            want = [t.numpy() for t in module(torch.from_numpy(distinct))]
    else:
        opset = None if path == "onnx-dynamo" else 17
        onnx_bytes = real_models.export_onnx(module, distinct, opset)
        mod = real_models.import_onnx(onnx_bytes, shape)
        import onnxruntime

        session = onnxruntime.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
        want = session.run(None, {session.get_inputs()[0].name: distinct})
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops, report.table()
    assert len(report.npu_functions) == 1, report.table()
    for got, expected in zip(run(partitioned, [distinct]), want, strict=True):
        np.testing.assert_array_equal(got, expected)
    ties = _ties(shape)
    for got, expected in zip(run(partitioned, [ties]), run(mod, [ties]), strict=True):
        np.testing.assert_array_equal(got, expected)
