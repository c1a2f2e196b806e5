"""TFLite integer kernel tables (example_npu.frontend.tflite_kernels): for ops TFLite defines by
a fixed-point kernel (LEAKY_RELU, HARD_SWISH) the table of a TFLite model is LiteRT's reference
kernel on every one of the 256 int8 inputs, at many quantization parameters (the committed
one-op probes with their scales patched), and the NPU runs it bit for bit. LOGISTIC and TANH need
no entry: TFLite's int8 kernels are themselves a table of the float function (LUTPopulate,
rounding half away from zero), and the plain QDQ table equals them on every input."""

from __future__ import annotations

import example_npu
import numpy as np
import pytest
import tvm
from example_npu.frontend.canonicalize import canonicalize
from example_npu.frontend.qdq import canonicalize_qdq, quantize_values
from example_npu.frontend.tflite_kernels import (
    hard_swish,
    input_grid,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    rounding_divide_by_pot,
)
from tflite_models import (
    FLOAT_TABLE_PROBES,
    ONE_OP_PROBES,
    every_int8,
    interpreter,
    model_path,
    run_litert,
    with_scales,
)
from tvm import relax

# The float function TVM's frontend lowers each probe's op to (what a plain QDQ table computes).
FLOAT_OPS = {
    "hard_swish_probe": lambda x: x * np.clip(x + np.float32(3), 0, 6) / np.float32(6),
    "leaky_relu_probe": lambda x: np.where(x > 0, x, x * np.float32(0.2)),
}
SCALE_PAIRS = 16


def tables(mod: tvm.IRModule) -> list[np.ndarray]:
    found = []

    def visit(expr):
        if isinstance(expr, relax.Call) and getattr(expr.op, "name", "") == "relax.take":
            found.append(expr.args[0].value.numpy())

    relax.analysis.post_order_visit(mod["main"], visit)
    return found


def scale_pairs(seed: int) -> list[tuple[float, float]]:
    """Input and output scales from 1e-3 to 0.3, log-uniform."""
    rng = np.random.default_rng(seed)
    return [tuple(float(s) for s in 10 ** rng.uniform(-3, -0.5, 2)) for _ in range(SCALE_PAIRS)]


def float_op_outputs(name: str, path, x: np.ndarray) -> np.ndarray:
    """What a plain QDQ table (TVM's float function of the op) gives for the probe ``path``."""
    runner = interpreter(path)
    (in_scale, in_zero), (out_scale, out_zero) = (
        runner.get_input_details()[0]["quantization"],
        runner.get_output_details()[0]["quantization"],
    )
    real = np.float32(in_scale) * (x.astype(np.float32) - np.float32(in_zero))
    return quantize_values(FLOAT_OPS[name](real), out_scale, out_zero, "int8")


@pytest.mark.parametrize("name", ONE_OP_PROBES)
def test_kernel_table_is_litert_reference_on_every_input(name, tmp_path):
    x = every_int8(model_path(name))
    float_differs = 0
    for input_scale, output_scale in scale_pairs(seed=len(name)):
        path = with_scales(model_path(name), tmp_path / "probe.tflite", input_scale, output_scale)
        expected = run_litert(path, x)
        (table,) = tables(canonicalize(example_npu.load_model(path).mod))
        np.testing.assert_array_equal(table[x.astype(np.uint8)], expected)
        float_differs += int(np.any(float_op_outputs(name, path, x) != expected))
    assert float_differs > 0  # the parameters reach inputs where the kernel is not the float op


@pytest.mark.parametrize("name", ONE_OP_PROBES + FLOAT_TABLE_PROBES)
def test_probe_runs_on_the_npu_bit_exact_on_every_input(name, tmp_path):
    """Whole flow (load, partition, NPU); for the kernel ops at scales where the float table
    would be a step off."""
    path = model_path(name)
    if name in ONE_OP_PROBES:
        path = with_scales(path, tmp_path / "probe.tflite", 0.03, 0.02)
    model = example_npu.load_model(path)
    partitioned, report = example_npu.partition_with_report(model.mod)
    assert len(report.npu_functions) == 1 and not report.cpu_ops, report.table()
    vm = relax.VirtualMachine(tvm.compile(partitioned, target="llvm"), tvm.cpu())
    x = every_int8(path)
    expected = run_litert(path, x)
    if name in ONE_OP_PROBES:
        assert np.any(float_op_outputs(name, path, x) != expected)
    np.testing.assert_array_equal(vm["main"](tvm.runtime.tensor(x)).numpy(), expected)


