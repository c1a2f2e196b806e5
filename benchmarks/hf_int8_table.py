"""Prints the int8 Hugging Face table of docs/supported-models.md: ``transformers`` models
(5.x, not a dependency of the package or of CI: install it to run this) with random weights,
exported with ``torch.onnx.export`` (dynamo), quantized by onnxruntime's ``quantize_static``
(QDQ, per-channel int8 weights, int8 activations, calibrated on random token ids), loaded with
:func:`example_npu.load_model` and partitioned for the NPU.

For each model: NPU functions, ops left on the CPU, how many of the file's MatMul / Gemm nodes
run as integer NPU ops, how many outputs differ from TVM's CPU build of the same QDQ graph (the
contract: none) and the largest difference from onnxruntime (whose kernels round and fuse their
own way, so only the scale of the difference says something).

    .venv/bin/python benchmarks/hf_int8_table.py [--only NAME ...] [--samples N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import warnings
from pathlib import Path

import example_npu
import numpy as np
import onnx
import tvm
from example_npu.partition.report import partition_with_report
from hf_transformers_table import _models, _positional
from tvm import relax

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
from spec_models import npu_ops  # noqa: E402

HEADER = (
    "| model | NPU functions | ops on the CPU | integer MatMul / Gemm | outputs != TVM CPU "
    "| max diff from onnxruntime: NPU, TVM CPU |\n| --- | --- | --- | --- | --- | --- |"
)
# The NPU graph ops of an integer matrix product (after fusion with its requantization).
INTEGER_MATMULS = ("qnn.matmul", "qnn.dense")


class _Calibration:
    """onnxruntime's CalibrationDataReader protocol over random feeds of the model's inputs."""

    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self.feeds = iter(feeds)

    def get_next(self):
        return next(self.feeds, None)


def _random_feeds(session, example: list[np.ndarray], count: int) -> list[dict]:
    rng = np.random.default_rng(1)
    feeds = []
    for _ in range(count):
        feed = {}
        for graph_input, value in zip(session.get_inputs(), example, strict=True):
            if value.dtype.kind == "f":
                feed[graph_input.name] = rng.standard_normal(value.shape).astype(value.dtype)
            elif graph_input.name.endswith("mask"):
                feed[graph_input.name] = value  # the tokenizer mask of the example
            else:
                feed[graph_input.name] = rng.integers(0, 1000, value.shape).astype(value.dtype)
        feeds.append(feed)
    return feeds


def _integer_matmuls(mod: tvm.IRModule) -> int:
    return sum(op.startswith(INTEGER_MATMULS) for op in npu_ops(mod))


def measure(name: str, build, samples: int, keep: Path | None = None) -> str:
    import onnxruntime
    import torch
    from onnxruntime.quantization import QuantFormat, quantize_static

    torch.manual_seed(0)
    model, args, kwargs, _ = build()
    model.eval()
    wrapped = _positional(model, list(kwargs))
    inputs = (*args, *kwargs.values())
    example = [t.numpy() for t in inputs]
    with tempfile.TemporaryDirectory() as scratch:
        directory = keep or Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        float_path, int8_path = directory / "float.onnx", directory / "int8.onnx"
        with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(wrapped, inputs, float_path, dynamo=True, external_data=False)
        session = onnxruntime.InferenceSession(str(float_path))
        calibration = _Calibration(_random_feeds(session, example, samples))
        quantize_static(
            str(float_path), str(int8_path), calibration, quant_format=QuantFormat.QDQ,
            per_channel=True,
        )  # fmt: skip
        matmuls = sum(n.op_type in ("MatMul", "Gemm") for n in onnx.load(int8_path).graph.node)
        session = onnxruntime.InferenceSession(str(int8_path))
        feeds = dict(zip((i.name for i in session.get_inputs()), example, strict=True))
        if keep is not None:
            np.savez(directory / "feeds.npz", **feeds)
        reference = session.run(None, feeds)[0]
        mod = example_npu.load_model(int8_path).mod
    partitioned, report = partition_with_report(mod)
    tensors = [tvm.runtime.tensor(value) for value in example]
    outputs = []
    for module in (partitioned, mod):
        vm = relax.VirtualMachine(tvm.compile(module, target="llvm"), tvm.cpu())
        out = vm["main"](*tensors)
        outputs.append((out if hasattr(out, "numpy") else out[0]).numpy())
    npu, cpu = outputs
    from_ort = [float(np.max(np.abs(out - reference))) for out in outputs]
    differ = int(np.count_nonzero(npu != cpu))
    cpu_ops = sum(report.cpu_ops.values())
    cpu_text = str(cpu_ops) + (f" ({', '.join(sorted(report.cpu_ops))})" if cpu_ops else "")
    return (
        f"| {name} | {len(report.npu_functions)} | {cpu_text} | "
        f"{_integer_matmuls(partitioned)} of {matmuls} | {differ} of {npu.size} | "
        f"{from_ort[0]:.3g}, {from_ort[1]:.3g} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=["BERT-base"], help="model names")
    parser.add_argument("--samples", type=int, default=3, help="calibration inputs")
    parser.add_argument("--keep", type=Path, help="keep the ONNX files and feeds here, per model")
    options = parser.parse_args()
    print(HEADER)
    for name, build in _models().items():
        if name in options.only:
            keep = options.keep / name.replace("/", "_") if options.keep else None
            print(measure(name, build, options.samples, keep), flush=True)


if __name__ == "__main__":
    main()
