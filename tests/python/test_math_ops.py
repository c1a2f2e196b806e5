"""Elementwise math on the NPU (sqrt, rsqrt, exp, log, erf, abs, negative, power), each against
TVM's CPU build of the same module.

TVM's LLVM build calls the C library's sqrtf / expf / logf / erff / powf (and lowers rsqrt to
1 / sqrtf), so does the NPU's vector / activation unit here: float32 results are bit-exact, NaN
and infinities included. These are the ops imported models bring besides the activations: the
legacy ONNX exporter's decomposed LayerNorm (Pow, Sqrt) and erf GELU, ELU / Mish (exp, log),
RMSNorm (rsqrt).
"""

from __future__ import annotations

import example_npu  # noqa: F401  # registers patterns, codegen and runtime
import numpy as np
import pytest
from example_npu.partition.report import partition_with_report
from example_npu.partition.table import UNARY_MATH
from test_glue_ops import module, offloaded_and_compared, run
from tvm import relax

UNARY = UNARY_MATH
SPECIALS = np.array(
    [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 1e30, -1e30, 88.8, -104.0, 1.0, -4.0, 0.5]
    + [2.5, -2.5, -0.5, 1.5, 8388607.5, -0.49999997],  # ties and near ties of round
    dtype="float32",
)


def _inputs(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    x = (np.random.default_rng(0).standard_normal(shape) * 4).astype(dtype)
    with np.errstate(over="ignore"):  # float16: 1e30 becomes inf
        x.reshape(-1)[: SPECIALS.size] = SPECIALS.astype(dtype)
    return x


@pytest.mark.parametrize("op", UNARY)
def test_unary_math_is_bit_exact_with_special_values(op):
    shape = (3, 40)
    mod = module({"x": (shape, "float32")}, lambda bb, v: getattr(relax.op, op)(v["x"]))
    offloaded_and_compared(mod, [_inputs(shape, "float32")])  # NaN at the same places


@pytest.mark.parametrize("op", UNARY)
def test_unary_math_in_float16_rounds_each_result(op):
    shape = (2, 24)
    x = _inputs(shape, "float16")
    mod = module({"x": (shape, "float16")}, lambda bb, v: getattr(relax.op, op)(v["x"]))
    offloaded_and_compared(mod, [x], exact=False, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(
    "exponent_shape", [(), (1,), (3, 1), (3, 8)], ids=["scalar", "one", "column", "full"]
)
def test_power_broadcasts_and_is_bit_exact(exponent_shape):
    x = _inputs((3, 8), "float32")
    e = np.random.default_rng(1).choice([-2.0, -0.5, 0.0, 0.5, 2.0, 3.0], exponent_shape)
    e = e.astype("float32")
    mod = module(
        {"x": ((3, 8), "float32")},
        lambda bb, v: relax.op.power(v["x"], relax.const(e, "float32")),
    )
    offloaded_and_compared(mod, [x])


def test_decomposed_layer_norm_and_erf_gelu_are_one_npu_function():
    """The legacy ONNX exporter (opset < 17) writes LayerNorm as ReduceMean, Sub, Pow, ReduceMean,
    Add, Sqrt, Div, Mul, Add and GELU as x * 0.5 * (1 + erf(x / sqrt 2)), after a matmul."""
    rng = np.random.default_rng(2)
    w = relax.const(rng.standard_normal((16, 32)).astype("float32"))
    gamma = relax.const(rng.uniform(0.5, 1.5, 32).astype("float32"))
    beta = relax.const(rng.uniform(-0.2, 0.2, 32).astype("float32"))

    def body(bb, v):
        op = relax.op
        y = bb.emit(op.matmul(v["x"], w))
        centred = bb.emit(op.subtract(y, bb.emit(op.mean(y, axis=[-1], keepdims=True))))
        square = bb.emit(op.power(centred, relax.const(2.0, "float32")))
        variance = bb.emit(op.mean(square, axis=[-1], keepdims=True))
        std = bb.emit(op.sqrt(op.add(variance, relax.const(1e-5, "float32"))))
        normed = bb.emit(op.add(op.multiply(op.divide(centred, std), gamma), beta))
        half = relax.const(0.5, "float32")
        gate = bb.emit(op.erf(op.divide(normed, relax.const(np.sqrt(2.0), "float32"))))
        return op.multiply(op.multiply(normed, half), op.add(gate, relax.const(1.0, "float32")))

    mod = module({"x": ((5, 16), "float32")}, body)
    x = rng.standard_normal((5, 16)).astype("float32")
    offloaded_and_compared(mod, [x], exact=False)


def test_elu_and_mish_shapes_of_exp_and_log_fuse_after_a_conv():
    """conv -> exp -> log(1 + .) (softplus) -> tanh -> multiply: Mish as ONNX exports it."""
    w = relax.const(np.random.default_rng(3).standard_normal((4, 3, 3, 3)).astype("float32"))

    def body(bb, v):
        op = relax.op
        y = bb.emit(op.nn.conv2d(v["x"], w, padding=1))
        softplus = bb.emit(op.log(op.add(op.exp(y), relax.const(1.0, "float32"))))
        return op.multiply(y, op.tanh(softplus))

    mod = module({"x": ((1, 3, 8, 8), "float32")}, body)
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops and len(report.npu_functions) == 1, report.table()
    x = np.random.default_rng(4).standard_normal((1, 3, 8, 8)).astype("float32")
    np.testing.assert_allclose(run(partitioned, [x])[0], run(mod, [x])[0], rtol=1e-5, atol=1e-5)


def test_math_on_float64_stays_on_the_cpu_with_a_reason():
    mod = module({"x": ((4,), "float64")}, lambda bb, v: relax.op.sqrt(v["x"]))
    _, report = partition_with_report(mod)
    assert report.cpu_ops["relax.sqrt"] == 1
    assert "float64" in report.cpu_reason("relax.sqrt")