@pytest.mark.parametrize("name", FLOAT_TABLE_PROBES)
def test_float_table_is_litert_reference_and_default_on_every_input(name, tmp_path):
    """The output scale of int8 LOGISTIC / TANH is fixed (1/256, 1/128); the input's scale and
    zero point vary. At each, the canonical table is both LiteRT kernels on all 256 inputs."""
    x = every_int8(model_path(name))
    rng = np.random.default_rng(len(name))
    scales, zero_points = 10 ** rng.uniform(-3.5, 0, SCALE_PAIRS), rng.integers(-128, 128, 16)
    for scale, zero_point in zip(scales, zero_points, strict=True):
        path = with_scales(
            model_path(name), tmp_path / "probe.tflite", scale, input_zero_point=zero_point
        )
        expected = run_litert(path, x)
        np.testing.assert_array_equal(run_litert(path, x, reference=False), expected)
        (table,) = tables(canonicalize(example_npu.load_model(path).mod))
        np.testing.assert_array_equal(table[x.astype(np.uint8)], expected)


def test_other_models_keep_the_float_table():
    """Without TFLite rounding (a QDQ graph from elsewhere) hard-swish is TVM's float function."""
    x = relax.Var("x", relax.TensorType((1, 8), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            real = bb.emit(relax.op.dequantize(x, relax.const(0.03912), relax.const(2, "int32")))
            relu6 = bb.emit(relax.op.clip(bb.emit(real + relax.const(3.0)), 0.0, 6.0))
            swish = bb.emit(bb.emit(real * relu6) / relax.const(6.0))
            out = bb.emit_output(
                relax.op.quantize(swish, relax.const(0.001266), relax.const(-59, "int32"))
            )
        bb.emit_func_output(out)
    (table,) = tables(canonicalize_qdq(bb.get()))
    grid = input_grid("int8")
    real = np.float32(0.03912) * (grid - 2).astype(np.float32)
    expected = quantize_values(FLOAT_OPS["hard_swish_probe"](real), 0.001266, -59, "int8")
    np.testing.assert_array_equal(table, expected)
    # The named switch gives TFLite's kernel instead, which differs here.
    (tflite_table,) = tables(canonicalize_qdq(bb.get(), semantics="tflite"))
    kernel = np.clip(hard_swish((0.03912, 2), (0.001266, -59), "int8"), -128, 127)
    np.testing.assert_array_equal(tflite_table, kernel)
    assert np.any(tflite_table != table)
    with pytest.raises(ValueError, match="semantics"):
        canonicalize_qdq(bb.get(), semantics="onnx")


def test_fixed_point_primitives_match_naive_integer_arithmetic():
    """QuantizeMultiplier, RoundingDivideByPOT and MultiplyByQuantizedMultiplier against exact
    rational arithmetic: TFLite rounds twice, half away from zero, after the Q31 product and
    after the right shift."""
    for real in (0.0, 1e-10, 0.3, 0.5, 0.999999999, 1.0, 3.7, 1234.5):
        fixed, shift = quantize_multiplier(real)
        assert fixed == 0 or abs(fixed * 2.0 ** (shift - 31) - real) <= 2.0 ** (shift - 32)
    values = np.arange(-1000, 1001, dtype=np.int64)
    for exponent in range(0, 6):
        expected = [int(np.sign(v) * np.floor(abs(v) / 2**exponent + 0.5)) for v in values]
        np.testing.assert_array_equal(rounding_divide_by_pot(values, exponent), expected)

    def half_away(numerator: int, denominator: int) -> int:
        return (1 if numerator >= 0 else -1) * (
            (2 * abs(numerator) + denominator) // (2 * denominator)
        )

    fixed, shift = quantize_multiplier(0.3)
    assert shift < 0
    exact = [half_away(half_away(int(v) * fixed, 1 << 31), 1 << -shift) for v in values]
    np.testing.assert_array_equal(multiply_by_quantized_multiplier(values, 0.3), exact)
