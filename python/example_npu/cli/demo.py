"""``example-npu demo``: the embedded model on the NPU, checked against TVM's CPU build."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import tvm
from tvm import relax

from ..analysis.profile import profile
from ..config import POWER_MODES, NPUConfig
from ..frontend.builtin_models import default_model
from ..partition.report import partition_with_report


def add_parser(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser("demo", help="run the embedded default model on the NPU")
    demo.add_argument("--seed", type=int, default=0, help="seed of the random input image")
    demo.add_argument("--repeat", type=int, default=20, help="timed runs per build")
    demo.add_argument("--power-mode", choices=sorted(POWER_MODES), default="balanced")
    demo.add_argument("--l1-kb", type=int, default=256, help="L1 SRAM size of the NPU")
    demo.add_argument("--trace", help="write a Chrome/Perfetto trace of the NPU run here")
    demo.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    config = NPUConfig(l1_sram_kb=args.l1_kb, power_mode=args.power_mode)
    return run_demo(args.seed, args.repeat, config, args.trace)


def _compile_and_time(mod: tvm.IRModule, inputs: list[np.ndarray], repeat: int):
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    args = [tvm.runtime.tensor(array) for array in inputs]
    out = vm["main"](*args).numpy()
    start = time.perf_counter()
    for _ in range(repeat):
        vm["main"](*args)
    return out, (time.perf_counter() - start) / repeat * 1e3


def run_demo(seed: int, repeat: int, config: NPUConfig, trace: str | None) -> int:
    model = default_model()
    partitioned, report = partition_with_report(model, config=config)
    print("Partition of the default model (small CNN classifier):")
    print(report.table())
    image = np.random.default_rng(seed).standard_normal((1, 3, 32, 32)).astype("float32")
    npu_out, npu_ms = _compile_and_time(partitioned, [image], repeat)
    cpu_out, cpu_ms = _compile_and_time(model, [image], repeat)
    max_diff = float(np.abs(npu_out - cpu_out).max())
    print(f"\nclass probabilities (NPU): {np.array2string(npu_out[0], precision=4)}")
    print(f"predicted class: NPU {int(npu_out.argmax())}, TVM CPU {int(cpu_out.argmax())}")
    print(f"max |NPU - TVM CPU| = {max_diff:.3g}")
    print(f"time per inference: NPU emulator {npu_ms:.2f} ms, TVM LLVM {cpu_ms:.2f} ms")
    if not np.allclose(npu_out, cpu_out, rtol=1e-5, atol=1e-6):
        print("MISMATCH: the NPU result differs from TVM's CPU build", file=sys.stderr)
        return 1
    print("OK: the NPU result matches TVM's CPU build")
    prof = profile(tvm.compile(partitioned, target="llvm"), image)
    print(f"\nNPU profile (L1 {config.l1_sram_kb} KB, L2 {config.l2_cmx_kb} KB):")
    print(prof.table())
    if trace:
        print(f"Chrome trace written to {prof.to_chrome_trace(trace)} (open in ui.perfetto.dev)")
    return 0
