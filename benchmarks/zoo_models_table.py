"""Full-size torchvision architectures and user variants through every import path: the table of
docs/supported-models.md ("At full size") and docs/reference/zoo_models.md.

    .venv/bin/python benchmarks/zoo_models_table.py [--only NAME ...] [--paths torch onnx ...]

Models: tests/python/zoo_models.py (FULL_SIZE; random weights, eval mode). Paths: torch.export,
the dynamo ONNX exporter ("onnx") and the legacy exporter at an opset ("onnx13", "onnx14",
"onnx17"). Per model and path: NPU functions, ops on the NPU / CPU (each CPU op with the
report's reason), NPU cycles (timing model, default NPUConfig), max |NPU - reference| (PyTorch or
onnxruntime), and wall times of import (export + frontend), partition (partition_for_npu, which
runs the C++ NPU compiler) + tvm.compile, and one run of the emulated NPU. Wall times depend on
the machine's load; cycles do not.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))

import example_npu  # noqa: E402
import tvm  # noqa: E402
import zoo_models  # noqa: E402
from example_npu.partition.report import partition_with_report  # noqa: E402
from tvm import relax  # noqa: E402

HEADER = (
    "| model | input | path | NPU functions | ops NPU / CPU | cycles | max abs diff "
    "| import s | partition + compile s | run s |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
)


def measure(model: zoo_models.ZooModel, path: str) -> tuple[str, list[str]]:
    """The table row of one model and path, and the CPU ops with their reasons."""
    shape = "x".join(map(str, model.input_shape))
    start = time.perf_counter()
    try:
        mod, data, reference = zoo_models.import_model(model, path)
    except Exception as err:  # noqa: BLE001  # an exporter refusing the model is a table entry
        reason = str(err).strip().splitlines()[0][:120]
        return f"| {model.name} | {shape} | {path} | export failed: {reason} ||||||", []
    imported = time.perf_counter()
    partitioned, report = partition_with_report(mod)
    executable = tvm.compile(partitioned, target="llvm")
    compiled = time.perf_counter()
    out = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(data))
    ran = time.perf_counter()
    out = out.numpy() if hasattr(out, "numpy") else out[0].numpy()
    cycles = example_npu.profile(executable, tvm.runtime.tensor(data)).total_cycles
    error = float(np.max(np.abs(out - reference)))
    npu, cpu = sum(report.npu_ops.values()), sum(report.cpu_ops.values())
    row = (
        f"| {model.name} | {shape} | {path} | {len(report.npu_functions)} | {npu} / {cpu} "
        f"| {cycles:,} | {error:.1e} | {imported - start:.1f} | {compiled - imported:.1f} "
        f"| {ran - compiled:.1f} |"
    )
    reasons = [f"{op} x{n}: {report.cpu_reason(op)}" for op, n in sorted(report.cpu_ops.items())]
    return row, reasons


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="model names (default: all)")
    parser.add_argument("--paths", nargs="*", help="import paths (default: each model's own)")
    args = parser.parse_args(argv)
    print(HEADER)
    notes = []
    for model in zoo_models.FULL_SIZE:
        if args.only and model.name not in args.only:
            continue
        for path in model.paths:
            if args.paths and path not in args.paths:
                continue
            row, reasons = measure(model, path)
            print(row, flush=True)
            notes += [f"{model.name} ({path}) CPU: {reason}" for reason in reasons]
    for note in notes:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
