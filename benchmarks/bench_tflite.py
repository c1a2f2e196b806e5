"""int8 depthwise networks and layers: the NPU emulator against LiteRT and PyTorch's int8 engines.

Everything is measured in one process, one library's block after another (bench_ops.time_blocks),
with the same thread count for every library (--threads sets EXAMPLE_NPU_NUM_THREADS,
TVM_NUM_THREADS, LiteRT's num_threads and torch.set_num_threads).

  models   the committed full-integer TFLite models (tests/python/tflite_models.py: the MLPerf
           Tiny architectures and MobileNetV2-0.35 at 96x96), or with --models DIR every
           *.tflite file there but the open-batch twins (tools/make_tflite_models.py --set extra
           --out DIR: full-size MobileNetV2, EfficientNetB0, MobileNetV3), through load_model and
           partition_for_npu, against LiteRT's default kernels (XNNPACK) on the same file.
  layers   QDQ depthwise convolutions 3x3 (+ bias + relu6) of MobileNet / keyword-spotting sizes,
           which the NPU runs as qnn.conv2d, against PyTorch's quantized conv with groups ==
           channels on its fastest x86 engine (the best of `x86`, `onednn` and `fbgemm`).

Outputs are checked before timing: the NPU's int8 result against TVM's CPU build of the same
program (at most 1 step apart per layer; models report their largest difference to TVM's build
and to LiteRT's reference kernels, which round differently).

    python benchmarks/bench_tflite.py [--threads N] [--only SUBSTRING] [--repeat N] [--models DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from bench_args import parse_bench_args

ARGS = parse_bench_args(
    __doc__.split("\n\n")[0],
    50,
    None if __name__ == "__main__" else [],
    lambda parser: parser.add_argument(
        "--models", type=Path, help="time the *.tflite files in this folder instead"
    ),
)

import example_npu  # noqa: E402
import torch  # noqa: E402
import tvm  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT / "tests" / "python"))
from bench_ops import time_blocks, vm_runner  # noqa: E402
from qdq_models import qdq_module  # noqa: E402
from tflite_models import MODELS, interpreter, model_path, random_inputs, run_litert  # noqa: E402

torch.set_num_threads(ARGS.threads)

X_PARAMS, Y_PARAMS = (0.02, 3), (0.05, -5)  # (scale, zero point) of the layers' input / output


def npu_and_cpu(mod: tvm.IRModule, x: np.ndarray):
    """(npu call, TVM CPU call) of a module taking one int8 input; everything offloaded."""
    offloaded = example_npu.partition_for_npu(mod)
    assert "call_dps_packed" in offloaded["main"].script(), "nothing was offloaded"
    return vm_runner(offloaded, [x]), vm_runner(mod, [x])


def step_difference(a, b) -> int:
    to_int = lambda r: (r.numpy() if hasattr(r, "numpy") else np.asarray(r)).astype(np.int64)  # noqa: E731
    return int(np.abs(to_int(a) - to_int(b)).max())


def litert_runner(path: Path, x: np.ndarray):
    runner = interpreter(path, reference=False)
    runner.allocate_tensors()
    (detail,) = runner.get_input_details()
    runner.set_tensor(detail["index"], x)
    return runner.invoke


def model_row(path: Path) -> tuple[str, str, dict[str, float], str]:
    (x,) = random_inputs(path, 1, seed=0)
    model = example_npu.load_model(path)
    npu, cpu = npu_and_cpu(model.mod, x)
    note = (
        f"max |npu - tvm| {step_difference(npu(), cpu())}, "
        f"|npu - litert ref| {step_difference(npu(), run_litert(path, x))}"
    )
    npu_ms, litert_ms = time_blocks([npu, litert_runner(path, x)], ARGS.repeat)
    return path.stem, "x".join(map(str, x.shape)), {"npu": npu_ms, "litert": litert_ms}, note


def torch_depthwise(weight_q: np.ndarray, weight_scale: np.ndarray, bias: np.ndarray, x_q):
    """PyTorch's quantized depthwise conv + relu6 of the same layer on its current engine."""
    from torch.ao.nn import quantized as nnq

    channels = weight_q.shape[0]
    conv = nnq.Conv2d(channels, channels, 3, padding=1, groups=channels)
    w = torch._make_per_channel_quantized_tensor(
        torch.from_numpy(weight_q),
        torch.from_numpy(weight_scale.astype("float64")),
        torch.zeros(channels, dtype=torch.int64),
        0,
    )
    conv.set_weight_bias(w, torch.from_numpy(bias))
    conv.scale, conv.zero_point = Y_PARAMS
    # relu6 on the quantized output (the NPU fuses it into the clamp).
    x = torch._make_per_tensor_quantized_tensor(
        torch.from_numpy(x_q.astype("int16") + 128).to(torch.uint8), X_PARAMS[0], X_PARAMS[1] + 128
    )
    return lambda: torch.nn.functional.hardtanh(conv(x), 0.0, 6.0)


