"""torchvision's architectures (zoo_models.py, shrunk) and the variants users bring, through the
import paths whose idioms they exercise: torch.export, the dynamo ONNX exporter and the legacy
(TorchScript) exporter at opsets 13, 14 and 17.

Each must run whole on the NPU (one NPU function per CNN, at most three per transformer, no op
left on the CPU) and match PyTorch / onnxruntime within 1e-4. The full-size networks are
measured by benchmarks/zoo_models_table.py. Regressions guarded here: the legacy exporter's
``chunk`` (Slice bounds from Shape: dynamic_strided_slice), its decomposed LayerNorm (Pow, Sqrt)
and erf GELU, its attention scale (Sqrt of a (1,) constant), the dynamo exporter's
``as_strided`` (a Gather with a constant index tensor), and batched Linear layers over a
sequence (one taller matmul on the NPU).
"""

from __future__ import annotations

import time
from typing import Any

import example_npu  # noqa: F401  # registers patterns, codegen and runtime
import numpy as np
import pytest
import tvm
import zoo_models
from example_npu.partition.report import partition_with_report
from tvm import relax

TOLERANCE = 1e-4
CASES = [(model.name, path) for model in zoo_models.SMALL for path in model.paths]


def run(mod: tvm.IRModule, data: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(data))
    return out.numpy() if hasattr(out, "numpy") else out[0].numpy()


def run_whole_on_the_npu(model: zoo_models.ZooModel, path: str) -> tuple[Any, float, str]:
    """Imports ``model`` by ``path``, asserts it runs whole on the NPU (no CPU op, at most
    ``model.max_npu_functions`` NPU functions) within TOLERANCE of the reference; returns the
    partition report, the max difference and a summary of both."""
    start = time.perf_counter()
    mod, data, reference = zoo_models.import_model(model, path)
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops, f"ops left on the CPU:\n{report.table()}"
    assert 1 <= len(report.npu_functions) <= model.max_npu_functions, report.table()
    out = run(partitioned, data)
    assert out.shape == reference.shape
    error = float(np.max(np.abs(out - reference)))
    assert error <= TOLERANCE, f"max |NPU - {path} reference| = {error:.3g}"
    summary = (
        f"{model.name} ({path}, {'x'.join(map(str, model.input_shape))}): "
        f"{len(report.npu_functions)} NPU function(s), {sum(report.npu_ops.values())} ops, "
        f"max |diff| {error:.2g} [{time.perf_counter() - start:.1f} s]"
    )
    return report, error, summary


@pytest.mark.parametrize("name, path", CASES, ids=[f"{name}-{path}" for name, path in CASES])
def test_zoo_model_runs_whole_on_the_npu(name, path, summary_line):
    report, _, summary = run_whole_on_the_npu(zoo_models.SMALL_BY_NAME[name], path)
    assert report.npu_ops["relax.matmul"] + report.npu_ops["relax.nn.conv2d"] > 0
    summary_line(f"zoo model {summary}")


def _segmentation_decoder():
    """A segmentation-style CNN: nearest upsampling, a transposed conv, skip concat, reflect
    padding and an int64 argmax at the end."""
    import torch
    from torch import nn

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encode = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.ReLU())
            self.up = nn.ConvTranspose2d(8, 8, 2, 2)
            self.head = nn.Conv2d(16, 5, 3)

        def forward(self, x):
            y = self.encode(x)
            skip = nn.functional.interpolate(y, scale_factor=2.0, mode="nearest")
            y = torch.cat([self.up(y), skip], 1)
            y = self.head(nn.functional.pad(y, (1, 1, 1, 1), mode="reflect"))
            return y.mean((2, 3)).argmax(-1)

    return Decoder()


@pytest.mark.parametrize("path", [zoo_models.TORCH, zoo_models.ONNX_DYNAMO])
def test_a_segmentation_decoder_runs_whole_on_the_npu(path):
    """torch.export's reflect padding is a constant-index take, the ONNX importer's is a
    ``call_tir(mirror_pad)`` that canonicalization turns into ``nn.pad``: either way the whole
    model is one NPU call, bit-exact."""
    model = zoo_models.ZooModel("decoder", _segmentation_decoder, (1, 3, 16, 16), 4, (path,))
    mod, data, reference = zoo_models.import_model(model, path)
    partitioned, report = partition_with_report(mod)
    for op in ("relax.image.resize2d", "relax.nn.conv2d_transpose", "relax.argmax"):
        assert report.npu_ops[op] == 1, report.table()
    assert not report.cpu_ops and len(report.npu_functions) == 1, report.table()
    np.testing.assert_array_equal(run(partitioned, data), reference)
