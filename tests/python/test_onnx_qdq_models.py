"""Whole CNNs quantized by onnxruntime run in integer arithmetic on the NPU.

Each architecture of cnn_blocks.py is exported with torch.onnx, quantized by
``onnxruntime.quantization.quantize_static`` (QDQ, default activation and weight types, random
calibration data, per-channel and per-tensor weights; uint8 activations too), imported with
``tvm.relax.frontend.onnx.from_onnx`` and partitioned with ``partition_for_npu``. Checked: the
whole model is one NPU function (nothing stays on the CPU), every Conv / Gemm / MatMul of the
ONNX graph is an integer ``qnn`` op, and every output element is within one quantization step of
onnxruntime's own output for the same quantized model (the fraction that differs at all is
printed).
"""

from __future__ import annotations

import logging
from collections import Counter

import cnn_blocks
import example_npu
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tvm
from example_npu.report import partition_with_report
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from spec_models import npu_ops
from tvm import relax
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
from tvm.relax.frontend.onnx import from_onnx
from tvm.relax.transform import FuseOpsByPattern, MergeCompositeFunctions, RunCodegen

CALIBRATION_SAMPLES = 8
EVALUATION_SAMPLES = 16
MISMATCHES: dict[str, float] = {}


class RandomCalibration(CalibrationDataReader):
    def __init__(self, seed: int):
        rng = np.random.default_rng(seed)
        self.batches = iter(
            {"x": rng.standard_normal(cnn_blocks.INPUT_SHAPE).astype("float32")}
            for _ in range(CALIBRATION_SAMPLES)
        )

    def get_next(self):
        return next(self.batches, None)


@pytest.fixture(scope="module")
def float_models(tmp_path_factory):
    """name -> exported float ONNX path (exported once per module)."""
    directory = tmp_path_factory.mktemp("onnx")
    paths = {}
    for name in cnn_blocks.MODELS:
        paths[name] = str(directory / f"{name}.onnx")
        cnn_blocks.export_onnx(cnn_blocks.build(name), paths[name])
    return paths


def quantized(float_path: str, per_channel: bool, activation_type=None, weight_type=None) -> str:
    options = {}
    if activation_type is not None:
        options["activation_type"] = activation_type
    if weight_type is not None:
        options["weight_type"] = weight_type
    suffix = "".join(f"_{key[0]}{value.name}" for key, value in options.items())
    path = float_path.replace(".onnx", f"_q{int(per_channel)}{suffix}.onnx")
    quantize_static(
        float_path,
        path,
        RandomCalibration(seed=1),
        quant_format=QuantFormat.QDQ,
        per_channel=per_channel,
        **options,
    )
    return path


def npu_graph_ops(mod: tvm.IRModule) -> Counter:
    return Counter(npu_ops(mod))


def cpu_ops(mod: tvm.IRModule) -> set[str]:
    """The Relax ops main still calls itself (on the CPU)."""
    found = set()

    def visit(expr):
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
            found.add(expr.op.name)

    relax.analysis.post_order_visit(mod["main"].body, visit)
    return found


def output_scale(model: onnx.ModelProto) -> float:
    """The scale of the last DequantizeLinear before the graph output (through float glue ops
    such as SqueezeNet's final ReduceMean + Flatten)."""
    producers = {out: node for node in model.graph.node for out in node.output}
    node = producers[model.graph.output[0].name]
    while node.op_type != "DequantizeLinear":
        node = producers[node.input[0]]
    init = {t.name: t for t in model.graph.initializer}
    return float(onnx.numpy_helper.to_array(init[node.input[1]]))


def compare_with_onnxruntime(path: str, mod: tvm.IRModule) -> tuple[float, float]:
    """(largest difference in output steps, fraction of output elements that differ)."""
    vm = relax.VirtualMachine(tvm.compile(mod, "llvm"), tvm.cpu())
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    step = output_scale(onnx.load(path))
    rng = np.random.default_rng(7)
    steps, outputs = [], []
    for _ in range(EVALUATION_SAMPLES):
        x = rng.standard_normal(cnn_blocks.INPUT_SHAPE).astype("float32")
        expected = session.run(None, {"x": x})[0]
        actual = vm["main"](tvm.runtime.tensor(x)).numpy()
        steps.append(np.abs(actual.astype(np.float64) - expected) / step)
        outputs.append(expected)
    # The comparison means something only if the outputs vary over many steps.
    assert np.ptp(np.concatenate([o.ravel() for o in outputs])) / step > 20
    steps = np.concatenate([s.ravel() for s in steps])
    return float(steps.max()), float(np.mean(steps > 0.5))


