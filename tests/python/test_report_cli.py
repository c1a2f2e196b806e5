"""The partition report's reasons and the demo command."""

from __future__ import annotations

import example_npu  # noqa: F401
from example_npu.cli import main
from example_npu.partition.report import partition_with_report
from test_end_to_end import CpuBetweenRegions, Float64Matmul


def test_report_names_the_check_that_kept_an_op_on_the_cpu():
    _, report = partition_with_report(Float64Matmul)
    assert report.npu_functions == []
    assert report.cpu_ops == {"relax.matmul": 1}
    assert "dtype float64 has no NPU datapath" in report.cpu_reason("relax.matmul")


def test_report_counts_ops_on_each_side():
    _, report = partition_with_report(CpuBetweenRegions)
    assert len(report.npu_functions) == 2
    assert report.npu_ops == {"relax.nn.relu": 2, "relax.matmul": 1}
    assert report.cpu_ops == {"relax.sin": 1}
    assert report.cpu_reason("relax.sin") == "no example_npu pattern for relax.sin"
    assert "CPU  relax.sin" in report.table()


def test_demo_runs_default_model_and_matches_cpu(capsys):
    assert main(["demo", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "OK: the NPU result matches TVM's CPU build" in out
    # The whole classifier, flatten included, is one NPU function.
    assert "NPU functions: 1" in out and "NPU  relax.reshape" in out
    assert "  CPU  " not in out
