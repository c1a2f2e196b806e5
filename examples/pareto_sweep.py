"""Design-space sweep of ResNet-18 on example-npu: the latency/energy Pareto front.

    .venv/bin/python examples/pareto_sweep.py [--scheduler tcp://host:8786] \
        [--csv pareto_sweep.csv] [--plot pareto_sweep.png]

Sweeps L1 size, matrix-engine size, dataflow and power mode (60 configurations) of the NPU that
runs ResNet-18 (224x224, batch norm folded, example_npu.frontend.builtin_models.resnet18) with
``example_npu.sweep``: every configuration is partitioned, compiled and put through the timing
model, nothing is executed. Prints the Pareto front of latency against energy per inference and
what L1 size does to DRAM traffic, and writes the rows as CSV and the front as a PNG. With
``--scheduler`` the configurations run on that Dask cluster instead of local processes.
"""

from __future__ import annotations

import argparse
import time

import example_npu
from example_npu.frontend.builtin_models import resnet18

GRID = {
    "l1_sram_kb": [64, 128, 256, 512, 1024],
    "matrix_engine_dim": [16, 32],
    "dataflow": ["output_stationary", "weight_stationary"],
    "power_mode": ["high_performance", "balanced", "low_power"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheduler", help="a Dask scheduler address; default: local processes")
    parser.add_argument("--csv", default="pareto_sweep.csv")
    parser.add_argument("--plot", default="pareto_sweep.png")
    args = parser.parse_args()
    client = None
    if args.scheduler:
        from distributed import Client

        client = Client(args.scheduler)
    start = time.perf_counter()
    result = example_npu.sweep(resnet18(), GRID, executor=client)
    print(
        f"{len(result)} configurations in {time.perf_counter() - start:.1f} s, "
        f"{len(result.failed)} failed"
    )
    front = result.pareto()
    print(f"\nPareto front (latency vs energy per inference), {len(front)} configurations:")
    print(front.table(result.varying_fields()))
    print("\nL1 size against DRAM traffic (16x16 output-stationary engine, balanced mode):")
    for row in result.valid:
        if (row["matrix_engine_dim"], row["dataflow"], row["power_mode"]) == (
            16,
            "output_stationary",
            "balanced",
        ):
            print(
                f"  L1 {row['l1_sram_kb']:>5} KB: {row['dram_bytes'] / 2**20:7.1f} MiB DRAM, "
                f"{row['latency_us'] / 1e3:6.2f} ms"
            )
    result.to_csv(args.csv)
    print(f"\nwrote {args.csv} and {result.plot(args.plot)}")
    if client is not None:
        client.close()


if __name__ == "__main__":
    main()
