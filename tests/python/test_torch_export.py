"""torch.export programs with transformers' key / value cache: the empty 1-D tensor the cache
starts from, concatenated with each step's keys, is what PyTorch's cat skips and TVM's importer
refuses; our from_exported_program (and load_model for .pt2 files) drops it. And PyTorch's
nearest upsampling, which TVM's importer lowers as nearest-exact."""

from __future__ import annotations

import warnings

import example_npu  # noqa: F401  # registers patterns, codegen and runtime
import numpy as np
import pytest
import tvm
from example_npu.frontend import from_exported_program, load_model
from example_npu.partition.report import partition_with_report
from tvm import relax

torch = pytest.importorskip("torch")

LENGTH, HEADS, HEAD = 6, 2, 8


class CachedAttention(torch.nn.Module):
    """One attention step appending its keys and values to a cache started as transformers'
    DynamicLayer starts it (``torch.tensor([])``); returns the output and the cached keys."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(HEADS * HEAD, 3 * HEADS * HEAD)

    def forward(self, x):
        keys = torch.tensor([], dtype=x.dtype)
        values = torch.tensor([], dtype=x.dtype)
        q, k, v = self.qkv(x).reshape(1, LENGTH, 3, HEADS, HEAD).permute(2, 0, 3, 1, 4)
        keys = torch.cat([keys, k], dim=-2)
        values = torch.cat([values, v], dim=-2)
        probs = torch.softmax(q @ keys.transpose(-1, -2) / HEAD**0.5, dim=-1)
        return probs @ values, keys


def _exported(x: np.ndarray):
    torch.manual_seed(0)
    module = CachedAttention().eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = [t.numpy() for t in module(torch.from_numpy(x))]
        program = torch.export.export(module, (torch.from_numpy(x),))
    return program, reference


def _run(mod: tvm.IRModule, x: np.ndarray) -> list[np.ndarray]:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return [t.numpy() for t in vm["main"](tvm.runtime.tensor(x))]


def _input() -> np.ndarray:
    return np.random.default_rng(1).standard_normal((1, LENGTH, HEADS * HEAD)).astype("float32")


def test_tvm_refuses_the_empty_cache_and_ours_drops_it():
    x = _input()
    program, reference = _exported(x)
    from tvm.relax.frontend.torch import from_exported_program as tvm_import

    with pytest.raises(Exception, match="Concat expects all input tensors to have same ndim"):
        tvm_import(program)
    mod = from_exported_program(program)
    partitioned, report = partition_with_report(mod)
    assert len(report.npu_functions) == 1 and not report.cpu_ops, report.table()
    for actual, expected in zip(_run(partitioned, x), reference, strict=True):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


def test_a_pt2_file_with_the_empty_cache_loads(tmp_path):
    x = _input()
    program, reference = _exported(x)
    path = tmp_path / "cached_attention.pt2"
    torch.export.save(program, path)
    loaded = load_model(path)
    outputs = _run(loaded.mod, x)
    np.testing.assert_allclose(outputs[0], reference[0], rtol=1e-5, atol=1e-6)


def test_the_users_program_is_left_as_it_was():
    x = _input()
    program, reference = _exported(x)
    code_before = program.graph_module.code
    from_exported_program(program)
    assert program.graph_module.code == code_before
    from tvm.relax.frontend.torch import from_exported_program as tvm_import

    with pytest.raises(Exception, match="Concat expects all input tensors to have same ndim"):
        tvm_import(program)  # still the program PyTorch exported, empty cache operand and all
    outputs = program.module()(torch.from_numpy(x))
    for actual, expected in zip(outputs, reference, strict=True):
        np.testing.assert_allclose(actual.detach().numpy(), expected, rtol=1e-6, atol=1e-7)


class Nearest(torch.nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.options = options

    def forward(self, x):
        return torch.nn.functional.interpolate(x, mode="nearest", **self.options)


@pytest.mark.parametrize(
    "options",
    [
        {"size": (9, 14)},
        {"size": (20, 21)},
        {"scale_factor": 2.0},
        {"scale_factor": (3.0, 2.0)},
        {"scale_factor": 2.3},
        {"scale_factor": (1.7, 0.6)},
    ],
)
def test_nearest_upsampling_picks_what_pytorch_picks(options):
    """A decoder resized to a skip connection's odd size (TVM's importer used half-pixel
    coordinates rounded to nearest: rows and columns one off), YOLO's integer upsampling and
    factors whose 1 / s steps pick other rows than in / out (2.3: 11 -> 25 rows, 15 -> 34
    columns); on the NPU, element for element PyTorch's."""
    x = np.arange(2 * 11 * 15, dtype="float32").reshape(1, 2, 11, 15)
    module = Nearest(**options)
    reference = module(torch.from_numpy(x)).numpy()
    program = torch.export.export(module, (torch.from_numpy(x),))
    mod, report = partition_with_report(from_exported_program(program))
    assert len(report.npu_functions) == 1 and not report.cpu_ops, report.table()
    np.testing.assert_array_equal(_run(mod, x)[0], reference)
