"""Detection and segmentation networks quantized by onnxruntime run in integer arithmetic on the
NPU: the shapes of detection_models.py (random weights) through the dynamo ONNX exporter,
``onnxruntime.quantization.quantize_static`` (QDQ, per-channel int8 weights, int8 activations,
random calibration), ``from_onnx`` and ``partition_for_npu``, and the full-size YOLOv8-n of
detection_full_size.py (with its DFL box decoding). The top-k detect head's TopK stays float
(onnxruntime quantizes neither ReduceMax nor TopK): it selects among dequantized int8 scores, so
ties are everywhere and its anchor ids check the tie rule. Checked: one NPU function, every Conv and
ConvTranspose an integer ``qnn`` op (no float conv left), and every output within one
quantization step of onnxruntime's output and of TVM's CPU build of the same QDQ graph."""

from __future__ import annotations

import warnings
from collections import Counter

import detection_full_size
import detection_models
import example_npu  # noqa: F401  # registers patterns, codegen and runtime
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import real_models
import tvm
from example_npu.partition.report import partition_with_report
from test_onnx_qdq_models import (
    compare_with_onnxruntime,
    input_of,
    npu_graph_ops,
    output_scale,
    quantized,
)
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

MODELS = {
    model.name: model
    for model in detection_models.MODELS + detection_full_size.MODELS
    if model.name
    in {"yolo_fpn_pan", "unet", "deeplab_aspp", "vae_decoder_block", "yolov8n", "topk_detect_head"}
}
# Models compared with onnxruntime's reference execution (each QDQ op as the ONNX spec defines
# it) because its default session fuses an op into an integer kernel that rounds differently,
# with the reason. YOLOv8-n's DFL softmax becomes QLinearSoftmax, which requantizes with
# floor(1 / y_scale) (254 for softmax's usual 1/255 scale, not 255): 7% of the softmax outputs
# 1 step low, then the DFL conv (weights 0..15) sums 16 of them, 2 steps at the boxes (its
# default session is that far from its own reference execution).
ORT_FUSED_ROUNDS_DIFFERENTLY = {"yolov8n": "QLinearSoftmax"}
SAMPLES = 4
# One step, measured on float32 outputs (a dequantized value is rounded to float32).
ONE_STEP = 1.0 + 1e-4


def export_quantized(name: str, directory) -> str:
    module, data = real_models.instantiate(MODELS[name], 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # exporter chatter
        onnx_bytes = real_models.export_onnx(module, data)
    path = f"{directory}/{name}.onnx"
    with open(path, "wb") as file:
        file.write(onnx_bytes)
    return quantized(path, per_channel=True)


def fused_onnxruntime_graph(path: str, directory) -> onnx.ModelProto:
    """The graph onnxruntime's default session runs (QDQ groups fused into its kernels)."""
    options = ort.SessionOptions()
    options.optimized_model_filepath = f"{directory}/fused.onnx"
    ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return onnx.load(options.optimized_model_filepath)


def steps_from_tvm(path: str, partitioned: tvm.IRModule, mod: tvm.IRModule) -> float:
    """The largest distance, in output steps, between the NPU and TVM's CPU build of the QDQ
    graph on the same random inputs."""
    name, shape = input_of(onnx.load(path))
    step = output_scale(onnx.load(path))
    machines = [relax.VirtualMachine(tvm.compile(m, "llvm"), tvm.cpu()) for m in (partitioned, mod)]
    rng = np.random.default_rng(11)
    worst = 0.0
    for _ in range(SAMPLES):
        x = tvm.runtime.tensor(rng.standard_normal(shape).astype("float32"))
        npu, cpu = (vm["main"](x).numpy().astype(np.float64) for vm in machines)
        worst = max(worst, float(np.abs(npu - cpu).max()) / step)
    return worst


@pytest.mark.parametrize("name", sorted(MODELS))
def test_quantized_detection_model_runs_integer_on_the_npu(name, tmp_path, summary_line):
    path = export_quantized(name, tmp_path)
    model = onnx.load(path)
    mod = from_onnx(model, keep_params_in_input=False)
    partitioned, report = partition_with_report(mod)
    assert len(report.npu_functions) == 1, report.table()
    # The VAE block's int32 InstanceNorm bias under dequantize is folded (canonicalize_qdq).
    assert not report.cpu_ops, report.table()
    ops = npu_graph_ops(partitioned)
    onnx_ops = Counter(node.op_type for node in model.graph.node)
    assert ops["qnn.conv2d"] == onnx_ops["Conv"], (ops, onnx_ops)
    assert ops["qnn.conv2d_transpose"] == onnx_ops["ConvTranspose"], (ops, onnx_ops)
    assert not {"nn.conv2d", "nn.conv2d_transpose"} & set(ops), ops
    fused = name not in ORT_FUSED_ROUNDS_DIFFERENTLY
    distance = compare_with_onnxruntime(path, partitioned, samples=SAMPLES, fused=fused)
    assert distance.max_steps <= ONE_STEP, f"{name}: {distance} from onnxruntime"
    if not fused:
        fused_ops = {node.op_type for node in fused_onnxruntime_graph(path, tmp_path).graph.node}
        assert ORT_FUSED_ROUNDS_DIFFERENTLY[name] in fused_ops, fused_ops
    from_tvm = steps_from_tvm(path, partitioned, mod)
    assert from_tvm <= ONE_STEP, f"{name}: {from_tvm} steps from TVM's CPU build"
    summary_line(
        f"int8 QDQ {name}: {len(report.npu_functions)} NPU function, "
        f"{sum(report.cpu_ops.values())} CPU ops, "
        f"{ops['qnn.conv2d'] + ops['qnn.conv2d_transpose']} integer convs, "
        f"<= {distance.max_steps:.0f} step from onnxruntime"
        f"{'' if fused else ' (reference execution)'} ({distance.fraction:.3%} differ), "
        f"<= {from_tvm:.0f} from TVM's build"
    )
