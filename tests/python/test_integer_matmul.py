"""onnxruntime's ``MatMulInteger`` on the NPU (frontend/integer_matmul.py,
partition/checks/integer_matmul.py): ONNX graphs written as ``quantize_dynamic`` writes them
(``DynamicQuantizeLinear`` -> ``MatMulInteger`` -> ``Cast`` -> ``Mul``), and with a constant zero
point. The integer matmul runs on the NPU with its run-time zero point; every output equals TVM's
CPU build of the same graph bit for bit, and onnxruntime's. What the NPU cannot sum exactly stays
on the CPU with its reason."""

from __future__ import annotations

import example_npu
import numpy as np
import onnx
import onnxruntime
import onnxruntime_int8
import pytest
import tvm
from example_npu.partition.checks.integer_matmul import MAX_DEPTH
from example_npu.partition.report import partition_with_report
from onnx import TensorProto, helper, numpy_helper
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

RNG = np.random.default_rng(11)


def dynamic_model(shape: tuple[int, ...], units: int, weight_zero_point: int = 0) -> bytes:
    """y = float(MatMulInteger(DynamicQuantizeLinear(x), W)) * (x_scale * w_scale), int8 W."""
    weight = RNG.integers(-127, 128, (shape[-1], units)).astype(np.int8)
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "scale", "zp"]),
        helper.make_node("MatMulInteger", ["q", "w", "zp", "w_zp"], ["sums"]),
        helper.make_node("Cast", ["sums"], ["sums_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["scale", "w_scale"], ["product_scale"]),
        helper.make_node("Mul", ["sums_f", "product_scale"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "dynamic_matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [*shape[:-1], units])],
        [
            numpy_helper.from_array(weight, "w"),
            numpy_helper.from_array(np.array(weight_zero_point, np.int8), "w_zp"),
            numpy_helper.from_array(np.array(0.0123, np.float32), "w_scale"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def static_zero_point_model(rows: int, depth: int, units: int, zero_point: bool = True) -> bytes:
    """float(MatMulInteger(x_int8, W, a_zero_point = -7)): a constant zero point, int8 input
    (without ``zero_point``: none given, ONNX's default 0)."""
    weight = RNG.integers(-128, 128, (depth, units)).astype(np.int8)
    graph = helper.make_graph(
        [
            helper.make_node(
                "MatMulInteger", ["x", "w", "x_zp"][: 3 if zero_point else 2], ["sums"]
            ),
            helper.make_node("Cast", ["sums"], ["y"], to=TensorProto.FLOAT),
        ],
        "static_zero_point",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [rows, depth])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, units])],
        [
            numpy_helper.from_array(weight, "w"),
            numpy_helper.from_array(np.array(-7, np.int8), "x_zp"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def npu_tvm_ort(model: bytes, inputs: list[np.ndarray]):
    """(the partition report, and per input: the NPU's, TVM's CPU build's and onnxruntime's y)."""
    mod = from_onnx(onnx.load_from_string(model))
    partitioned, report = partition_with_report(mod)
    machines = [relax.VirtualMachine(tvm.compile(m, "llvm"), tvm.cpu()) for m in (partitioned, mod)]
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    results = []
    for x in inputs:
        npu, cpu = (vm["main"](tvm.runtime.tensor(x)).numpy() for vm in machines)
        results.append((npu, cpu, session.run(None, {name: x})[0]))
    return report, results


def test_quantize_dynamic_matmul_runs_on_the_npu_bit_for_bit():
    # Zero points of 0 (all positive), 255 (all negative) and in between: one program each.
    inputs = [
        RNG.standard_normal((1, 24, 96)).astype(np.float32) * 3,
        RNG.uniform(0.5, 4.0, (1, 24, 96)).astype(np.float32),
        -RNG.uniform(0.5, 4.0, (1, 24, 96)).astype(np.float32),
        RNG.standard_normal((1, 24, 96)).astype(np.float32) * 3 + 1,
    ]
    report, results = npu_tvm_ort(dynamic_model((1, 24, 96), 48), inputs)
    table = report.table()
    assert "relax.matmul" not in report.cpu_ops and report.npu_ops["relax.matmul"] == 1, table
    # Only DynamicQuantizeLinear's run-time quantize and uint8 zero point stay on the CPU.
    assert set(report.cpu_ops) == {"relax.quantize", "relax.astype"}, table
    for npu, cpu, ort in results:
        np.testing.assert_array_equal(npu, cpu)
        if onnxruntime_int8.int8_kernels_exact():  # its uint8 x int8 sums saturate elsewhere
            np.testing.assert_allclose(npu, ort, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("zero_point", [True, False], ids=["zero_point", "none"])
def test_constant_zero_point_and_int8_activations(zero_point):
    x = [RNG.integers(-128, 128, (5, 300), dtype=np.int8) for _ in range(2)]
    report, results = npu_tvm_ort(static_zero_point_model(5, 300, 20, zero_point), x)
    assert not report.cpu_ops, report.table()
    for npu, cpu, ort in results:
        np.testing.assert_array_equal(npu, cpu)
        np.testing.assert_array_equal(npu, ort)


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        # A weight zero point moves W - zp outside int8: the int32 matmul stays on the CPU.
        (lambda: dynamic_model((1, 4, 32), 8, weight_zero_point=90), "int32 has no NPU datapath"),
        # Sums that could pass int32, where TVM's wraps and the NPU's would not.
        (lambda: dynamic_model((1, 1, MAX_DEPTH + 1), 1), "can leave int32"),
    ],
    ids=["weight_zero_point", "depth"],
)
def test_what_the_npu_cannot_sum_exactly_stays_on_the_cpu(model, reason):
    shape = (1, 4, 32) if reason.startswith("int32") else (1, 1, MAX_DEPTH + 1)
    x = RNG.standard_normal(shape).astype(np.float32)
    report, [(npu, cpu, _)] = npu_tvm_ort(model(), [x])
    assert report.cpu_ops["relax.matmul"] == 1, report.table()
    assert reason in report.table(), report.table()
    np.testing.assert_array_equal(npu, cpu)


def test_partition_report_names_the_integer_matmul():
    assert example_npu.partition_for_npu  # the package registers the pattern rows on import
    mod = from_onnx(onnx.load_from_string(dynamic_model((1, 8, 16), 4)))
    _, report = partition_with_report(mod)
    assert report.npu_functions and report.npu_ops["relax.astype"] >= 3, report.table()


@pytest.mark.parametrize("dynamic", [True, False], ids=["run_time_zero_point", "constant"])
def test_unbound_constants_flow(dynamic):
    # FuseOpsByPattern(bind_constants=False): the weight and a folded zero point arrive as
    # arguments of the NPU function; the results keep their bits.
    if dynamic:
        model, x = dynamic_model((1, 8, 64), 16), RNG.standard_normal((1, 8, 64)).astype(np.float32)
    else:
        model, x = static_zero_point_model(5, 300, 20), RNG.integers(-128, 128, (5, 300), np.int8)
    mod = from_onnx(onnx.load_from_string(model))
    partitioned = example_npu.partition_for_npu(mod, bind_constants=False)
    assert partitioned.attrs["external_mods"]
    npu, cpu = (
        relax.VirtualMachine(tvm.compile(m, "llvm"), tvm.cpu())["main"](
            tvm.runtime.tensor(x)
        ).numpy()
        for m in (partitioned, mod)
    )
    np.testing.assert_array_equal(npu, cpu)
