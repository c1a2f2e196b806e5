"""Transformer architectures as Hugging Face writes them (transformer_models.py, random weights)
through torch.export + from_exported_program (against PyTorch) and the dynamo ONNX exporter +
from_onnx (against onnxruntime): they build (decoder-only models included: their bool cumsum is
legalized), partition into one NPU function, and match the reference."""

from __future__ import annotations

import time
import warnings

import example_npu  # noqa: F401  # registers patterns, codegen and runtime
import numpy as np
import pytest
import transformer_models
import tvm
from example_npu.partition.report import partition_with_report
from tvm import relax

RELATIVE_TOLERANCE = 1e-4
# What still runs on the CPU: the embedding gather with run-time ids and the ids' casts; the ONNX
# importer adds Gather's negative-index fix-up (where(less(i, 0), i + n, i)) on the ids.
EMBEDDING_OPS = {"relax.take", "relax.astype", "relax.reshape", "relax.expand_dims"}
ONNX_EMBEDDING_OPS = EMBEDDING_OPS | {"relax.where", "relax.less", "relax.add"}
CPU_OPS_ALLOWED = {
    ("bert", "torch"): EMBEDDING_OPS,
    ("gpt2", "torch"): EMBEDDING_OPS,
    ("bert", "onnx"): ONNX_EMBEDDING_OPS,
    ("gpt2", "onnx"): ONNX_EMBEDDING_OPS,
}


def _run(mod: tvm.IRModule, data: list[np.ndarray]) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    out = vm["main"](*(tvm.runtime.tensor(d) for d in data))
    return out.numpy() if hasattr(out, "numpy") else out[0].numpy()


def _import(model: transformer_models.TransformerModel, path: str):
    """The model's Relax module, its inputs and the reference output (PyTorch / onnxruntime)."""
    module, data = transformer_models.instantiate(model)
    names = [name for name, _, _ in model.inputs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.export / onnxscript deprecation chatter
        if path == "torch":
            mod = transformer_models.import_torch(module, data)
            return mod, data, transformer_models.torch_reference(module, data)
        onnx_bytes = transformer_models.export_onnx(module, data, names)
    reference = transformer_models.onnxruntime_reference(onnx_bytes, names, data)
    return transformer_models.import_onnx(onnx_bytes, names, data), data, reference


@pytest.mark.parametrize("path", ["torch", "onnx"])
@pytest.mark.parametrize("name", [model.name for model in transformer_models.MODELS])
def test_transformer_runs_on_the_npu_and_matches_the_reference(name, path, summary_line):
    start = time.perf_counter()
    mod, data, reference = _import(transformer_models.MODELS_BY_NAME[name], path)
    partitioned, report = partition_with_report(mod)
    assert len(report.npu_functions) == 1, report.table()
    assert set(report.cpu_ops) <= CPU_OPS_ALLOWED.get((name, path), set()), report.table()
    for op in ("matmul", "nn.softmax"):
        assert report.npu_ops[f"relax.{op}"] > 0, report.table()
    out = _run(partitioned, data)
    assert out.shape == reference.shape
    relative = float(np.max(np.abs(out - reference)) / np.max(np.abs(reference)))
    assert relative <= RELATIVE_TOLERANCE, f"relative difference from {path}: {relative:.3g}"
    summary_line(
        f"transformer {name} ({path}): {len(report.npu_functions)} NPU function(s), "
        f"{sum(report.cpu_ops.values())} ops on the CPU, max rel diff {relative:.2g} "
        f"[{time.perf_counter() - start:.1f} s]"
    )
