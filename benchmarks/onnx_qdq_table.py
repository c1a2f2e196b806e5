"""onnxruntime-quantized CNNs on the NPU: the numbers of docs/quantization/integer-inference.md.

For each model and quantization (onnxruntime's quantize_static, QDQ: int8 activations with
per-channel and per-tensor weights, uint8 activations with per-channel weights), the model is
imported with from_onnx and partitioned with partition_for_npu, and one row gives the NPU
functions, the ops left on the CPU, how many Conv / Gemm / MatMul became qnn ops, and the logits'
distance from onnxruntime's in output quantization steps (largest, and the fraction that differ
at all) and as relative L2 error; beside it, how often TVM's CPU build of the same QDQ graph
differs from onnxruntime.

Models: the six CNNs of tests/python/real_models.py (as tests/python/test_onnx_qdq_models.py
quantizes them) and benchmarks/bench_models.py's full-size ResNet-18 (224x224, random weights,
4 random calibration images).

    python benchmarks/onnx_qdq_table.py [--samples N] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))

import bench_models  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
from example_npu.partition.report import partition_with_report  # noqa: E402
from onnxruntime.quantization import QuantType  # noqa: E402
from spec_models import npu_ops  # noqa: E402
from test_onnx_qdq_models import CNNS, compare_with_onnxruntime, export_float, quantized  # noqa: E402
from tvm.relax.frontend.onnx import from_onnx  # noqa: E402

FULL_SIZE = "ResNet-18 224x224"
# (label, activation type (None: onnxruntime's default, int8), per-channel weights)
QUANTIZATIONS = (
    ("int8, per-channel", None, True),
    ("int8, per-tensor", None, False),
    ("uint8, per-channel", QuantType.QUInt8, True),
)


def export_full_size(directory: Path) -> str:
    path = str(directory / "resnet18_224.onnx")
    model = bench_models.randomized(bench_models.ResNet18())
    example = torch.zeros(1, 3, 224, 224)
    torch.onnx.export(model, (example,), path, dynamo=False, opset_version=17)
    return path


def row(name: str, float_path: str, label: str, activations, per_channel: bool, samples: int):
    calibration = 4 if name == FULL_SIZE else 8
    path = quantized(float_path, per_channel, activations, calibration_samples=calibration)
    model = onnx.load(path)
    mod = from_onnx(model, keep_params_in_input=False)
    offloaded, report = partition_with_report(mod)
    ops = Counter(npu_ops(offloaded))
    linear = sum(node.op_type in ("Conv", "Gemm", "MatMul") for node in model.graph.node)
    npu = compare_with_onnxruntime(path, offloaded, samples)
    cpu = compare_with_onnxruntime(path, mod, samples)
    return (
        f"| {name} | {label} | {len(report.npu_functions)} | {sum(report.cpu_ops.values())} "
        f"| {ops['qnn.conv2d'] + ops['qnn.matmul']} / {linear} | {npu.max_steps:.0f} "
        f"| {npu.fraction:.2%} | {npu.relative:.2%} | {cpu.fraction:.2%} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=16, help="random inputs per row")
    parser.add_argument("--only", default="", help="only models whose name contains this")
    args = parser.parse_args()
    print(f"{args.samples} random inputs per row; steps of the output's quantization scale")
    print(
        "| model | activations, weights | NPU functions | CPU ops | qnn / Conv+Gemm+MatMul "
        "| max steps from ORT | differ from ORT | relative L2 | TVM CPU differs from ORT |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for name in (*CNNS, FULL_SIZE):
            if args.only and args.only not in name:
                continue
            path = export_full_size(Path(tmp)) if name == FULL_SIZE else export_float(name, tmp)
            for label, activations, per_channel in QUANTIZATIONS:
                print(row(name, path, label, activations, per_channel, args.samples), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
