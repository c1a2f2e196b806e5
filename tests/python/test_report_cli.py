"""The partition report's reasons and the demo command."""

from __future__ import annotations

import example_npu  # noqa: F401
import numpy as np
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


def _conv_module(dtype: str, extra=None):
    """conv2d -> relu [-> extra]: plain convs the depthwise pattern also looks at."""
    from tvm import relax

    x = relax.Var("x", relax.TensorType((1, 4, 6, 6), dtype))
    w = relax.const(np.ones((4, 4, 3, 3)), dtype)
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.relu(bb.emit(relax.op.nn.conv2d(x, w, padding=1))))
            out = bb.emit_output(extra(y) if extra else y)
        bb.emit_func_output(out)
    return bb.get()


def test_report_has_no_reasons_when_everything_is_offloaded():
    """The depthwise pattern refusing a plain conv that the conv pattern offloaded is no reason
    for anything (the YOLO report used to list it)."""
    _, report = partition_with_report(_conv_module("float32"))
    assert not report.cpu_ops and report.reasons == {}, report.table()


def test_report_names_a_reason_for_every_cpu_op_and_only_for_them():
    from tvm import relax

    _, report = partition_with_report(
        _conv_module("float32", lambda y: relax.op.cumsum(relax.op.sin(y), axis=1))
    )
    assert set(report.cpu_ops) == {"relax.sin", "relax.cumsum"}, report.table()
    assert report.reasons == {
        "sin": {"no example_npu pattern for relax.sin"},
        "cumsum": {"no example_npu pattern for relax.cumsum"},
    }


def test_a_cpu_conv_is_explained_by_its_own_check_not_by_another_pattern():
    _, report = partition_with_report(_conv_module("float64"))
    reason = report.cpu_reason("relax.nn.conv2d")
    assert "float64 has no NPU datapath" in reason and "groups=" not in reason


def test_a_rejected_chain_explains_its_root_too():
    """torch.export's PReLU in float64: where's reason is the multiply's dtype."""
    from tvm import relax

    x = relax.Var("x", relax.TensorType((2, 3), "float64"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            zero = relax.const(0.0, "float64")
            scaled = bb.emit(relax.op.multiply(relax.const(np.full((1, 3), 0.1), "float64"), x))
            out = bb.emit_output(relax.op.where(bb.emit(relax.op.greater(x, zero)), x, scaled))
        bb.emit_func_output(out)
    _, report = partition_with_report(bb.get())
    assert "float64 has no NPU datapath" in report.cpu_reason("relax.where")
    assert report.cpu_reason("relax.greater") == "no example_npu pattern for relax.greater"