def layer_row(channels: int, size: tuple[int, int]) -> tuple[str, str, dict[str, float], str]:
    rng = np.random.default_rng(channels)
    weight_q = rng.integers(-127, 128, (channels, 1, 3, 3)).astype("int8")
    weight_scale = (rng.random(channels) * 0.02 + 0.005).astype("float32")
    bias = (rng.standard_normal(channels) * 0.1).astype("float32")
    shape = (1, channels, *size)
    mod = qdq_module(
        "conv2d",
        shape,
        weight_q,
        weight_scale,
        X_PARAMS,
        Y_PARAMS,
        bias=bias,
        activation="relu6",
        conv_attrs={"padding": 1, "groups": channels},
    )
    x = rng.integers(-128, 128, shape).astype("int8")
    npu, cpu = npu_and_cpu(mod, x)
    difference = step_difference(npu(), cpu())
    assert difference <= 1, f"npu and TVM's build differ by {difference}"
    timings = {"npu": time_blocks([npu], ARGS.repeat)[0]}
    best_engine, best = "", float("inf")
    for engine in ("x86", "onednn", "fbgemm"):
        if engine not in torch.backends.quantized.supported_engines:
            continue
        torch.backends.quantized.engine = engine
        (ms,) = time_blocks([torch_depthwise(weight_q, weight_scale, bias, x)], ARGS.repeat)
        if ms < best:
            best_engine, best = engine, ms
    timings["torch"] = best
    return "depthwise 3x3 NCHW", "x".join(map(str, shape)), timings, f"torch {best_engine}"


LAYERS = ((144, (56, 56)), (192, (28, 28)), (384, (14, 14)), (960, (7, 7)), (64, (25, 5)))


def main() -> int:
    print(f"threads {ARGS.threads}; ratio = peer ms / npu ms (> 1: the NPU emulator is faster)")
    print(f"| {'work':<24} | {'size':<14} | npu ms | peer ms | ratio | note |")
    print(f"|{'-' * 26}|{'-' * 16}|--------|---------|-------|------|")
    paths = (
        [p for p in sorted(ARGS.models.glob("*.tflite")) if not p.stem.endswith("_open_batch")]
        if ARGS.models
        else [model_path(name) for name in MODELS]
    )
    rows = [lambda p=p: model_row(p) for p in paths if ARGS.only in p.stem]
    if ARGS.only in "depthwise" and not ARGS.models:
        rows += [lambda c=c, s=s: layer_row(c, s) for c, s in LAYERS]
    for row in rows:
        name, size, timings, note = row()
        peer = "litert" if "litert" in timings else "torch"
        print(
            f"| {name:<24} | {size:<14} | {timings['npu']:6.3f} | {timings[peer]:7.3f} | "
            f"{timings[peer] / timings['npu']:5.2f} | {peer}; {note} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
