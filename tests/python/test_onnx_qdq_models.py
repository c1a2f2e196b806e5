"""Whole CNNs quantized by onnxruntime run in integer arithmetic on the NPU.

Each CNN architecture of real_models.py is exported with torch.onnx, quantized by
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
from dataclasses import dataclass

import example_npu
import numpy as np
import onnx
import onnxruntime as ort
import onnxruntime_int8
import pytest
import real_models
import tvm
from example_npu.partition.report import partition_with_report
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from spec_models import npu_ops
from tvm import relax
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
from tvm.relax.frontend.onnx import from_onnx
from tvm.relax.transform import FuseOpsByPattern, MergeCompositeFunctions, RunCodegen

CALIBRATION_SAMPLES = 8
EVALUATION_SAMPLES = 16
# The CNNs of real_models.py (the block structures of ResNet-18, MobileNetV2/V3, EfficientNet,
# SqueezeNet and ShuffleNetV2).
CNNS = ("resnet", "mobilenet_v2", "mobilenet_v3", "efficientnet", "squeezenet", "shufflenet_v2")
MISMATCHES: dict[str, float] = {}


def input_of(model: onnx.ModelProto) -> tuple[str, tuple[int, ...]]:
    """The name and static shape of the model's one input."""
    graph_input = model.graph.input[0]
    return graph_input.name, tuple(d.dim_value for d in graph_input.type.tensor_type.shape.dim)


class RandomCalibration(CalibrationDataReader):
    def __init__(self, name: str, shape: tuple[int, ...], count: int, seed: int = 1):
        rng = np.random.default_rng(seed)
        self.batches = iter(
            {name: rng.standard_normal(shape).astype("float32")} for _ in range(count)
        )

    def get_next(self):
        return next(self.batches, None)


def export_float(name: str, directory) -> str:
    """real_models' `name` (seeded weights, random BatchNorm statistics) as a float ONNX file."""
    module, data = real_models.instantiate(real_models.MODELS_BY_NAME[name])
    path = f"{directory}/{name}.onnx"
    with open(path, "wb") as file:
        file.write(real_models.export_onnx(module, data))
    return path


@pytest.fixture(scope="module")
def float_models(tmp_path_factory):
    """name -> exported float ONNX path (exported once per module)."""
    directory = tmp_path_factory.mktemp("onnx")
    return {name: export_float(name, directory) for name in CNNS}


def quantized(
    float_path: str,
    per_channel: bool,
    activation_type=None,
    weight_type=None,
    calibration_samples: int = CALIBRATION_SAMPLES,
) -> str:
    """onnxruntime's quantize_static (QDQ) on random calibration inputs; the quantized path."""
    options = {}
    if activation_type is not None:
        options["activation_type"] = activation_type
    if weight_type is not None:
        options["weight_type"] = weight_type
    suffix = "".join(f"_{key[0]}{value.name}" for key, value in options.items())
    path = float_path.replace(".onnx", f"_q{int(per_channel)}{suffix}.onnx")
    name, shape = input_of(onnx.load(float_path))
    quantize_static(
        float_path,
        path,
        RandomCalibration(name, shape, calibration_samples),
        quant_format=QuantFormat.QDQ,
        per_channel=per_channel,
        **options,
    )
    return path


DATA_MOVEMENT = {"reshape", "permute_dims", "strided_slice", "concat", "broadcast_to"}
QDQ_OPS = {"quantize", "dequantize"}


ONNX_SHAPE_OPS = {"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Split"}
ONNX_QDQ_OPS = {"QuantizeLinear", "DequantizeLinear", "Constant"}


def float_ops(model: onnx.ModelProto) -> list[str]:
    """ONNX ops that onnxruntime itself computes in float: some data input is not a
    DequantizeLinear result, or some consumer of the result is not a QuantizeLinear (shape ops
    between are looked through; constant parameters such as ReduceMean's axes count as
    quantized). E.g. a HardSwish feeding a ReduceMean, or a ReduceMean that is the output."""
    nodes = model.graph.node
    producers = {out: node for node in nodes for out in node.output}
    consumers: dict[str, list] = {}
    for node in nodes:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    outputs = {value.name for value in model.graph.output}

    def source(name: str) -> str | None:
        node = producers.get(name)
        while node is not None and node.op_type in ONNX_SHAPE_OPS:
            node = producers.get(node.input[0])
        return None if node is None else node.op_type

    def sinks(name: str) -> list[str]:
        found = ["graph output"] if name in outputs else []
        for node in consumers.get(name, []):
            found += sinks(node.output[0]) if node.op_type in ONNX_SHAPE_OPS else [node.op_type]
        return found

    return [
        node.op_type
        for node in nodes
        if node.op_type not in ONNX_QDQ_OPS | ONNX_SHAPE_OPS
        and (
            any(source(name) not in (None, "DequantizeLinear", "Constant") for name in node.input)
            or any(sink != "QuantizeLinear" for name in node.output for sink in sinks(name))
        )
    ]


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


