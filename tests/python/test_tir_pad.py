"""The ONNX importer's reflect / edge / wrap ``Pad`` (a ``call_tir`` of topi's padding) becomes
``nn.pad`` and runs on the NPU, bit-exact to onnxruntime; a ``call_tir`` that only looks like a
pad stays as it is."""

from __future__ import annotations

import example_npu  # noqa: F401  # registers patterns, codegen and runtime
import numpy as np
import onnx
import onnxruntime
import pytest
import tvm
from example_npu.frontend.canonicalize import canonicalize
from example_npu.frontend.tir_pad import pad_of_call_tir
from example_npu.partition.report import partition_with_report
from onnx import TensorProto, helper
from test_zoo_models import run
from tvm import relax, topi
from tvm.relax.frontend.onnx import from_onnx

SHAPE = (1, 3, 5, 6)


def _pad_model(mode: str, pads: list[int]) -> onnx.ModelProto:
    """x -> Relu -> Pad(mode, pads) -> Relu at opset 19 (wrap needs it)."""
    out_shape = [s + b + a for s, b, a in zip(SHAPE, pads[:4], pads[4:], strict=True)]
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Pad", ["r", "pads"], ["p"], mode=mode),
            helper.make_node("Relu", ["p"], ["y"]),
        ],
        "pad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        [helper.make_tensor("pads", TensorProto.INT64, [8], pads)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


@pytest.mark.parametrize("mode", ["reflect", "edge", "wrap"])
@pytest.mark.parametrize(
    "pads", [[0, 0, 1, 1, 0, 0, 1, 1], [0, 0, 0, 3, 0, 0, 2, 1], [0, 1, 2, 0, 0, 0, 1, 4]]
)
def test_onnx_pad_runs_on_the_npu_exactly(mode, pads):
    model = _pad_model(mode, pads)
    x = np.random.default_rng(3).standard_normal(SHAPE).astype("float32")
    (reference,) = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    ).run(None, {"x": x})
    mod = canonicalize(from_onnx(model))
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops and len(report.npu_functions) == 1, report.table()
    assert report.npu_ops["relax.nn.pad"] == 1, report.table()
    np.testing.assert_array_equal(run(partitioned, x), reference)


def _call_tir_module(compute, name: str = "pad", shape: tuple[int, ...] = SHAPE) -> tvm.IRModule:
    x = relax.Var("x", relax.TensorType(shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit_te(compute, x, primfunc_name_hint=name))
        bb.emit_func_output(out)
    return bb.get()


def _prim_func(mod: tvm.IRModule) -> tvm.tirx.PrimFunc:
    return next(f for gv, f in mod.functions.items() if gv.name_hint != "main")


def test_a_padding_that_is_not_topis_stays_a_call_tir():
    """Reflect with the edge repeated ("SYMMETRIC") has the same shapes but is another copy."""
    mod = _call_tir_module(lambda x: topi.nn.mirror_pad(x, [0, 0, 1, 1], [0, 0, 1, 1], "SYMMETRIC"))
    assert pad_of_call_tir(_prim_func(mod), SHAPE, "float32", [1, 3, 7, 8]) is None
    _, report = partition_with_report(canonicalize(mod))
    assert list(report.cpu_ops) == ["relax.call_tir(pad)"], report.table()
    assert "padding" in report.cpu_reason("relax.call_tir(pad)")


def test_the_split_of_each_axis_is_recovered():
    mod = _call_tir_module(lambda x: topi.nn.replicate_pad(x, [0, 2, 0, 1], [1, 0, 3, 1]))
    found = pad_of_call_tir(_prim_func(mod), SHAPE, "float32", [2, 5, 8, 8])
    assert found == ("replicate", [0, 1, 2, 0, 0, 3, 1, 1])


def test_a_wide_pad_is_read_in_one_pass():
    """The split comes from the store's index expressions, not from trying the 41 x 41 splits
    (which used to leave such a pad as a call_tir)."""
    mod = _call_tir_module(lambda x: topi.nn.replicate_pad(x, [0, 0, 20, 19], [0, 0, 20, 21]))
    found = pad_of_call_tir(_prim_func(mod), SHAPE, "float32", [1, 3, 45, 46])
    assert found == ("replicate", [0, 0, 0, 0, 20, 20, 19, 21])


def test_a_pad_with_too_many_splits_to_try_is_left_alone():
    """Extent-1 axes read index 0 everywhere, so each keeps every split as a candidate."""
    shape = (1, 1, 1, 1)
    mod = _call_tir_module(
        lambda x: topi.nn.replicate_pad(x, [3, 3, 3, 3], [3, 3, 3, 3]), shape=shape
    )
    assert pad_of_call_tir(_prim_func(mod), shape, "float32", [7, 7, 7, 7]) is None
