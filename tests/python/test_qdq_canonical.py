"""canonicalize_qdq and the forms onnxruntime's QDQ graphs take: shared dequantize nodes, int32
biases, QDQ around shape ops, nested QDQ inside activations; the specification's own flow on them;
and the quantization parameters that keep falling back to the CPU with a reason."""

from __future__ import annotations

import logging
from collections import Counter

import example_npu
import numpy as np
import pytest
import tvm
from example_npu.partition.report import partition_with_report
from qdq_models import int32_bias_values, qdq_module, requantize_reference
from spec_models import external_symbols, npu_nodes, npu_ops, run
from test_quantized import conv_accumulators
from tvm import relax
from tvm.ir.expr import Constant
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
from tvm.relax.transform import FuseOpsByPattern, MergeCompositeFunctions, RunCodegen


def _c(value, dtype):
    return relax.const(np.asarray(value, dtype=dtype))


def dq(bb, x, scale, zp, dtype="int8"):
    return bb.emit(relax.op.dequantize(x, _c(scale, "float32"), _c(zp, dtype)))


def q(bb, y, scale, zp, dtype="int8", output=False):
    call = relax.op.quantize(y, _c(scale, "float32"), _c(zp, dtype), out_dtype=dtype)
    return bb.emit_output(call) if output else bb.emit(call)


