"""Per-op speed: the NPU emulator against TVM's LLVM build and PyTorch on the CPU.

Each case builds a one-op Relax module (weights are function parameters, so every build sees the
same inputs) and runs it three ways:

  npu    example_npu.partition_for_npu(mod), then tvm.compile(target="llvm")
  tvm    tvm.compile(mod, target="llvm") unpartitioned: TVM's own LLVM build
  torch  the torch.nn.functional equivalent on the same numpy inputs (optional)

Outputs are checked against each other before anything is timed. Each timing is the median of
several calls after a warm-up, each library timed in its own blocks, over several rounds (the best
round counts). The script exits 1 when the NPU is slower than TVM's LLVM build on any op
(tvm/npu < 1.0), unless --no-fail is given.

    python benchmarks/bench_ops.py [--repeat N] [--only SUBSTRING] [--no-fail]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import example_npu
import numpy as np
import tvm
from tvm import relax

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # torch is optional: its column is skipped
    torch = None
    F = None

RTOL = 1e-4
ATOL = 1e-4


@dataclass
class Case:
    """One op at one size: `build` emits the op on the function parameters."""

    name: str
    size: str
    shapes: list[tuple[int, ...]]
    build: Callable[..., relax.Expr]
    # torch equivalent taking torch tensors and returning a numpy-comparable tensor; None: no torch
    torch_fn: Callable[..., object] | None = None
    # Inputs that must stay positive (batch_norm variance).
    positive: tuple[int, ...] = ()


def _nhwc(fn):
    """Wraps an NCHW torch op for NHWC data: channels_last memory, output back in NHWC order."""

    def run(x, *rest):
        x = x.permute(0, 3, 1, 2)  # a channels_last view of the same NHWC buffer
        return fn(x, *rest).permute(0, 2, 3, 1)

    return run


def _hwio(w):
    return w.permute(3, 2, 0, 1)  # HWIO -> OIHW view


def cases() -> list[Case]:
    nn = relax.op.nn
    op = relax.op
    return [
        Case(
            "conv2d 3x3 NCHW",
            "1x64x56x56 -> 64",
            [(1, 64, 56, 56), (64, 64, 3, 3)],
            lambda x, w: nn.conv2d(x, w, padding=(1, 1)),
            lambda x, w: F.conv2d(x, w, padding=1),
        ),
        Case(
            "conv2d 3x3 NHWC/HWIO",
            "1x56x56x64 -> 64",
            [(1, 56, 56, 64), (3, 3, 64, 64)],
            lambda x, w: nn.conv2d(x, w, padding=(1, 1), data_layout="NHWC", kernel_layout="HWIO"),
            _nhwc(lambda x, w: F.conv2d(x, _hwio(w), padding=1)),
        ),
        Case(
            "conv2d 1x1 NCHW",
            "1x256x56x56 -> 64",
            [(1, 256, 56, 56), (64, 256, 1, 1)],
            lambda x, w: nn.conv2d(x, w),
            lambda x, w: F.conv2d(x, w),
        ),
        Case(
            "depthwise 3x3 NCHW",
            "1x128x56x56 g=128",
            [(1, 128, 56, 56), (128, 1, 3, 3)],
            lambda x, w: nn.conv2d(x, w, padding=(1, 1), groups=128),
            lambda x, w: F.conv2d(x, w, padding=1, groups=128),
        ),
        Case(
            "depthwise 3x3 NHWC/HWIO",
            "1x56x56x128 g=128",
            [(1, 56, 56, 128), (3, 3, 1, 128)],
            lambda x, w: nn.conv2d(
                x, w, padding=(1, 1), groups=128, data_layout="NHWC", kernel_layout="HWIO"
            ),
            _nhwc(lambda x, w: F.conv2d(x, _hwio(w), padding=1, groups=128)),
        ),
        Case(
            "matmul",
            "1024x1024x1024",
            [(1024, 1024), (1024, 1024)],
            op.matmul,
            torch.matmul if torch else None,
        ),
        Case(
            "batch matmul",
            "12x128x64 @ 12x64x128",
            [(12, 128, 64), (12, 64, 128)],
            op.matmul,
            torch.matmul if torch else None,
        ),
        Case(
            "batch matmul",
            "16x256x256 @ 16x256x256",
            [(16, 256, 256), (16, 256, 256)],
            op.matmul,
            torch.matmul if torch else None,
        ),
        Case(
            "dense (Linear)",
            "128x768 -> 3072",
            [(128, 768), (3072, 768)],
            lambda x, w: op.matmul(x, op.permute_dims(w)),
            lambda x, w: F.linear(x, w),
        ),
        Case(
            "max_pool2d 3x3 s2",
            "1x64x112x112",
            [(1, 64, 112, 112)],
            lambda x: nn.max_pool2d(x, pool_size=(3, 3), strides=(2, 2), padding=(1, 1)),
            lambda x: F.max_pool2d(x, 3, stride=2, padding=1),
        ),
        Case(
            "avg_pool2d 3x3 s2",
            "1x64x112x112",
            [(1, 64, 112, 112)],
            lambda x: nn.avg_pool2d(x, pool_size=(3, 3), strides=(2, 2), padding=(1, 1)),
            lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
        ),
        Case(
            "softmax axis=-1",
            "64x1000",
            [(64, 1000)],
            lambda x: nn.softmax(x, axis=-1),
            lambda x: F.softmax(x, dim=-1),
        ),
        Case(
            "softmax axis=-1",
            "8x12x128x128",
            [(8, 12, 128, 128)],
            lambda x: nn.softmax(x, axis=-1),
            lambda x: F.softmax(x, dim=-1),
        ),
        Case("relu", "1x64x56x56", [(1, 64, 56, 56)], nn.relu, F.relu if F else None),
        Case("gelu", "1x64x56x56", [(1, 64, 56, 56)], nn.gelu, F.gelu if F else None),
        Case(
            "sigmoid", "1x64x56x56", [(1, 64, 56, 56)], op.sigmoid, torch.sigmoid if torch else None
        ),
        Case("tanh", "1x64x56x56", [(1, 64, 56, 56)], op.tanh, torch.tanh if torch else None),
        Case(
            "add (broadcast)",
            "1x64x56x56 + 1x64x1x1",
            [(1, 64, 56, 56), (1, 64, 1, 1)],
            op.add,
            torch.add if torch else None,
        ),
        Case(
            "batch_norm (inference)",
            "1x64x56x56",
            [(1, 64, 56, 56), (64,), (64,), (64,), (64,)],
            lambda x, g, b, m, v: relax.TupleGetItem(
                nn.batch_norm(x, g, b, m, v, axis=1, epsilon=1e-5, training=False), 0
            ),
            lambda x, g, b, m, v: F.batch_norm(x, m, v, g, b, training=False, eps=1e-5),
            positive=(4,),
        ),
    ]


def build_module(case: Case) -> tvm.IRModule:
    bb = relax.BlockBuilder()
    params = [relax.Var(f"p{i}", relax.TensorType(s, "float32")) for i, s in enumerate(case.shapes)]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(case.build(*params))
        bb.emit_func_output(out)
    return bb.get()


def make_inputs(case: Case, rng: np.random.Generator) -> list[np.ndarray]:
    inputs = []
    for i, shape in enumerate(case.shapes):
        lo = 0.5 if i in case.positive else -1.0
        inputs.append(rng.uniform(lo, 1.0, size=shape).astype("float32"))
    return inputs


def time_blocks(
    fns: list[Callable[[], object]], repeat: int, budget_s: float = 3.0, rounds: int = 5
):
    """Wall time (ms) of each fn: the best round's median, timing each fn in its own blocks.

    Each round times every fn in its own block (a warm-up call, then back-to-back calls), after a
    short pause. Blocks keep one library's spinning worker threads (TVM's, PyTorch's OpenMP pool,
    ours) from stealing the cores from the next library's call, which alternating single calls
    would do. Every library gets the same rounds, and the best round's median discards rounds
    slowed by other load on a shared machine. Long ops get fewer repeats, bounded by budget_s for
    the whole case.
    """
    first = []
    for fn in fns:
        fn()
        start = time.perf_counter()
        fn()
        first.append(time.perf_counter() - start)
    per_block = max(2, min(repeat, math.ceil(budget_s / rounds / max(sum(first), 1e-9))))
    best = [math.inf for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            time.sleep(0.05)  # let the previous block's worker threads go idle
            fn()
            samples = []
            for _ in range(per_block):
                start = time.perf_counter()
                fn()
                samples.append(time.perf_counter() - start)
            best[i] = min(best[i], statistics.median(samples) * 1e3)
    return best


def vm_runner(mod: tvm.IRModule, inputs: list[np.ndarray]) -> Callable[[], object]:
    ex = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    args = [tvm.runtime.tensor(a) for a in inputs]
    main = vm["main"]
    return lambda: main(*args)


def to_numpy(result: object) -> np.ndarray:
    if isinstance(result, tvm.runtime.Tensor):
        return result.numpy()
    return to_numpy(result[0])  # batch_norm's (out, mean, var) tuple


def run_case(case: Case, repeat: int, rng: np.random.Generator) -> dict:
    mod = build_module(case)
    inputs = make_inputs(case, rng)
    offloaded = example_npu.partition_for_npu(mod)
    assert "call_dps_packed" in offloaded["main"].script(), f"{case.name}: not offloaded"
    npu = vm_runner(offloaded, inputs)
    ref = vm_runner(mod, inputs)
    expected = to_numpy(ref())
    np.testing.assert_allclose(to_numpy(npu()), expected, rtol=RTOL, atol=ATOL, err_msg=case.name)
    fns = {"npu": npu, "tvm": ref}
    if torch is not None and case.torch_fn is not None:
        tensors = [torch.from_numpy(a) for a in inputs]
        with torch.inference_mode():
            got = case.torch_fn(*tensors).contiguous().numpy()
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL, err_msg=case.name)

        def torch_call():
            with torch.inference_mode():
                return case.torch_fn(*tensors)

        fns["torch"] = torch_call
    times = time_blocks(list(fns.values()), repeat)
    row = {"torch": None, **dict(zip(fns, times, strict=True))}
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repeat", type=int, default=100, help="timed calls per op and round (at most)"
    )
    parser.add_argument("--only", default="", help="run only cases whose name contains this")
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even if the NPU is slower")
    args = parser.parse_args(argv)

    if torch is None:
        print("note: torch is not installed; the torch column is skipped")
    else:
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"tvm {tvm.__version__}, numpy {np.__version__}")
    header = (
        f"| {'op':<24} | {'size':<24} | {'npu ms':>8} | {'tvm ms':>8} | {'torch ms':>8} "
        f"| {'tvm/npu':>7} | {'torch/npu':>9} |"
    )
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    rng = np.random.default_rng(0)
    slower = []
    for case in cases():
        if args.only and args.only not in case.name:
            continue
        row = run_case(case, args.repeat, rng)
        ratio = row["tvm"] / row["npu"]
        if ratio < 1.0:
            slower.append(f"{case.name} {case.size}")
        t = row["torch"]
        t_ms = f"{t:8.3f}" if t is not None else f"{'-':>8}"
        t_ratio = f"{t / row['npu']:9.2f}" if t is not None else f"{'-':>9}"
        print(
            f"| {case.name:<24} | {case.size:<24} | {row['npu']:8.3f} | {row['tvm']:8.3f} "
            f"| {t_ms} | {ratio:7.2f} | {t_ratio} |",
            flush=True,
        )
    if slower:
        print("NPU slower than TVM's LLVM build on: " + "; ".join(slower))
        return 0 if args.no_fail else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
