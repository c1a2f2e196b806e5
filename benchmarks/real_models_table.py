"""Prints the test-size table of docs/supported-models.md: each model of
tests/python/real_models.py through both import paths, partitioned for the NPU, profiled, and
compared with its reference.

    .venv/bin/python benchmarks/real_models_table.py [--only NAME ...]

Columns (torch.export path / ONNX path): NPU functions, Relax ops on the NPU and on the CPU,
NPU groups (tile loops) and cycles from the profile, max |NPU - reference| (PyTorch for the
torch path, onnxruntime for the ONNX path). Cycles come from the timing model, not the clock,
so the table does not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))

import example_npu  # noqa: E402
import real_models  # noqa: E402
import tvm  # noqa: E402
from example_npu.partition.report import partition_with_report  # noqa: E402
from tvm import relax  # noqa: E402

HEADER = (
    "| model | input | NPU functions | ops NPU | ops CPU | NPU groups | cycles | max abs diff |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- |"
)


def measure(model: real_models.RealModel, path: str) -> tuple:
    module, data = real_models.instantiate(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if path == "torch":
            mod = real_models.import_torch(module, data)
            reference = real_models.torch_reference(module, data)
        else:
            onnx_bytes = real_models.export_onnx(module, data)
            mod = real_models.import_onnx(onnx_bytes, model.input_shape)
            reference = real_models.onnxruntime_reference(onnx_bytes, data)
    partitioned, report = partition_with_report(mod)
    executable = tvm.compile(partitioned, target="llvm")
    out = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(data))
    out = out.numpy() if hasattr(out, "numpy") else out[0].numpy()
    profile = example_npu.profile(executable, tvm.runtime.tensor(data))
    return (
        len(report.npu_functions),
        sum(report.npu_ops.values()),
        sum(report.cpu_ops.values()),
        len(profile.nodes),
        profile.total_cycles,
        float(np.max(np.abs(out - reference))),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="model names (default: all)")
    args = parser.parse_args(argv)
    print(HEADER)
    for model in real_models.MODELS:
        if args.only and model.name not in args.only:
            continue
        torch_cells, onnx_cells = measure(model, "torch"), measure(model, "onnx")
        cells = [f"{t} / {o}" for t, o in zip(torch_cells[:5], onnx_cells[:5], strict=True)]
        cells.append(f"{torch_cells[5]:.1e} / {onnx_cells[5]:.1e}")
        shape = "x".join(map(str, model.input_shape))
        print(f"| {model.name} | {shape} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
