"""Run-time integer index arithmetic as exact float32 on the NPU (frontend/index_arith.py):
RoBERTa's position ids from the token ids, through torch.export and ONNX, against PyTorch /
onnxruntime; chains whose values could leave float32's whole numbers stay on the CPU, right."""

from __future__ import annotations

import contextlib
import io
import warnings

import example_npu
import numpy as np
import pytest
import torch
import tvm
from example_npu.frontend import from_exported_program
from example_npu.partition.report import partition_with_report
from torch import nn
from tvm import relax

PAD = 1
LENGTH = 40


class PaddedPositions(nn.Module):
    """RoBERTa's embeddings: position ids count the non-padding tokens (padding keeps PAD), the
    token types are gathered from an all-zero buffer by those positions."""

    def __init__(self, vocab: int = 100, dim: int = 16) -> None:
        super().__init__()
        self.words = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.positions = nn.Embedding(LENGTH + PAD + 1, dim, padding_idx=PAD)
        self.types = nn.Embedding(1, dim)
        self.register_buffer("token_type_ids", torch.zeros(1, LENGTH + PAD + 1, dtype=torch.long))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = ids.ne(PAD).int()
        positions = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + PAD
        types = torch.gather(self.token_type_ids.expand(ids.shape[0], -1), 1, positions)
        return self.words(ids) + self.positions(positions) + self.types(types)


class Positions(nn.Module):
    """The position ids alone (int64), scaled by `scale` (to push them past 2**24)."""

    def __init__(self, scale: int = 1, compared_with: int = PAD) -> None:
        super().__init__()
        self.scale, self.compared_with = scale, compared_with

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = ids.ne(self.compared_with).int()
        return (torch.cumsum(mask, dim=1) * mask).long() * self.scale + PAD


def _ids(rng: np.random.Generator, rows: int = 2, length: int = LENGTH) -> np.ndarray:
    ids = rng.integers(2, 100, size=(rows, length)).astype("int64")
    ids[0, -7:] = PAD  # right padding
    ids[1, [0, 5, 6]] = PAD  # padding anywhere
    return ids


def _torch_module(model: nn.Module, ids: np.ndarray) -> tvm.IRModule:
    with torch.no_grad():
        program = torch.export.export(model.eval(), (torch.from_numpy(ids),))
    return from_exported_program(program)


def _run(mod: tvm.IRModule, *inputs: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    out = vm["main"](*map(tvm.runtime.tensor, inputs))
    return (out if hasattr(out, "numpy") else out[0]).numpy()  # torch.export returns a tuple


def test_roberta_position_ids_run_whole_on_the_npu_through_torch_export():
    torch.manual_seed(0)
    model = PaddedPositions()
    ids = _ids(np.random.default_rng(0))
    partitioned, report = partition_with_report(_torch_module(model, ids))
    assert len(report.npu_functions) == 1 and not report.cpu_ops, report.table()
    for seed in range(3):
        ids = _ids(np.random.default_rng(seed))
        with torch.no_grad():
            expected = model(torch.from_numpy(ids)).numpy()
        np.testing.assert_allclose(_run(partitioned, ids), expected, rtol=1e-6, atol=1e-6)


def test_roberta_position_ids_run_whole_on_the_npu_through_onnx(tmp_path):
    onnxruntime = pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    model = PaddedPositions().eval()
    ids = _ids(np.random.default_rng(1))
    path = tmp_path / "positions.onnx"
    with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.from_numpy(ids),), path, dynamo=True, external_data=False)
    partitioned, report = partition_with_report(example_npu.load_model(path).mod)
    assert len(report.npu_functions) == 1 and not report.cpu_ops, report.table()
    session = onnxruntime.InferenceSession(str(path))
    expected = session.run(None, {session.get_inputs()[0].name: ids})[0]
    np.testing.assert_allclose(_run(partitioned, ids), expected, rtol=1e-6, atol=1e-6)


def test_ids_beyond_float32_whole_numbers_compare_exactly_with_a_small_constant():
    # float32 rounds 2**24 + 1 to 2**24 and 2**40 + 3 to 2**40: neither becomes PAD, so the
    # comparison with PAD keeps its answer and the positions are exact.
    ids = _ids(np.random.default_rng(2))
    ids[0, :4] = [2**24 + 1, 2**40 + 3, -(2**30) - 1, -1]
    mod = _torch_module(Positions(), ids)
    partitioned, report = partition_with_report(mod)
    assert len(report.npu_functions) == 1 and not report.cpu_ops, report.table()
    expected = Positions()(torch.from_numpy(ids)).numpy()
    actual = _run(partitioned, ids)
    assert actual.dtype == _run(mod, ids).dtype  # int32: TVM's import of torch's int cumsum
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize(
    "model",
    [
        Positions(scale=600_000),  # up to 40 * 600,000 > 2**24: not whole in float32
        Positions(compared_with=2**24),  # 2**24 + 1 would round onto the constant
    ],
    ids=["product past 2**24", "constant at 2**24"],
)
def test_arithmetic_that_could_leave_float32_whole_numbers_stays_on_the_cpu(model):
    ids = _ids(np.random.default_rng(3))
    ids[0, :3] = [2**24 + 1, 2**24, 2**24 - 1]
    mod = _torch_module(model, ids)
    partitioned, report = partition_with_report(mod)
    assert report.cpu_ops, report.table()  # the integer chain is not made float
    expected = model(torch.from_numpy(ids)).numpy()
    np.testing.assert_array_equal(_run(partitioned, ids), expected)