def residual_block() -> tvm.IRModule:
    """onnxruntime's residual form: one dequantize of x feeds a conv chain and the add."""
    rng = np.random.default_rng(0)
    x = relax.Var("x", relax.TensorType((1, 4, 6, 6), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            xf = dq(bb, x, 0.05, 3)
            w = bb.emit(
                relax.op.dequantize(
                    relax.const(rng.integers(-127, 128, (4, 4, 3, 3)).astype("int8")),
                    _c(np.full(4, 0.01), "float32"),
                    _c(np.zeros(4), "int8"),
                    axis=0,
                )
            )
            y = q(bb, bb.emit(relax.op.nn.conv2d(xf, w, padding=1)), 0.08, -2)
            total = bb.emit(relax.op.add(dq(bb, y, 0.08, -2), xf))
            out = q(bb, bb.emit(relax.op.nn.relu(total)), 0.1, -128, output=True)
        bb.emit_func_output(out)
    return bb.get()


def spec_flow(mod: tvm.IRModule, bind_constants: bool) -> tvm.IRModule:
    """The specification's quick-start flow, without canonicalize_qdq."""
    patterns = get_patterns_with_prefix("example_npu")
    mod = FuseOpsByPattern(patterns, bind_constants=bind_constants, annotate_codegen=True)(mod)
    return RunCodegen()(MergeCompositeFunctions()(mod))


def test_shared_dequantize_gets_one_per_consumer():
    model = residual_block()
    canonical = example_npu.canonicalize_qdq(model)
    dequantized = [
        b.value.args[0]
        for b in canonical["main"].body.blocks[0].bindings
        if isinstance(b.value, relax.Call) and b.value.op.name == "relax.dequantize"
    ]
    x = model["main"].params[0]
    assert sum(arg.same_as(x) for arg in dequantized) == 2
    offloaded = example_npu.partition_for_npu(model)
    assert len(external_symbols(offloaded)) == 1
    assert sorted(npu_ops(offloaded)) == ["qnn.add", "qnn.conv2d"]
    values = np.random.default_rng(1).integers(-128, 128, (1, 4, 6, 6)).astype("int8")
    diff = run(offloaded, [values]).astype(int) - run(model, [values]).astype(int)
    assert np.abs(diff).max() <= 1


def test_spec_flow_keeps_a_shared_dequantize_correct(caplog):
    """Without canonicalize_qdq a chain whose dequantize is shared is not one integer op: the
    check says why, the ops run separately, and nothing fails in codegen."""
    model = residual_block()
    with caplog.at_level(logging.INFO, logger="example_npu"):
        offloaded = spec_flow(model, bind_constants=True)
    assert "canonicalize_qdq gives each quantized op its own dequantize" in caplog.text
    values = np.random.default_rng(2).integers(-128, 128, (1, 4, 6, 6)).astype("int8")
    diff = run(offloaded, [values]).astype(int) - run(model, [values]).astype(int)
    assert np.abs(diff).max() <= 1


@pytest.mark.parametrize("kind", ["conv2d", "dense"])
def test_int32_bias_through_dequantize_is_the_accumulator_bias(kind):
    """onnxruntime's bias: int32 under dequantize(scale = x_scale * w_scale); the integers are
    added to the accumulators unchanged."""
    rng = np.random.default_rng(3)
    channels = 6
    if kind == "conv2d":
        x_shape, weight = (1, 3, 7, 7), rng.integers(-127, 128, (channels, 3, 3, 3))
    else:
        x_shape, weight = (4, 10), rng.integers(-127, 128, (channels, 10))
    weight = weight.astype("int8")
    scales = rng.uniform(0.002, 0.02, channels).astype("float32")
    bias = rng.uniform(-3, 3, channels).astype("float32")
    x_params, y_params = (0.04, 5), (0.2, -3)
    model = qdq_module(
        kind, x_shape, weight, scales, x_params, y_params, bias=bias, int32_bias=True
    )
    offloaded = example_npu.partition_for_npu(model)
    nodes = [node for node in npu_nodes(offloaded) if node["op"].startswith("qnn.")]
    assert len(nodes) == 1, nodes
    bias_q = int32_bias_values(bias, x_params[0], scales)
    assert nodes[0]["attrs"]["int32_bias"] == [int(b) for b in bias_q]
    x = rng.integers(-128, 128, x_shape).astype("int8")
    if kind == "conv2d":
        acc = conv_accumulators(x, 5, weight, (1, 1), (0, 0, 0, 0), (1, 1), 1)
    else:
        acc = (x.astype(np.int64) - 5) @ weight.astype(np.int64).T
    expected = requantize_reference(acc, 0.04, scales, y_params, bias, None, "int8", bias_q)
    if kind == "conv2d":
        expected = expected.transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(run(offloaded, [x]), expected)


def test_shape_ops_between_qdq_become_integer_views():
    """dequantize -> reshape -> quantize with the same parameters is a reshape of the integers."""
    x = relax.Var("x", relax.TensorType((2, 3, 4), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.permute_dims(dq(bb, x, 0.1, 2), [0, 2, 1]))
            y = bb.emit(relax.op.reshape(y, (2, 12)))
            out = q(bb, y, 0.1, 2, output=True)
        bb.emit_func_output(out)
    canonical = example_npu.canonicalize_qdq(bb.get())
    ops = [b.value.op.name for b in canonical["main"].body.blocks[0].bindings]
    assert ops == ["relax.permute_dims", "relax.reshape"]
    values = np.random.default_rng(4).integers(-128, 128, (2, 3, 4)).astype("int8")
    np.testing.assert_array_equal(
        run(canonical, [values]), values.transpose(0, 2, 1).reshape(2, 12)
    )


def test_activation_with_inner_qdq_is_one_table():
    """SiLU as onnxruntime quantizes it: x * dequantize(quantize(sigmoid(x))); a function of one
    int8 tensor, so the whole island (inner rounding included) becomes one 256-entry table."""
    x = relax.Var("x", relax.TensorType((1, 8, 8, 4), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gate = q(bb, bb.emit(relax.op.sigmoid(dq(bb, x, 0.06, -10))), 1 / 256, -128)
            product = bb.emit(relax.op.multiply(dq(bb, x, 0.06, -10), dq(bb, gate, 1 / 256, -128)))
            out = q(bb, product, 0.03, -100, output=True)
        bb.emit_func_output(out)
    model = bb.get()
    offloaded = example_npu.partition_for_npu(model)
    assert npu_ops(offloaded) == ["qnn.lut"]
    grid = np.arange(-128, 128).astype("int8").reshape(1, 8, 8, 4)  # every int8 value
    diff = run(offloaded, [grid]).astype(int) - run(model, [grid]).astype(int)
    assert np.abs(diff).max() <= 1


def test_unsupported_quantization_falls_back_with_a_reason(caplog):
    """Per-axis activation scales and weight zero points stay off the integer datapath, named."""
    x = relax.Var("x", relax.TensorType((1, 4, 3, 3), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            per_axis = bb.emit(
                relax.op.dequantize(
                    x, _c(np.full(4, 0.1), "float32"), _c(np.zeros(4), "int8"), axis=1
                )
            )
            out = q(bb, bb.emit(relax.op.nn.relu(per_axis)), 0.1, 0, output=True)
        bb.emit_func_output(out)
    model = bb.get()
    with caplog.at_level(logging.INFO, logger="example_npu"):
        offloaded = example_npu.partition_for_npu(model)
    assert "per-axis activation quantization is not supported" in caplog.text
    values = np.random.default_rng(5).integers(-128, 128, (1, 4, 3, 3)).astype("int8")
    np.testing.assert_array_equal(run(offloaded, [values]), run(model, [values]))


@pytest.mark.parametrize("kind", ["conv2d", "dense"])
def test_spec_flow_without_bound_constants_runs_the_integer_op(kind):
    """FuseOpsByPattern(bind_constants=False) passes scales, zero points and the int32 bias as
    call arguments: the NPU binds them at run time and computes the same integers."""
    rng = np.random.default_rng(6)
    x_shape, weight = ((1, 3, 8, 8), (4, 3, 3, 3)) if kind == "conv2d" else ((5, 12), (4, 12))
    weight = rng.integers(-127, 128, weight).astype("int8")
    scales = rng.uniform(0.005, 0.02, 4).astype("float32")
    bias = rng.uniform(-1, 1, 4).astype("float32")
    model = qdq_module(
        kind, x_shape, weight, scales, (0.05, 2), (0.1, -4), bias, "relu", int32_bias=True
    )
    offloaded = spec_flow(model, bind_constants=False)
    assert [op for op in npu_ops(offloaded) if op.startswith("qnn.")] == [
        "qnn.conv2d" if kind == "conv2d" else "qnn.matmul"
    ]
    x = rng.integers(-128, 128, x_shape).astype("int8")
    np.testing.assert_array_equal(
        run(offloaded, [x]), run(example_npu.partition_for_npu(model), [x])
    )


def test_spec_flow_without_bound_constants_on_a_residual_block():
    model = residual_block()
    values = np.random.default_rng(7).integers(-128, 128, (1, 4, 6, 6)).astype("int8")
    canonical = spec_flow(example_npu.canonicalize_qdq(model), bind_constants=False)
    assert sorted(op for op in npu_ops(canonical) if op.startswith("qnn.")) == [
        "qnn.add",
        "qnn.conv2d",
    ]
    expected = run(example_npu.partition_for_npu(model), [values])
    np.testing.assert_array_equal(run(canonical, [values]), expected)
    raw = spec_flow(model, bind_constants=False)  # shared dequantize: separate ops, still right
    assert np.abs(run(raw, [values]).astype(int) - expected.astype(int)).max() <= 1


def norm_with_quantized_parameters() -> tvm.IRModule:
    """onnxruntime's quantized LayerNormalization and InstanceNormalization-style affine: an int8
    scale and an int32 bias under dequantize (the bias reshaped to broadcast), beside a conv
    whose int32 bias (reshaped) stays the qnn.conv2d's accumulator bias. The int32 values reach
    past 2^24, where converting to float32 rounds."""
    rng = np.random.default_rng(12)
    x = relax.Var("x", relax.TensorType((1, 4, 6, 8), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gamma = dq(bb, _c(rng.integers(-127, 128, 8), "int8"), 0.01, 0)
            beta = dq(
                bb, _c([2**24 + 1, -(2**25) - 3, 7, 2**30, -5, 1, 0, 123456789], "int32"), 3e-9, 0
            )
            normed = relax.op.nn.layer_norm(dq(bb, x, 0.05, 3), gamma, beta, axes=[-1])
            y = q(bb, bb.emit(normed), 0.04, -1)
            weight = rng.integers(-127, 128, (4, 4, 3, 3)).astype("int8")
            w = dq(bb, _c(weight, "int8"), 0.01, 0)
            conv_bias = dq(bb, _c(rng.integers(-2000, 2000, 4), "int32"), 0.04 * 0.01, 0)
            conv = bb.emit(relax.op.nn.conv2d(dq(bb, y, 0.04, -1), w, padding=1))
            conv = bb.emit(relax.op.add(conv, bb.emit(relax.op.reshape(conv_bias, (1, 4, 1, 1)))))
            z = q(bb, conv, 0.1, 0)
            shift = dq(bb, _c(rng.integers(-(2**28), 2**28, 4), "int32"), 1e-8, 0)
            shifted = relax.op.add(
                dq(bb, z, 0.1, 0), bb.emit(relax.op.reshape(shift, (1, 4, 1, 1)))
            )
            out = q(bb, bb.emit(shifted), 0.1, 2, output=True)
        bb.emit_func_output(out)
    return bb.get()


def test_constant_dequantize_no_integer_op_reads_folds():
    """The int8 / int32 norm parameters and the reshaped int32 shift fold to the float constants
    TVM computes; the conv's weight and bias stay its integer operands. Nothing is left on the
    CPU and the result is bit-equal to TVM's CPU build of the QDQ graph."""
    model = norm_with_quantized_parameters()
    canonical = example_npu.canonicalize_qdq(model)
    constant_dequantizes = [
        str(b.value.args[0].ty.dtype)
        for b in canonical["main"].body.blocks[0].bindings
        if isinstance(b.value, relax.Call)
        and b.value.op.name == "relax.dequantize"
        and isinstance(b.value.args[0], Constant)
    ]
    assert sorted(constant_dequantizes) == ["int32", "int8"]  # the conv's bias and weight
    offloaded, report = partition_with_report(model)
    assert len(report.npu_functions) == 1 and not report.cpu_ops, report.table()
    assert "qnn.conv2d" in npu_ops(offloaded)
    values = np.random.default_rng(13).integers(-128, 128, (1, 4, 6, 8)).astype("int8")
    np.testing.assert_array_equal(run(offloaded, [values]), run(model, [values]))


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_float_tail_of_one_8bit_tensor_is_tvms_float_table(dtype):
    """Elementwise float chains of one 8-bit tensor that end in float (a model's output tanh, a
    scaled GELU, a clipped sigmoid) become float32 tables computed by TVM's build: on every input
    value the NPU's qnn.lut gives exactly what TVM's CPU build of the original gives (the NPU's
    own float tanh would differ by an ulp). A chain read by a quantize stays an integer table."""
    x = relax.Var("x", relax.TensorType((2, 128), dtype))
    zero = -7 if dtype == "int8" else 131
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            tanh = bb.emit(relax.op.tanh(dq(bb, x, 0.0213, zero, dtype)))
            gelu = bb.emit(relax.op.nn.gelu(dq(bb, x, 0.0213, zero, dtype)))
            scaled = bb.emit(relax.op.multiply(gelu, _c(1.7, "float32")))
            sigmoid = bb.emit(relax.op.sigmoid(dq(bb, x, 0.0213, zero, dtype)))
            clipped = bb.emit(relax.op.clip(sigmoid, 0.1, 0.8))
            gate = bb.emit(relax.op.sigmoid(dq(bb, x, 0.0213, zero, dtype)))
            requantized = dq(bb, q(bb, gate, 1 / 256, 0, "uint8"), 1 / 256, 0, "uint8")
            out = bb.emit_output(relax.Tuple([tanh, scaled, clipped, requantized]))
        bb.emit_func_output(out)
    model = bb.get()
    canonical = example_npu.canonicalize_qdq(model)
    tables = [
        str(b.value.args[0].ty.dtype)
        for b in canonical["main"].body.blocks[0].bindings
        if isinstance(b.value, relax.Call) and b.value.op.name == "relax.take"
    ]
    assert sorted(tables) == ["float32", "float32", "float32", "uint8"]
    offloaded, report = partition_with_report(model)
    assert not report.cpu_ops, report.table()
    assert Counter(npu_ops(offloaded))["qnn.lut"] == 4
    grid = np.arange(256).astype(dtype).reshape(2, 128)  # every 8-bit value
    for npu, cpu in zip(run(offloaded, [grid]), run(model, [grid]), strict=True):
        np.testing.assert_array_equal(npu, cpu)
