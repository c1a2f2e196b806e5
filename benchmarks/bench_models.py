"""Whole models and int8 layers: the NPU emulator against PyTorch eager and onnxruntime.

Everything is measured in one process, one library's block after another (bench_ops.time_blocks),
with the same thread count for every library (--threads sets EXAMPLE_NPU_NUM_THREADS,
TVM_NUM_THREADS, torch.set_num_threads and onnxruntime's intra-op threads).

  int8 layers   a QDQ conv 3x3 64->64 on 56x56 (+ bias + relu) and a QDQ matmul 512^3, which the
                NPU runs as qnn.conv2d / qnn.matmul in integer arithmetic; beside them the same
                layer in float32 on the NPU, PyTorch's int8 (torch.ao quantized modules) on each
                of its x86 engines (x86, onednn, fbgemm; the torch column is the fastest) and
                PyTorch float32.
  models        ResNet-18 and a ViT (ViT-Ti/16 sizes), random weights, 1x3x224x224, imported with
                torch.export (fp32) or exported to ONNX and quantized by onnxruntime's
                quantize_static (QDQ, per-channel int8), as they partition today (ops without
                an NPU pattern would run on TVM's CPU build between NPU functions); fp32
                ViT-B/16 and BERT-base (128 tokens, padding mask) against PyTorch eager.

Outputs are checked before timing: float NPU results against TVM's LLVM build (rtol/atol 1e-4
for layers, 1e-3 for models), int8 results within 1 LSB of TVM's build of the same QDQ graph
(layers) or by the relative L2 error of the logits against onnxruntime (models).

    python benchmarks/bench_models.py [--threads N] [--only SUBSTRING] [--repeat N]
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from bench_args import parse_bench_args

ARGS = parse_bench_args(__doc__.split("\n\n")[0], 20, None if __name__ == "__main__" else [])

import example_npu  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
import tvm  # noqa: E402
from onnxruntime import quantization as ortq  # noqa: E402
from torch import nn  # noqa: E402
from tvm import relax  # noqa: E402
from tvm.relax.frontend.onnx import from_onnx  # noqa: E402
from tvm.relax.frontend.torch import from_exported_program  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from bench_ops import time_blocks, vm_runner  # noqa: E402
from transformer_blocks import BertBase, ViT  # noqa: E402

torch.set_num_threads(ARGS.threads)


# ---------------------------------------------------------------------------------------------
# Models (torchvision's architectures, written out: the project does not depend on torchvision;
# the ViT is transformer_blocks.py's)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    def __init__(self, classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        )
        blocks, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(torch.mean(x, dim=(2, 3)), 1))


def randomized(model: nn.Module) -> nn.Module:
    """Eval mode with non-trivial batch-norm statistics (fresh ones are the identity)."""
    gen = torch.Generator().manual_seed(0)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
    return model.eval()


# ---------------------------------------------------------------------------------------------
# Rows


@dataclass
class Row:
    name: str
    size: str
    fns: dict[str, Callable[[], object]]  # label -> call; "npu" first
    note: str = ""


def npu_and_tvm(mod: tvm.IRModule, inputs: list[np.ndarray]):
    """(npu call, TVM LLVM call, NPU regions) of a Relax module with weights bound."""
    offloaded = example_npu.partition_for_npu(mod)
    regions = offloaded["main"].script().count("call_dps_packed")
    assert regions > 0, "nothing was offloaded"
    return vm_runner(offloaded, inputs), vm_runner(mod, inputs), regions


def out_numpy(result) -> np.ndarray:
    return result.numpy() if hasattr(result, "numpy") else out_numpy(result[0])


def _c(value, dtype: str) -> relax.Constant:
    return relax.const(np.asarray(value, dtype=dtype))


def qdq_layer(kind: str, x_shape, w_q: np.ndarray, w_scale: np.ndarray, bias, relu: bool):
    """main(x_q) = quantize(relu(op(dequantize(x_q), dequantize(w_q)) + bias)): the QDQ chain
    that onnxruntime's quantizer emits and the NPU lowers to one qnn op. Returns (module,
    float module of the same layer taking float x)."""
    x_scale, x_zp, y_scale, y_zp = 0.02, 3, 0.05, -5

    def layer(bb, xf, wf):
        if kind == "conv2d":
            y = bb.emit(relax.op.nn.conv2d(xf, wf, padding=(1, 1)))
            y = bb.emit(relax.op.add(y, _c(bias.reshape(1, -1, 1, 1), "float32")))
        else:
            y = bb.emit(relax.op.add(relax.op.matmul(xf, wf), _c(bias, "float32")))
        return bb.emit(relax.op.nn.relu(y)) if relu else y

    axis = 0 if kind == "conv2d" else 1
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(x_shape, "int8"))
    with bb.function("main", [x]):
        with bb.dataflow():
            xf = bb.emit(relax.op.dequantize(x, _c(x_scale, "float32"), _c(x_zp, "int8")))
            zeros = _c(np.zeros(w_scale.shape, "int8"), "int8")
            wf = bb.emit(
                relax.op.dequantize(relax.const(w_q), _c(w_scale, "float32"), zeros, axis=axis)
            )
            y = layer(bb, xf, wf)
            out = bb.emit_output(
                relax.op.quantize(y, _c(y_scale, "float32"), _c(y_zp, "int8"), out_dtype="int8")
            )
        bb.emit_func_output(out)
    qmod = bb.get()
    bb = relax.BlockBuilder()
    xf = relax.Var("x", relax.TensorType(x_shape, "float32"))
    with bb.function("main", [xf]):
        with bb.dataflow():
            w = (w_q.astype("float32").T * w_scale).T if axis == 0 else w_q * w_scale
            out = bb.emit_output(layer(bb, xf, relax.const(w.astype("float32"))))
        bb.emit_func_output(out)
    return qmod, bb.get(), (x_scale, x_zp, y_scale, y_zp)


TORCH_INT8_ENGINES = ("x86", "onednn", "fbgemm")  # PyTorch's x86 quantized engines


def torch_int8_layer(
    kind: str, engine: str, qw, bias: np.ndarray, tx, npu_q, y_params
) -> Callable | None:
    """PyTorch's quantized ConvReLU2d / LinearReLU of the layer on one engine (its weights packed
    for that engine), checked within 1 LSB of the NPU's int8 result (npu_q) before timing; None
    (with a note) for an engine that is not exact on this CPU (x86 without VNNI: its 16-bit sums
    of uint8 x int8 pairs saturate), which is no peer for an exact datapath."""
    import torch.ao.nn.intrinsic.quantized as nniq

    torch.backends.quantized.engine = engine
    qlayer = (
        nniq.ConvReLU2d(64, 64, 3, padding=1) if kind == "conv2d" else nniq.LinearReLU(512, 512)
    )
    qlayer.set_weight_bias(qw, torch.from_numpy(bias))
    ys, yzp = y_params
    qlayer.scale, qlayer.zero_point = ys, yzp + 128

    def call():
        torch.backends.quantized.engine = engine
        with torch.inference_mode():
            return qlayer(tx)

    got = call().int_repr().numpy().astype(int) - 128
    diff = np.abs(got - npu_q.astype(int)).max()
    if diff > 1:
        print(
            f"note: torch {engine} int8 {kind} is {diff} LSB from the exact result on this CPU "
            "(saturating 16-bit sums): left out",
            file=sys.stderr,
        )
        return None
    return call


def int8_rows(rng: np.random.Generator) -> list[Row]:
    rows = []
    for kind, x_shape, w_shape, size in (
        ("conv2d", (1, 64, 56, 56), (64, 64, 3, 3), "1x64x56x56 -> 64, 3x3"),
        ("matmul", (512, 512), (512, 512), "512x512x512"),
    ):
        out_channels = w_shape[0] if kind == "conv2d" else w_shape[1]
        w_q = rng.integers(-127, 128, size=w_shape).astype("int8")
        w_scale = rng.uniform(0.002, 0.01, size=out_channels).astype("float32")
        bias = rng.standard_normal(out_channels).astype("float32")
        qmod, fmod, (xs, xzp, ys, yzp) = qdq_layer(kind, x_shape, w_q, w_scale, bias, relu=True)
        x_q = rng.integers(-128, 128, size=x_shape).astype("int8")
        npu_q, tvm_q, _ = npu_and_tvm(qmod, [x_q])
        diff = np.abs(out_numpy(npu_q()).astype(int) - out_numpy(tvm_q()).astype(int)).max()
        assert diff <= 1, f"int8 {kind}: {diff} LSB from TVM's build"
        x_f = (xs * (x_q.astype("float32") - xzp)).astype("float32")
        npu_f, tvm_f, _ = npu_and_tvm(fmod, [x_f])
        np.testing.assert_allclose(out_numpy(npu_f()), out_numpy(tvm_f()), rtol=1e-4, atol=1e-4)

        # PyTorch's int8 kernels take uint8 activations (zero point shifted by 128).
        w_f = torch.from_numpy(w_q.astype("float32"))
        scales = torch.from_numpy(w_scale.astype("float64"))
        zps = torch.zeros(out_channels, dtype=torch.long)
        if kind == "conv2d":
            qw = torch.quantize_per_channel(
                w_f * scales.view(-1, 1, 1, 1).float(), scales, zps, 0, torch.qint8
            )
            ref_f = nn.Conv2d(64, 64, 3, padding=1)
        else:
            qw = torch.quantize_per_channel(
                w_f.T * scales.view(-1, 1).float(), scales, zps, 0, torch.qint8
            )
            ref_f = nn.Linear(512, 512)
        ref_f.weight.data = qw.dequantize()
        ref_f.bias.data = torch.from_numpy(bias)
        tx = torch.quantize_per_tensor(torch.from_numpy(x_f), xs, xzp + 128, torch.quint8)
        tf = torch.from_numpy(x_f)
        npu_out = out_numpy(npu_q())
        calls = {
            f"torch {engine}": torch_int8_layer(kind, engine, qw, bias, tx, npu_out, (ys, yzp))
            for engine in TORCH_INT8_ENGINES
            if engine in torch.backends.quantized.supported_engines
        }
        engines = {name: call for name, call in calls.items() if call is not None}

        def torch_fp32(ref_f=ref_f, tf=tf):
            with torch.inference_mode():
                return torch.relu(ref_f(tf))

        rows.append(
            Row(
                f"int8 {kind} (QDQ)",
                size,
                {"npu": npu_q, "npu fp32": npu_f, **engines, "torch fp32": torch_fp32},
            )
        )
    return rows


def model_rows(rng: np.random.Generator, workdir: Path) -> list[Row]:
    rows = []
    image = rng.standard_normal((1, 3, 224, 224)).astype("float32")
    timage = torch.from_numpy(image)
    for name, model in (("ResNet-18", ResNet18()), ("ViT-Ti/16", ViT())):
        if ARGS.only and ARGS.only not in name:
            continue
        model = randomized(model)
        with torch.no_grad():
            exported = torch.export.export(model, (timage,))
            mod = from_exported_program(exported, keep_params_as_input=False)
        npu, tvm_ref, regions = npu_and_tvm(mod, [image])
        expected = out_numpy(tvm_ref())
        np.testing.assert_allclose(out_numpy(npu()), expected, rtol=1e-3, atol=1e-3)
        onnx_path = workdir / f"{name.replace('/', '_')}.onnx"
        torch.onnx.export(model, (timage,), str(onnx_path), dynamo=False, opset_version=17)
        session = ort_session(onnx_path)

        def torch_call(model=model):
            with torch.inference_mode():
                return model(timage)

        def ort_call(session=session):
            return session.run(None, {session.get_inputs()[0].name: image})

        rows.append(
            Row(
                f"{name} fp32",
                "1x3x224x224",
                {"npu": npu, "torch": torch_call, "ort": ort_call},
                f"NPU functions: {regions}",
            )
        )
        if name == "ResNet-18":
            rows.append(int8_model_row(name, onnx_path, image, rng, workdir))
    return rows


def transformer_rows(rng: np.random.Generator) -> list[Row]:
    """fp32 ViT-B/16 and BERT-base (128 tokens) against PyTorch eager; TVM's CPU build checks the
    NPU's output first (as model_rows)."""
    ids = rng.integers(0, 30522, size=(1, 128), dtype=np.int64)
    cases = (
        ("ViT-B/16", ViT(dim=768, heads=12), [rng.standard_normal((1, 3, 224, 224), "float32")]),
        ("BERT-base", BertBase(), [ids, np.ones((1, 128), dtype=np.int64)]),
    )
    rows = []
    for name, model, inputs in cases:
        if ARGS.only and ARGS.only not in f"{name} fp32":
            continue
        model = model.eval()
        tensors = tuple(map(torch.from_numpy, inputs))
        with torch.no_grad():
            exported = torch.export.export(model, tensors)
            mod = from_exported_program(exported, keep_params_as_input=False)
        npu, tvm_ref, regions = npu_and_tvm(mod, inputs)
        np.testing.assert_allclose(out_numpy(npu()), out_numpy(tvm_ref()), rtol=1e-3, atol=1e-3)

        def torch_call(model=model, tensors=tensors):
            with torch.inference_mode():
                return model(*tensors)

        size = "x".join(map(str, inputs[0].shape))
        note = f"NPU functions: {regions}"
        rows.append(Row(f"{name} fp32", size, {"npu": npu, "torch": torch_call}, note))
    return rows