# (model, per-channel weights, activation type): the defaults (int8 in onnxruntime 1.32) with
# per-channel and per-tensor weights for every model, and uint8 activations (zero points near
# 128) for every model too.
CASES = [(name, pc, None) for name in cnn_blocks.MODELS for pc in (True, False)] + [
    (name, index % 2 == 0, QuantType.QUInt8) for index, name in enumerate(cnn_blocks.MODELS)
]


def _label(name: str, per_channel: bool, activation_type) -> str:
    weights = "per-channel" if per_channel else "per-tensor"
    activations = "int8" if activation_type is None else "uint8"
    return f"{name} {weights} {activations}"


@pytest.mark.parametrize("name,per_channel,activation_type", CASES)
def test_onnxruntime_quantized_model_runs_integer_on_the_npu(
    float_models, name, per_channel, activation_type
):
    path = quantized(float_models[name], per_channel, activation_type)
    model = onnx.load(path)
    mod = from_onnx(model, keep_params_in_input=False)
    offloaded, report = partition_with_report(mod)
    assert len(report.npu_functions) == 1, report.table()
    assert not +report.cpu_ops, report.table()
    ops = npu_graph_ops(offloaded)
    onnx_ops = Counter(node.op_type for node in model.graph.node)
    linear = onnx_ops["Conv"] + onnx_ops["Gemm"] + onnx_ops["MatMul"]
    assert ops["qnn.conv2d"] + ops["qnn.matmul"] == linear, (ops, onnx_ops)
    assert not {"nn.conv2d", "matmul", "add", "multiply"} & set(ops), ops
    worst, fraction = compare_with_onnxruntime(path, offloaded)
    assert worst <= 1.0 + 1e-6, f"{name}: {worst} quantization steps from onnxruntime"
    MISMATCHES[_label(name, per_channel, activation_type)] = fraction


def spec_flow(mod: tvm.IRModule) -> tvm.IRModule:
    """The specification's flow with bind_constants=False: one NPU call per composite, every
    constant (scales and zero points too) a call argument."""
    patterns = get_patterns_with_prefix("example_npu")
    mod = FuseOpsByPattern(patterns, bind_constants=False, annotate_codegen=True)(mod)
    return RunCodegen()(MergeCompositeFunctions()(mod))


@pytest.mark.parametrize("name", ["resnet18", "efficientnet", "shufflenet"])
def test_spec_flow_without_bound_constants(float_models, name):
    """After canonicalize_qdq every Conv / Gemm is an integer op whose quantization parameters
    the NPU binds at run time; without it, the shared-dequantize chains run as separate ops. Both
    compute what onnxruntime does, and neither fails in codegen."""
    path = quantized(float_models[name], True)
    mod = from_onnx(onnx.load(path), keep_params_in_input=False)
    canonical = spec_flow(example_npu.canonicalize_qdq(mod))
    # Identical composites share one NPU function, so count where the convs are not: neither
    # float on the NPU nor left on the CPU.
    ops = npu_graph_ops(canonical)
    assert ops["qnn.conv2d"] > 0 and not {"nn.conv2d", "matmul"} & set(ops), ops
    assert not {"relax.nn.conv2d", "relax.matmul"} & cpu_ops(canonical)
    for offloaded in (canonical, spec_flow(mod)):
        worst, _ = compare_with_onnxruntime(path, offloaded)
        assert worst <= 1.0 + 1e-6


def test_asymmetric_uint8_weights_fall_back_with_a_reason(float_models, caplog):
    """onnxruntime's QUInt8 weights have zero points the integer datapath does not take: those
    convs stay float ops (on the NPU, between dequantize and quantize) with the reason logged,
    and the model still computes what onnxruntime does."""
    path = quantized(float_models["resnet18"], False, QuantType.QUInt8, QuantType.QUInt8)
    mod = from_onnx(onnx.load(path), keep_params_in_input=False)
    with caplog.at_level(logging.INFO, logger="example_npu"):
        offloaded = example_npu.partition_for_npu(mod)
    assert "a quantized weight must be an int8 constant" in caplog.text
    ops = npu_graph_ops(offloaded)
    assert ops["nn.conv2d"] > 0 and "qnn.conv2d" not in ops, ops
    worst, _ = compare_with_onnxruntime(path, offloaded)
    assert worst <= 1.0 + 1e-6


def test_mismatch_fractions_are_reported(summary_line):
    """The fraction of output elements that differ from onnxruntime at all (by one step)."""
    assert len(MISMATCHES) == len(CASES), "run with the model cases above"
    for label, fraction in MISMATCHES.items():
        summary_line(f"onnxruntime QDQ {label}: {fraction:.2%} of outputs one step off")
    assert max(MISMATCHES.values()) < 0.05
