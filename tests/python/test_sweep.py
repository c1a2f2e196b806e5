"""sweep(): configurations estimated locally, on a process pool and on a Dask cluster."""

from __future__ import annotations

import csv
import importlib
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import example_npu
import pytest
import tvm
from example_npu import NPUConfig, sweep
from example_npu.analysis.portable import ModelSnapshot
from example_npu.frontend.builtin_models import resnet18
from example_npu.partition.report import partition_with_report
from npu_models import conv_chain
from test_npu_model import _softmax_module

GRID = {
    "l1_sram_kb": [2, 16, 64],
    "dataflow": ["output_stationary", "weight_stationary"],
    "power_mode": ["balanced", "low_power"],
}


@pytest.fixture(scope="module")
def small_resnet() -> tvm.IRModule:
    return resnet18(image=32, width=8, classes=10)


@pytest.fixture(scope="module")
def local_result(small_resnet) -> example_npu.SweepResult:
    return sweep(small_resnet, GRID)


def test_rows_are_the_estimates_of_their_configs(small_resnet, local_result):
    assert len(local_result) == 12
    for row in local_result.valid:
        config = NPUConfig(**{f: row[f] for f in GRID})
        prof = example_npu.estimate(small_resnet, config)
        assert row["latency_us"] == prof.latency_us
        assert row["energy_uj"] == prof.energy_uj
        assert row["dram_bytes"] == prof.bytes_moved["DRAM"]
        assert row["matrix_busy_cycles"] == prof.busy_cycles["matrix"]
        _, report = partition_with_report(small_resnet, config)
        assert row["npu_ops"] == sum(report.npu_ops.values()) > 0
        assert row["cpu_ops"] == sum(report.cpu_ops.values())


def test_invalid_configs_become_rows_with_the_reason(small_resnet, local_result):
    failed = local_result.failed
    assert {row["l1_sram_kb"] for row in failed} == {2}
    assert all("smaller than one float32 32x32 tile" in row["error"] for row in failed)
    result = sweep(
        small_resnet,
        [{"power_mode": "turbo"}, {"l1_kb": 64}, NPUConfig(matrix_engine_dim=32)],
        executor=ThreadPoolExecutor(2),
    )
    turbo, typo, ok = result.rows
    assert "power_mode 'turbo'" in turbo["error"] and turbo["latency_us"] is None
    assert "unknown NPUConfig fields: ['l1_kb']" in typo["error"]
    assert ok["error"] == "" and ok["matrix_engine_dim"] == 32


def test_ops_an_l1_cannot_hold_fall_back_with_the_reason_and_leave_the_front():
    mod = _softmax_module(4096)  # a 16 KB row: fits a 64 KB L1, not a 16 KB one
    result = sweep(mod, {"l1_sram_kb": [16, 64]})
    small, big = result.rows
    assert small["npu_ops"] == 0 and small["cpu_ops"] == 1 and big["npu_ops"] == 1
    assert "does not fit the 16384-byte L1" in small["cpu_fallback"]
    with pytest.raises(ValueError, match="no NPU subgraph"):
        example_npu.estimate(mod, NPUConfig(l1_sram_kb=16))
    assert small["error"].startswith("ValueError: the model has no NPU subgraph")
    assert [row["l1_sram_kb"] for row in result.pareto().rows] == [64]


def test_pareto_front_is_the_set_of_undominated_rows(local_result):
    valid = [
        r
        for r in local_result.valid
        if r["npu_ops"] == max(v["npu_ops"] for v in local_result.valid)
    ]

    def dominated(row):
        return any(
            o["latency_us"] <= row["latency_us"]
            and o["energy_uj"] <= row["energy_uj"]
            and (o["latency_us"], o["energy_uj"]) != (row["latency_us"], row["energy_uj"])
            for o in valid
        )

    expected = sorted((r for r in valid if not dominated(r)), key=lambda r: r["latency_us"])
    front = local_result.pareto().rows
    assert [(r["latency_us"], r["energy_uj"]) for r in front] == [
        (r["latency_us"], r["energy_uj"]) for r in expected
    ]
    assert {r["power_mode"] for r in front} == {"balanced", "low_power"}


def test_csv_and_plot(local_result, tmp_path):
    text = local_result.to_csv(tmp_path / "sweep.csv")
    rows = list(csv.DictReader((tmp_path / "sweep.csv").open()))
    assert text == (tmp_path / "sweep.csv").read_text()
    assert len(rows) == len(local_result)
    assert [r["l1_sram_kb"] for r in rows] == [str(r["l1_sram_kb"]) for r in local_result.rows]
    assert [float(r["latency_us"]) for r in rows if r["latency_us"]] == [
        r["latency_us"] for r in local_result.valid
    ]
    png = local_result.plot(tmp_path / "front.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_process_pool_equals_one_process(small_resnet, local_result, monkeypatch):
    """The default local pool: spawned workers rebuild the model from its snapshot."""
    # example_npu.sweep is the function; the module holds the threshold.
    monkeypatch.setattr(
        importlib.import_module("example_npu.analysis.sweep"), "_POOL_PAYS_OFF_SECONDS", 0.0
    )
    assert sweep(small_resnet, GRID).rows == local_result.rows


def test_dask_local_cluster_with_two_worker_processes_equals_the_local_run(
    small_resnet, local_result
):
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        result = sweep(small_resnet, GRID, executor=client)
        workers = client.run(os.getpid)
    assert len(set(workers.values())) == 2 and os.getpid() not in workers.values()
    assert result.rows == local_result.rows


def test_snapshot_rebuilds_an_equal_module(small_resnet):
    for mod in (small_resnet, conv_chain(8, 8, count=2)):
        snapshot = ModelSnapshot(mod)
        tvm.ir.assert_structural_equal(snapshot.load(), mod)
        assert ModelSnapshot(snapshot.load()).digest == snapshot.digest


def test_cli_sweep_writes_csv_and_plot(tmp_path):
    cli = Path(sys.executable).parent / "example-npu"
    done = subprocess.run(
        [
            str(cli),
            "sweep",
            "default",
            "--l1-kb",
            "2,64",
            "--power-mode",
            "balanced,low_power",
            "--csv",
            str(tmp_path / "out.csv"),
            "--plot",
            str(tmp_path / "out.png"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "4 configurations" in done.stdout and "2 failed" in done.stdout
    assert "Pareto front" in done.stdout
    rows = list(csv.DictReader((tmp_path / "out.csv").open()))
    assert [(r["l1_sram_kb"], r["power_mode"]) for r in rows] == [
        ("2", "balanced"),
        ("2", "low_power"),
        ("64", "balanced"),
        ("64", "low_power"),
    ]
    assert (tmp_path / "out.png").read_bytes()[:4] == b"\x89PNG"