@dataclass(frozen=True)
class Distance:
    """How far a module's outputs are from onnxruntime's, in output quantization steps."""

    max_steps: float
    fraction: float  # of output elements that differ at all
    relative: float  # mean relative L2 error


def compare_with_onnxruntime(
    path: str, mod: tvm.IRModule, samples: int = EVALUATION_SAMPLES, fused: bool = True
) -> Distance:
    """Distance of ``mod``'s outputs from onnxruntime's on random inputs: its default session
    (``fused``: QDQ groups fused into its integer kernels, where they are exact on this CPU) or
    its reference execution (graph optimizations off: each QDQ op as the ONNX spec defines it)."""
    vm = relax.VirtualMachine(tvm.compile(mod, "llvm"), tvm.cpu())
    model = onnx.load(path)
    options = ort.SessionOptions()
    if not fused or not onnxruntime_int8.int8_kernels_exact():
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    name, shape = input_of(model)
    step = output_scale(model)
    rng = np.random.default_rng(7)
    steps, outputs, relative = [], [], []
    for _ in range(samples):
        x = rng.standard_normal(shape).astype("float32")
        expected = session.run(None, {name: x})[0].astype(np.float64)
        actual = vm["main"](tvm.runtime.tensor(x)).numpy()
        steps.append(np.abs(actual - expected).ravel() / step)
        outputs.append(expected.ravel())
        relative.append(np.linalg.norm(actual - expected) / np.linalg.norm(expected))
    # The comparison means something only if the outputs vary over many steps.
    assert np.ptp(np.concatenate(outputs)) / step > 20
    steps = np.concatenate(steps)
    return Distance(float(steps.max()), float(np.mean(steps > 0.5)), float(np.mean(relative)))


# (model, per-channel weights, activation type): the defaults (int8 in onnxruntime 1.32) with
# per-channel and per-tensor weights for every model, and uint8 activations (zero points near
# 128) for every model too.
CASES = [(name, pc, None) for name in CNNS for pc in (True, False)] + [
    (name, index % 2 == 0, QuantType.QUInt8) for index, name in enumerate(CNNS)
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
    assert not {"nn.conv2d", "matmul"} & set(ops), ops
    float_compute = {
        op for op in ops if not op.startswith("qnn.") and op not in DATA_MOVEMENT | QDQ_OPS
    }
    # Float arithmetic on the NPU only where the QDQ model itself computes in float.
    assert not float_compute or float_ops(model), (float_compute, ops)
    distance = compare_with_onnxruntime(path, offloaded)
    assert distance.max_steps <= 1.0 + 1e-6, f"{name}: {distance} from onnxruntime"
    MISMATCHES[_label(name, per_channel, activation_type)] = distance.fraction


def spec_flow(mod: tvm.IRModule) -> tvm.IRModule:
    """The specification's flow with bind_constants=False: one NPU call per composite, every
    constant (scales and zero points too) a call argument."""
    patterns = get_patterns_with_prefix("example_npu")
    mod = FuseOpsByPattern(patterns, bind_constants=False, annotate_codegen=True)(mod)
    return RunCodegen()(MergeCompositeFunctions()(mod))


@pytest.mark.parametrize("name", ["resnet", "efficientnet", "shufflenet_v2"])
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
        assert compare_with_onnxruntime(path, offloaded).max_steps <= 1.0 + 1e-6


def test_asymmetric_uint8_weights_fall_back_with_a_reason(float_models, caplog):
    """onnxruntime's QUInt8 weights have zero points the integer datapath does not take: those
    convs stay float ops (on the NPU, between dequantize and quantize) with the reason logged,
    and the model still computes what onnxruntime does."""
    path = quantized(float_models["resnet"], False, QuantType.QUInt8, QuantType.QUInt8)
    mod = from_onnx(onnx.load(path), keep_params_in_input=False)
    with caplog.at_level(logging.INFO, logger="example_npu"):
        offloaded = example_npu.partition_for_npu(mod)
    assert "a quantized weight must be an int8 constant" in caplog.text
    ops = npu_graph_ops(offloaded)
    assert ops["nn.conv2d"] > 0 and "qnn.conv2d" not in ops, ops
    assert compare_with_onnxruntime(path, offloaded).max_steps <= 1.0 + 1e-6


def test_mismatch_fractions_are_reported(summary_line):
    """The fraction of output elements that differ from onnxruntime at all (by one step)."""
    assert len(MISMATCHES) == len(CASES), "run with the model cases above"
    for label, fraction in MISMATCHES.items():
        summary_line(f"onnxruntime QDQ {label}: {fraction:.2%} of outputs one step off")
    assert max(MISMATCHES.values()) < 0.05