def ort_session(path: Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = ARGS.threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class RandomImages(ortq.CalibrationDataReader):
    def __init__(self, name: str, rng: np.random.Generator, count: int = 4):
        self.batches = iter(
            [{name: rng.standard_normal((1, 3, 224, 224)).astype("float32")} for _ in range(count)]
        )

    def get_next(self):
        return next(self.batches, None)


def int8_model_row(name, onnx_path, image, rng, workdir) -> Row:
    """The fp32 ONNX export quantized by onnxruntime (QDQ, per-channel int8 weights, int8
    activations), imported from ONNX and partitioned."""
    int8_path = workdir / f"{onnx_path.stem}_int8.onnx"
    input_name = onnx.load(str(onnx_path)).graph.input[0].name
    ortq.quantize_static(
        str(onnx_path),
        str(int8_path),
        RandomImages(input_name, rng),
        quant_format=ortq.QuantFormat.QDQ,
        per_channel=True,
        activation_type=ortq.QuantType.QInt8,
        weight_type=ortq.QuantType.QInt8,
    )
    model = onnx.load(str(int8_path))
    mod = from_onnx(model, keep_params_in_input=False)
    offloaded = example_npu.partition_for_npu(mod)
    regions = offloaded["main"].script().count("call_dps_packed")
    npu_ops = [
        node["op"]
        for module in offloaded.attrs["external_mods"]
        for node in json.loads(module.inspect_source())["nodes"]
    ]
    onnx_linear = sum(node.op_type in ("Conv", "Gemm", "MatMul") for node in model.graph.node)
    qnn_linear = npu_ops.count("qnn.conv2d") + npu_ops.count("qnn.matmul")
    assert qnn_linear == onnx_linear, f"{qnn_linear} of {onnx_linear} Conv/Gemm are qnn ops"
    npu = vm_runner(offloaded, [image])
    session = ort_session(int8_path)

    def ort_call():
        return session.run(None, {input_name: image})

    got, want = out_numpy(npu()), ort_call()[0]
    error = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert error < 0.1, f"{name} int8: logits {error:.1%} from onnxruntime's"
    return Row(
        f"{name} int8 (ORT QDQ)",
        "1x3x224x224",
        {"npu": npu, "ort": ort_call},
        f"NPU functions: {regions}, qnn conv/matmul {qnn_linear} of {onnx_linear} Conv/Gemm, "
        f"logits {error:.2%} from ORT",
    )


def main() -> int:
    print(
        f"threads {ARGS.threads} (NPU, TVM, torch, onnxruntime); torch {torch.__version__}, "
        f"onnxruntime {ort.__version__}, tvm {tvm.__version__}"
    )
    header = (
        f"| {'row':<24} | {'size':<22} | {'npu ms':>8} | {'npu fp32':>8} | {'torch ms':>8} "
        f"| {'torch fp32':>10} | {'ort ms':>8} | {'torch/npu':>9} | {'ort/npu':>7} | note |"
    )
    print(header)
    print("|" + "|".join("-" * len(c) for c in header.split("|")[1:-1]) + "|")
    rng = np.random.default_rng(0)
    rows: list[Row] = []
    if not ARGS.only or ARGS.only in "int8 conv2d matmul":
        rows = int8_rows(rng)
    with tempfile.TemporaryDirectory() as tmp:
        for row in rows + model_rows(rng, Path(tmp)) + transformer_rows(rng):
            if ARGS.only and ARGS.only not in row.name:
                continue
            times = time_blocks(list(row.fns.values()), ARGS.repeat)
            print_row(row, dict(zip(row.fns, times, strict=True)))
    return 0


def print_row(row: Row, ms: dict[str, float]) -> None:
    def cell(key: str, width: int) -> str:
        return f"{ms[key]:{width}.3f}" if key in ms else f"{'-':>{width}}"

    def ratio(key: str, width: int) -> str:
        return f"{ms[key] / ms['npu']:{width}.2f}" if key in ms else f"{'-':>{width}}"

    note = row.note
    engines = {key: ms[key] for key in ms if key.removeprefix("torch ") in TORCH_INT8_ENGINES}
    if engines:  # int8 layers: the torch column is PyTorch's fastest quantized engine
        fastest = min(engines, key=engines.get)
        ms = {**ms, "torch": engines[fastest]}
        each = ", ".join(
            f"{key.removeprefix('torch ')} {value:.3f}" for key, value in engines.items()
        )
        note = f"torch = {fastest.removeprefix('torch ')} (ms: {each})" + (
            f"; {note}" if note else ""
        )
    if "npu fp32" in ms:
        note = f"int8 {ms['npu fp32'] / ms['npu']:.2f}x the NPU's fp32 speed" + (
            f"; {note}" if note else ""
        )
    print(
        f"| {row.name:<24} | {row.size:<22} | {cell('npu', 8)} | {cell('npu fp32', 8)} "
        f"| {cell('torch', 8)} | {cell('torch fp32', 10)} | {cell('ort', 8)} "
        f"| {ratio('torch', 9)} | {ratio('ort', 7)} | {note} |",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
