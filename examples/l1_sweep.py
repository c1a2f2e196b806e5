"""Sweep the L1 SRAM size on a convolution model and plot cycles and DRAM traffic.

    .venv/bin/python examples/l1_sweep.py [--out l1_sweep.png]

Smaller L1 means smaller tiles: more halo re-reads and weight reloads, so more DRAM traffic and,
once DMA cannot hide behind compute, more cycles. Prints a table and writes a PNG.
"""

from __future__ import annotations

import argparse

import example_npu
import matplotlib
import numpy as np
import tvm
from example_npu import NPUConfig
from tvm import relax

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

L1_SIZES_KB = (32, 64, 128, 256, 512, 1024)


def conv_model() -> tvm.IRModule:
    """Two 3x3 convolutions with ReLU, ResNet-stage sized (1x64x56x56)."""
    rng = np.random.default_rng(0)
    x = relax.Var("x", relax.TensorType((1, 64, 56, 56), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = x
            for _ in range(2):
                w = relax.const((rng.standard_normal((64, 64, 3, 3)) * 0.05).astype("float32"))
                y = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(y, w, padding=(1, 1, 1, 1))))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return bb.get()


def sweep() -> list[tuple[int, int, int]]:
    model = conv_model()
    image = np.random.default_rng(1).standard_normal((1, 64, 56, 56)).astype("float32")
    rows = []
    for kb in L1_SIZES_KB:
        mod = example_npu.partition_for_npu(model, config=NPUConfig(l1_sram_kb=kb))
        prof = example_npu.profile(tvm.compile(mod, target="llvm"), image)
        rows.append((kb, prof.total_cycles, prof.bytes_moved["DRAM"]))
        dram = prof.bytes_moved["DRAM"]
        print(f"L1 {kb:>5} KB: {prof.total_cycles:>10} cycles, {dram:>10} DRAM B")
    return rows


def plot(rows: list[tuple[int, int, int]], path: str) -> None:
    sizes = [row[0] for row in rows]
    fig, cycles_axis = plt.subplots(figsize=(7, 4))
    cycles_axis.plot(sizes, [row[1] / 1e6 for row in rows], "o-", color="tab:blue")
    cycles_axis.set_xscale("log", base=2)
    cycles_axis.set_xlabel("L1 SRAM (KB)")
    cycles_axis.set_ylabel("cycles (millions)", color="tab:blue")
    traffic_axis = cycles_axis.twinx()
    traffic_axis.plot(sizes, [row[2] / 2**20 for row in rows], "s--", color="tab:red")
    traffic_axis.set_ylabel("DRAM traffic (MiB)", color="tab:red")
    cycles_axis.set_title("2x conv3x3 64ch 56x56 on example-npu: L1 size sweep")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="l1_sweep.png")
    plot(sweep(), parser.parse_args().out)


if __name__ == "__main__":
    main()
