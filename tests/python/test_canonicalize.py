"""Canonicalization: frontend idioms become NPU ops, and the result is bit-exact to TVM's CPU
build of the original module, NaN and infinities included."""

from __future__ import annotations

import example_npu  # noqa: F401  # registers patterns, codegen and runtime
import numpy as np
import onnx
import pytest
import tvm
from example_npu.frontend.canonicalize import canonicalize
from example_npu.partition.report import partition_with_report
from onnx import TensorProto, helper
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

SPECIALS = np.array([np.nan, np.inf, -np.inf, -1.0, 0.0, 3.0, 6.0, 7.5], dtype="float32")


def _ops(mod: tvm.IRModule) -> set[str]:
    found: set[str] = set()
    relax.analysis.post_order_visit(
        mod["main"].body,
        lambda n: (
            found.add(n.op.name)
            if isinstance(n, relax.Call) and isinstance(n.op, tvm.ir.Op)
            else None
        ),
    )
    return found


def run(mod: tvm.IRModule, x: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


def _clip_model(bounds: tuple[float | None, float | None]) -> onnx.ModelProto:
    """x -> Relu -> Clip(min, max) (either bound may be absent), opset 18."""
    inputs = ["r"]
    initializers = []
    for name, bound in zip(("lo", "hi"), bounds, strict=True):
        if bound is None:
            inputs.append("")
        else:
            inputs.append(name)
            initializers.append(helper.make_tensor(name, TensorProto.FLOAT, [], [bound]))
    while inputs[-1] == "":
        inputs.pop()
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Clip", inputs, ["y"])],
        "clip",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("bounds", [(0.0, 6.0), (None, 6.0), (1.0, None), (-2.0, 2.0)])
def test_onnx_clip_lowering_runs_on_the_npu_bit_exactly(bounds):
    mod = from_onnx(_clip_model(bounds))
    assert "relax.call_tir" in _ops(mod) or "relax.clip" in _ops(mod)
    canonical = canonicalize(mod)
    assert "relax.call_tir" not in _ops(canonical)
    assert not {"relax.isnan", "relax.where"} & _ops(canonical)
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops, report.table()
    x = np.stack([SPECIALS, -SPECIALS])
    np.testing.assert_array_equal(run(partitioned, x), run(mod, x))  # NaN positions included


def test_clip_lowering_is_not_turned_into_relax_clip_because_nan_differs():
    """min(max(NaN, 0), 6) is 0 in TVM's build, clip(NaN, 0, 6) is 6: they must stay apart."""
    canonical = canonicalize(from_onnx(_clip_model((0.0, 6.0))))
    assert {"relax.maximum", "relax.minimum"} <= _ops(canonical)
    assert "relax.clip" not in _ops(canonical)
    v = relax.Var("x", relax.TensorType((1, 1), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [v]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.clip(v, 0, 6))
        bb.emit_func_output(out)
    assert run(bb.get(), np.full((1, 1), np.nan, dtype="float32"))[0, 0] == 6.0


def test_other_primfuncs_are_left_alone():
    """A call_tir whose PrimFunc is not TVM's maximum / minimum stays a CPU call."""
    x = relax.Var("x", relax.TensorType((4,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(bb.call_te(tvm.topi.add, x, relax.const(1.0, "float32")))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    mod = bb.get()
    assert "relax.call_tir" in _ops(canonicalize(mod))


def test_quantization_constants_are_never_folded():
    """dequantize(constant) is what the quantized patterns match: folding it would lose them."""
    x = relax.Var("x", relax.TensorType((2, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            w = bb.emit(
                relax.op.dequantize(
                    relax.const(np.ones((4, 3), "int8")),
                    relax.const(0.5, "float32"),
                    relax.const(0, "int8"),
                )
            )
            out = bb.emit_output(relax.op.matmul(x, w))
        bb.emit_func_output(out)
    assert "relax.dequantize" in _ops(canonicalize(bb.get()))


def test_identity_broadcast_and_dead_bindings_disappear():
    x = relax.Var("x", relax.TensorType((2, 3), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            bb.emit(relax.op.zeros_like(x))  # unused, as torch.export leaves them
            y = bb.emit(relax.op.broadcast_to(x, (2, 3)))
            out = bb.emit_output(relax.op.nn.relu(y))
        bb.emit_func_output(out)
    assert _ops(canonicalize(bb.get())) == {"relax.nn.relu"}


def _chunk_model(opset: int) -> bytes:
    """torch's legacy ONNX exporter on x.chunk(2, 1): Slice bounds computed from Shape, which
    from_onnx imports as dynamic_strided_slice of unknown shape (TVM cannot build it)."""
    import io
    import warnings

    import torch

    class Chunk(torch.nn.Module):
        def forward(self, x):
            a, b = x.chunk(2, dim=1)
            return torch.cat([torch.relu(b), a * 2.0], dim=1)

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Chunk(),
            (torch.zeros(1, 6, 3, 4),),
            buffer,
            dynamo=False,
            opset_version=opset,
            input_names=["x"],
        )
    return buffer.getvalue()


@pytest.mark.parametrize("opset", [13, 17])
def test_legacy_onnx_chunk_becomes_a_static_slice_on_the_npu(opset):
    import onnxruntime

    model = _chunk_model(opset)
    mod = from_onnx(onnx.load_from_string(model), shape_dict={"x": [1, 6, 3, 4]})
    assert "relax.dynamic_strided_slice" in _ops(mod)
    canonical = canonicalize(mod)
    assert "relax.dynamic_strided_slice" not in _ops(canonical)
    assert canonical["main"].ret_ty.shape is not None  # the static shapes came back
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops and len(report.npu_functions) == 1, report.table()
    x = np.random.default_rng(0).standard_normal((1, 6, 3, 4)).astype("float32")
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": x})[0]
    np.testing.assert_array_equal(run(partitioned, x), expected)
    np.testing.assert_array_equal(run(canonical, x), expected)


_SLICE_BOUNDS = [
    ([0, 1], [2, 5], [1, 2]),
    ([-3, -1], [100, -7], [1, -1]),
    ([4, 5], [-100, 0], [-2, -3]),
    ([-10, 2], [2**62, 2], [1, 1]),  # an empty axis
    ([1, 0], [-1, -1], [3, 4]),
]


@pytest.mark.parametrize("begin, end, strides", _SLICE_BOUNDS)
def test_dynamic_strided_slice_with_constant_bounds_picks_what_tvm_picks(begin, end, strides):
    x = relax.Var("x", relax.TensorType((5, 6), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            bounds = [relax.const(np.array(v), "int64") for v in (begin, end, strides)]
            out = bb.emit_output(relax.op.dynamic_strided_slice(x, *bounds))
        bb.emit_func_output(out)
    mod = bb.get()
    canonical = canonicalize(mod)
    assert _ops(canonical) == {"relax.strided_slice"}
    data = np.arange(30, dtype="float32").reshape(5, 6)
    np.testing.assert_array_equal(run(canonical, data), run(mod, data))


def test_single_element_constant_arithmetic_is_folded_as_tvm_computes_it():
    """The legacy exporter's attention scale: sqrt(1 / sqrt(d)) on a (1,) float tensor."""
    x = relax.Var("x", relax.TensorType((2, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            root = bb.emit(relax.op.sqrt(relax.const(np.array([8.0], "float32"))))
            scale = bb.emit(
                relax.op.sqrt(relax.op.divide(relax.const(np.array([1.0], "float32")), root))
            )
            out = bb.emit_output(relax.op.multiply(x, scale))
        bb.emit_func_output(out)
    mod = bb.get()
    canonical = canonicalize(mod)
    assert _ops(canonical) == {"relax.multiply"}
    data = np.random.default_rng(1).standard_normal((2, 8)).astype("float32")
    np.testing.assert_array_equal(run(canonical, data), run(mod, data))


def _topk_module(shape, axis: int, largest: bool, ret_type: str) -> tvm.IRModule:
    x = relax.Var("x", relax.TensorType(shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            top = bb.emit(
                relax.op.topk(x, k=1, axis=axis, ret_type=ret_type, largest=largest, dtype="int64")
            )
            if ret_type == "both":
                values = bb.emit(relax.op.add(bb.emit(relax.TupleGetItem(top, 0)), x))
                indices = bb.emit(relax.TupleGetItem(top, 1))
                out = bb.emit_output(relax.Tuple([values, indices]))
            else:
                out = bb.emit_output(top)
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.parametrize(
    ("axis", "largest", "ret_type"),
    [(1, True, "both"), (-1, False, "both"), (0, True, "values"), (2, False, "indices")],
)
def test_a_top1_is_a_reduction_on_the_npu(axis, largest, ret_type):
    """topk with k = 1 (torch's max(dim)) becomes max / min and argmax / argmin, ties included
    (the first extreme index, as TVM's topk)."""
    shape = (3, 5, 4)
    mod = _topk_module(shape, axis, largest, ret_type)
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops, report.table()
    data = np.round(np.random.default_rng(4).standard_normal(shape)).astype("float32")  # ties
    cpu = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    npu = relax.VirtualMachine(tvm.compile(partitioned, target="llvm"), tvm.cpu())
    expected, got = (vm["main"](tvm.runtime.tensor(data)) for vm in (cpu, npu))
    pairs = zip(expected, got, strict=True) if ret_type == "both" else [(expected, got)]
    for want, have in pairs:
        np.testing.assert_array_equal(have.numpy(), want.numpy())


def test_torch_max_over_a_dim_runs_on_the_npu():
    torch = pytest.importorskip("torch")
    from tvm.relax.frontend.torch import from_exported_program

    class MaxDim(torch.nn.Module):
        def forward(self, x):
            values, indices = x.max(1)
            return values * 2, indices, x.max(dim=-1, keepdim=True)[0]

    x = torch.randn(2, 6, 5)
    mod = from_exported_program(torch.export.export(MaxDim(), (x,)))
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops, report.table()
    assert report.npu_ops["relax.argmax"] == 1 and report.npu_ops["relax.max"] == 2
    vm = relax.VirtualMachine(tvm.compile(partitioned, target="llvm"), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x.numpy()))
    for have, want in zip(got, MaxDim()(x), strict=True):
        np.testing.assert_array_equal(have.numpy(), want.numpy())


@pytest.mark.parametrize(("axis", "dtype"), [(0, "float32"), (-1, "float32"), (1, "int8")])
def test_a_flip_is_a_reversed_take_on_the_npu(axis, dtype):
    """flip (torch.flip, TFLite's REVERSE_V2) moves the elements a take of the reversed indices
    moves: on the NPU, equal to TVM's CPU build of the flip."""
    x = relax.Var("x", relax.TensorType((3, 5, 4), dtype))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.flip(x, axis))
        bb.emit_func_output(out)
    mod = bb.get()
    assert "relax.flip" not in _ops(canonicalize(mod))
    partitioned, report = partition_with_report(mod)
    assert len(report.npu_functions) == 1 and not report.cpu_ops, report.table()
    data = np.random.default_rng(2).integers(-100, 100, (3, 5, 4)).astype(dtype)
    np.testing.assert_array_equal(run(partitioned, data), run(mod, data))
    np.testing.assert_array_equal(run(partitioned, data), np.flip(data, axis))


def _gather_columns() -> tvm.IRModule:
    """take(table, ids, axis=1) with run-time ids: not a row gather, so it stays on the CPU."""
    table = relax.Var("table", relax.TensorType((3, 5), "float32"))
    ids = relax.Var("ids", relax.TensorType((4,), "int64"))
    bb = relax.BlockBuilder()
    with bb.function("main", [table, ids]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.take(table, ids, axis=1, mode="fast"))
        bb.emit_func_output(out)
    return bb.get()


def test_run_time_take_never_reads_outside_the_table():
    """Importers emit take(mode="fast"), which reads out of bounds for a bad index; canonicalized
    it clips, and valid indices give what TVM's build of the original gives."""
    mod = _gather_columns()
    partitioned, report = partition_with_report(mod)
    assert report.cpu_ops["relax.take"] == 1, report.table()
    vm = relax.VirtualMachine(tvm.compile(partitioned, target="llvm"), tvm.cpu())
    table = np.arange(15, dtype="float32").reshape(3, 5)
    valid = np.array([4, 0, 2, 2])
    reference = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())

    def run(machine, ids):
        return machine["main"](tvm.runtime.tensor(table), tvm.runtime.tensor(ids)).numpy()

    np.testing.assert_array_equal(run(vm, valid), run(reference, valid))
    bad = np.array([1 << 40, -7, 5, 1])
    np.testing.assert_array_equal(run(vm, bad), np.take(table, bad, axis=1, mode="clip"))


def _guarded_quantized_softmax(scale: float) -> tvm.IRModule:
    """The ONNX exporter's softmax guard in a QDQ model: s = dq(q(softmax(x))), then
    where(isnan(s), 0, s) quantized again, as onnxruntime's quantizer leaves it in attention."""
    x = relax.Var("x", relax.TensorType((2, 3, 16), "float32"))
    step, zero = relax.const(scale, "float32"), relax.const(-128, "int8")
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            probs = bb.emit(relax.op.quantize(relax.op.nn.softmax(x), step, zero))
            guarded = bb.emit(
                relax.op.where(
                    relax.op.isnan(relax.op.dequantize(probs, step, zero)),
                    relax.const(0.0, "float32"),
                    relax.op.dequantize(probs, step, zero),
                )
            )
            out = bb.emit_output(relax.op.quantize(guarded, step, zero))
        bb.emit_func_output(out)
    return bb.get()


def test_isnan_of_dequantized_integers_is_false_and_the_guard_goes():
    mod = _guarded_quantized_softmax(1 / 255)
    assert not {"relax.isnan", "relax.where"} & _ops(canonicalize(mod))
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops, report.table()
    x = np.random.default_rng(0).standard_normal((2, 3, 16)).astype("float32") * 4
    x[0, 1] = -np.inf  # a fully masked row: NaN softmax, quantized as TVM quantizes NaN
    np.testing.assert_array_equal(run(partitioned, x), run(mod, x))


def test_isnan_stays_where_a_nan_can_occur():
    """A non-finite scale makes (q - zero) * scale NaN for q == zero: the guard stays."""
    assert {"relax.isnan", "relax.where"} <= _ops(canonicalize(_guarded_quantized_softmax(np.inf)))
