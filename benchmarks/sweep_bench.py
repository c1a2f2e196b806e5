"""Design-space sweep speed: 100 NPU configurations of ResNet-18 (224x224, 1.8 GMACs).

    .venv/bin/python benchmarks/sweep_bench.py [--rounds 2] [--csv sweep.csv] [--plot sweep.png]

Times ``example_npu.sweep`` on the local default (one process, then a process pool once the
first configuration shows it pays), and on a Dask ``LocalCluster`` with one and with two worker
processes (one thread each), alternating the two in every round so both see the same machine
load. The Dask times include what a fresh cluster pays in a sweep (the workers import TVM,
receive the model and parse it; each round restarts them), not starting the cluster. The goal:
under 60 s locally on a 2-core machine, and close to 2x from one worker to two. Every run must
return the same rows.
"""

from __future__ import annotations

import argparse
import os
import time

import example_npu
from example_npu.frontend.builtin_models import resnet18

GRID = {
    "l1_sram_kb": [64, 128, 256, 512, 1024],
    "matrix_engine_dim": [8, 16, 24, 32, 64],
    "dataflow": ["output_stationary", "weight_stationary"],
    "power_mode": ["balanced", "low_power"],
}


def timed(label: str, run) -> tuple[float, example_npu.SweepResult]:
    start = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - start
    print(
        f"{label:<28} {seconds:7.1f} s  ({len(result)} configurations, "
        f"{len(result.failed)} failed)",
        flush=True,
    )
    return seconds, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--csv")
    parser.add_argument("--plot")
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    model = resnet18()
    print(
        f"ResNet-18 224x224, {len(example_npu.config_grid(**GRID))} configurations, "
        f"{os.cpu_count()} CPUs"
    )
    local_seconds, reference = timed(
        "local (default executor)", lambda: example_npu.sweep(model, GRID)
    )
    times: dict[int, list[float]] = {1: [], 2: []}
    clusters = {
        workers: LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        )
        for workers in (1, 2)
    }
    try:
        for _ in range(args.rounds):
            for workers, cluster in clusters.items():
                with Client(cluster) as client:
                    seconds, result = timed(
                        f"dask, {workers} worker process{'es' if workers > 1 else ''}",
                        lambda client=client: example_npu.sweep(model, GRID, executor=client),
                    )
                    client.restart()  # the next round parses the model again
                assert result.rows == reference.rows, "a Dask run differs from the local run"
                times[workers].append(seconds)
    finally:
        for cluster in clusters.values():
            cluster.close()
    best = {workers: min(values) for workers, values in times.items()}
    print(
        f"\nlocal: {local_seconds:.1f} s for {len(reference)} configurations "
        f"({'under' if local_seconds < 60 else 'OVER'} the 60 s goal)"
    )
    print(
        f"dask: 1 worker {best[1]:.1f} s, 2 workers {best[2]:.1f} s, "
        f"speed-up {best[1] / best[2]:.2f}x (best of {args.rounds} rounds each)"
    )
    front = reference.pareto()
    print(f"\nPareto front, {len(front)} of {len(reference.valid)} valid configurations:")
    print(front.table(reference.varying_fields()))
    if args.csv:
        reference.to_csv(args.csv)
    if args.plot:
        reference.plot(args.plot)


if __name__ == "__main__":
    main()
