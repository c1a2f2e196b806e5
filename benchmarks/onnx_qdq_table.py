"""onnxruntime-quantized CNNs on the NPU: the "Quantized inference" numbers of the README.

For each model and quantization (onnxruntime's quantize_static, QDQ: int8 activations with
per-channel and per-tensor weights, uint8 activations with per-channel weights), the model is
imported with from_onnx and partitioned with partition_for_npu, and one row gives the NPU
functions, the ops left on the CPU, how many Conv / Gemm / MatMul became qnn ops, and the logits'
distance from onnxruntime's in output quantization steps (largest, and the fraction that differ
at all) and as relative L2 error; beside it, how often TVM's CPU build of the same QDQ graph
differs from onnxruntime.

Models: the six test-size CNNs of tests/python/cnn_blocks.py and benchmarks/bench_models.py's
full-size ResNet-18 (224x224, random weights, 4 random calibration images).

    python benchmarks/onnx_qdq_table.py [--samples N] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))

import bench_models  # noqa: E402
import cnn_blocks  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import tvm  # noqa: E402
from example_npu.report import partition_with_report  # noqa: E402
from onnxruntime.quantization import (  # noqa: E402
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_static,
)
from spec_models import npu_ops  # noqa: E402
from test_onnx_qdq_models import output_scale  # noqa: E402
from tvm import relax  # noqa: E402
from tvm.relax.frontend.onnx import from_onnx  # noqa: E402

QUANTIZATIONS = (
    ("int8, per-channel", QuantType.QInt8, True),
    ("int8, per-tensor", QuantType.QInt8, False),
    ("uint8, per-channel", QuantType.QUInt8, True),
)


FULL_SIZE = "ResNet-18 224x224"


class Calibration(CalibrationDataReader):
    """Random inputs: 8 for the test-size models (as the tests), 4 at full size (as
    bench_models)."""

    def __init__(self, name: str, shape: tuple[int, ...]):
        rng = np.random.default_rng(1)
        count = 4 if shape[-1] > 64 else 8
        self.batches = iter(
            [{name: rng.standard_normal(shape).astype("float32")} for _ in range(count)]
        )

    def get_next(self):
        return next(self.batches, None)


def export_model(name: str, directory: Path) -> tuple[Path, tuple[int, ...]]:
    """The float ONNX file of `name` and its input shape."""
    path = directory / f"{name.replace(' ', '_')}.onnx"
    if name == FULL_SIZE:
        shape = (1, 3, 224, 224)
        model = bench_models.randomized(bench_models.ResNet18())
        torch.onnx.export(model, (torch.zeros(shape),), str(path), dynamo=False, opset_version=17)
        return path, shape
    cnn_blocks.export_onnx(cnn_blocks.build(name), str(path))
    return path, cnn_blocks.INPUT_SHAPE


def row(
    name: str, float_path: Path, shape, label: str, activations, per_channel: bool, samples: int
) -> str:
    input_name = onnx.load(str(float_path)).graph.input[0].name
    path = float_path.with_name(f"{float_path.stem}_{activations.name}_{int(per_channel)}.onnx")
    quantize_static(
        str(float_path),
        str(path),
        Calibration(input_name, shape),
        quant_format=QuantFormat.QDQ,
        per_channel=per_channel,
        activation_type=activations,
        weight_type=QuantType.QInt8,
    )
    model = onnx.load(str(path))
    mod = from_onnx(model, keep_params_in_input=False)
    offloaded, report = partition_with_report(mod)
    ops = Counter(npu_ops(offloaded))
    linear = sum(node.op_type in ("Conv", "Gemm", "MatMul") for node in model.graph.node)
    session = bench_models.ort_session(path)
    npu, cpu = (
        relax.VirtualMachine(tvm.compile(m, "llvm"), tvm.cpu())["main"] for m in (offloaded, mod)
    )
    step = output_scale(model)
    rng = np.random.default_rng(7)
    npu_steps, cpu_steps, relative = [], [], []
    for _ in range(samples):
        x = rng.standard_normal(shape).astype("float32")
        want = session.run(None, {input_name: x})[0].astype(np.float64)
        got = npu(tvm.runtime.tensor(x)).numpy()
        npu_steps.append(np.abs(got - want).ravel() / step)
        cpu_steps.append(np.abs(cpu(tvm.runtime.tensor(x)).numpy() - want).ravel() / step)
        relative.append(np.linalg.norm(got - want) / np.linalg.norm(want))
    npu_all, cpu_all = np.concatenate(npu_steps), np.concatenate(cpu_steps)
    return (
        f"| {name} | {label} | {len(report.npu_functions)} | {sum(report.cpu_ops.values())} "
        f"| {ops['qnn.conv2d'] + ops['qnn.matmul']} / {linear} | {npu_all.max():.0f} "
        f"| {np.mean(npu_all > 0.5):.2%} | {np.mean(relative):.2%} "
        f"| {np.mean(cpu_all > 0.5):.2%} |"
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
        for name in (*cnn_blocks.MODELS, FULL_SIZE):
            if args.only and args.only not in name:
                continue
            path, shape = export_model(name, Path(tmp))
            for label, activations, per_channel in QUANTIZATIONS:
                print(row(name, path, shape, label, activations, per_channel, args.samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
