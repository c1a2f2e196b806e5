"""Partition + compile time of fp32 ViT-B/16 and BERT-base, step by step.

Each model is built with random weights (the architectures are written out in
transformer_blocks.py: the project does not depend on torchvision or transformers),
imported with torch.export + TVM's frontend (not timed), then timed through
``partition_for_npu``'s steps (canonicalize, FuseOpsByPattern, MergeCompositeFunctions,
RunCodegen: the NPU graph and its C++ compile) and ``tvm.compile``.
Wall and CPU seconds are printed: on a busy machine the CPU seconds are the comparable figure.

    python benchmarks/bench_compile.py [--only SUBSTRING] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("EXAMPLE_NPU_NUM_THREADS", "1")
os.environ.setdefault("TVM_NUM_THREADS", "1")

import example_npu  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import tvm  # noqa: E402
from example_npu.partition import pipeline  # noqa: E402
from torch import nn  # noqa: E402
from tvm.relax.frontend.torch import from_exported_program  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from transformer_blocks import BertBase, ViT  # noqa: E402


def models() -> dict[str, Callable[[], tuple[nn.Module, list[np.ndarray]]]]:
    rng = np.random.default_rng(0)

    def vit():
        return ViT(dim=768, heads=12), [rng.standard_normal((1, 3, 224, 224)).astype("float32")]

    def bert():
        ids = rng.integers(0, 30522, size=(1, 128), dtype=np.int64)
        return BertBase(), [ids, np.ones((1, 128), dtype=np.int64)]

    return {"ViT-B/16": vit, "BERT-base (128 tokens)": bert}


def timed_steps(mod: tvm.IRModule) -> dict[str, tuple[float, float]]:
    """Step name -> (wall, CPU) seconds of one partition_for_npu + tvm.compile."""
    times: dict[str, tuple[float, float]] = {}
    run_step = pipeline._run_step

    def timing(name, step, module):
        wall, cpu = time.perf_counter(), time.process_time()
        result = run_step(name, step, module)
        times[name] = (time.perf_counter() - wall, time.process_time() - cpu)
        return result

    pipeline._run_step = timing
    try:
        partitioned = example_npu.partition_for_npu(mod)
    finally:
        pipeline._run_step = run_step
    wall, cpu = time.perf_counter(), time.process_time()
    tvm.compile(partitioned, target="llvm")
    times["tvm.compile"] = (time.perf_counter() - wall, time.process_time() - cpu)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="run only models whose name contains this")
    parser.add_argument("--repeat", type=int, default=2, help="timed partitions per model")
    args = parser.parse_args()
    torch.manual_seed(0)
    for name, build in models().items():
        if args.only not in name:
            continue
        model, inputs = build()
        with torch.no_grad():
            exported = torch.export.export(model.eval(), tuple(map(torch.from_numpy, inputs)))
        mod = from_exported_program(exported, keep_params_as_input=False)
        for _ in range(args.repeat):
            steps = timed_steps(mod)
            wall = sum(w for w, _ in steps.values())
            cpu = sum(c for _, c in steps.values())
            detail = ", ".join(f"{step} {c:.2f}" for step, (_, c) in steps.items())
            print(f"{name}: partition + compile {wall:.2f} s wall, {cpu:.2f} s CPU ({detail})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
