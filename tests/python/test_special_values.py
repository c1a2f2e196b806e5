"""NaN, +-inf, huge and tiny values go through every op family exactly as TVM's LLVM build.

Each case builds one Relax module, runs it once through ``tvm.compile`` alone (TVM's CPU build,
the reference) and once through ``partition_for_npu``, on inputs salted with special values. The
NaN positions and every infinity must match exactly; finite values must agree to float rounding
(the random suite's rtol = atol = 1e-5). The same cases run again on a
16 KB L1, where tiles, halos and split reductions cut through the special values.
"""

from __future__ import annotations

import example_npu
import numpy as np
import pytest
import tvm
from example_npu.partition.report import partition_with_report
from qdq_models import qdq_module
from tvm import relax

R = relax.op
SPECIAL = np.array(
    [np.nan, np.inf, -np.inf, 0.0, -0.0, 3e38, -3e38, 1e38, 1e-40, -1e-40, 88.8, -88.8, 89.5,
     -87.5, -95.0, -104.5, 100.0, -100.0, 44.5, -44.5, 9.0, -9.0, 1e13, -1e13],
    "float32",
)  # fmt: skip


# For ops that sum products: no huge finite values. Whether a sum of finite values overflows
# depends on the summation order, which TVM does not fix either (a tuned schedule of the same
# module changes it); NaN and infinities give the same result in any order.
SPECIAL_FOR_SUMS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40], "float32")


def salted(
    rng: np.random.Generator, shape, special: np.ndarray = SPECIAL, fraction: float = 0.3
) -> np.ndarray:
    """Normal values with a fraction of the elements (and each special value at least once, where
    the tensor is large enough) replaced by special values."""
    data = rng.standard_normal(shape).astype("float32")
    flat = data.reshape(-1)
    count = min(flat.size, max(int(flat.size * fraction), special.size))
    values = np.concatenate([special, rng.choice(special, size=count)])[:count]
    flat[rng.choice(flat.size, size=count, replace=False)] = values
    return data


def module(fn, *shapes) -> tvm.IRModule:
    bb = relax.BlockBuilder()
    params = [
        relax.Var(f"p{i}", relax.TensorType(shape, "float32")) for i, shape in enumerate(shapes)
    ]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(fn(bb, *params))
        bb.emit_func_output(out)
    return bb.get()


def run(mod: tvm.IRModule, arrays: list[np.ndarray]) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return vm["main"](*[tvm.runtime.tensor(a) for a in arrays]).numpy()


def assert_same_special_values(actual: np.ndarray, expected: np.ndarray) -> None:
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan, err_msg="NaN positions differ")
    inf = np.isinf(expected)
    np.testing.assert_array_equal(actual[inf], expected[inf], err_msg="infinities differ")
    finite = ~nan & ~inf
    # Finite values to the random suite's float32 tolerance (op_cases.py): cancellation in TVM's
    # own tanh / gelu formulas and summation order differ by rounding only.
    np.testing.assert_allclose(actual[finite], expected[finite], rtol=1e-5, atol=1e-5)


def _bias_dense(bb, x, w, b):
    return R.add(bb.emit(R.matmul(x, bb.emit(R.permute_dims(w)))), b)


def _conv(layout: str, kernel: str, groups: int = 1, padding=(1, 2, 2, 0)):
    def build(bb, x, w):
        return R.nn.conv2d(
            x, w, padding=padding, groups=groups, data_layout=layout, kernel_layout=kernel
        )

    return build


def _clip(lo: float, hi: float):
    return lambda bb, x: R.clip(x, relax.prim_value(lo), relax.prim_value(hi))


def _hardswish(bb, x):
    """torch.export's hardswish: x * clip(clip(x + 3, 0, inf), -inf, 6) / 6."""
    shifted = bb.emit(R.add(x, relax.const(3.0)))
    gate = bb.emit(_clip(-np.inf, 6.0)(bb, bb.emit(_clip(0.0, np.inf)(bb, shifted))))
    return R.divide(bb.emit(R.multiply(x, gate)), relax.const(6.0))


def _conv_hardswish(bb, x, w):
    return _hardswish(bb, bb.emit(_conv("NHWC", "HWIO")(bb, x, w)))


def _views(bb, x):
    """reshape -> permute_dims -> strided_slice, then tanh on the view."""
    reshaped = bb.emit(R.reshape(x, (4, 5, 8)))
    permuted = bb.emit(R.permute_dims(reshaped, (2, 0, 1)))
    return R.tanh(
        bb.emit(R.strided_slice(permuted, axes=[0, 2], begin=[1, 0], end=[7, 5], strides=[2, 2]))
    )


# name -> (builder, operand shapes). Shapes are small but span several vectors and tiles.
CASES = {
    "relu": (lambda bb, x: R.nn.relu(x), [(4, 40)]),
    "relu6": (lambda bb, x: R.clip(x, 0, 6), [(4, 40)]),
    "sigmoid": (lambda bb, x: R.sigmoid(x), [(4, 40)]),
    "tanh": (lambda bb, x: R.tanh(x), [(4, 40)]),
    "gelu": (lambda bb, x: R.nn.gelu(x), [(4, 40)]),
    "gelu_tanh": (lambda bb, x: R.nn.gelu_tanh(x), [(4, 40)]),
    "softmax_last": (lambda bb, x: R.nn.softmax(x, axis=-1), [(16, 12)]),
    "softmax_first": (lambda bb, x: R.nn.softmax(x, axis=0), [(12, 16)]),
    "add_broadcast": (lambda bb, x, y: R.add(x, y), [(3, 4, 10), (4, 1)]),
    "subtract": (lambda bb, x, y: R.subtract(x, y), [(5, 24), (5, 24)]),
    "multiply": (lambda bb, x, y: R.multiply(x, y), [(5, 24), (24,)]),
    "divide": (lambda bb, x, y: R.divide(x, y), [(5, 24), (5, 24)]),
    "max_pool_nchw": (
        lambda bb, x: R.nn.max_pool2d(x, (3, 3), (1, 2), (1, 1, 2, 0)),
        [(2, 3, 9, 10)],
    ),
    "max_pool_nhwc_ceil": (
        lambda bb, x: R.nn.max_pool2d(
            x, (2, 3), (2, 2), (1, 1, 1, 1), ceil_mode=True, layout="NHWC"
        ),
        [(1, 9, 10, 17)],
    ),
    "avg_pool_nchw": (
        lambda bb, x: R.nn.avg_pool2d(x, (3, 3), (2, 1), (1, 1, 1, 1), count_include_pad=True),
        [(2, 3, 9, 10)],
    ),
    "avg_pool_nhwc": (
        lambda bb, x: R.nn.avg_pool2d(x, (2, 2), (1, 1), (0, 1, 1, 0), layout="NHWC"),
        [(1, 8, 9, 17)],
    ),
    "conv_nchw": (_conv("NCHW", "OIHW"), [(2, 5, 9, 8), (6, 5, 3, 3)]),
    "conv_nhwc": (_conv("NHWC", "HWIO"), [(2, 9, 8, 5), (3, 3, 5, 6)]),
    "conv_1x1_wide_pad_nhwc": (
        _conv("NHWC", "HWIO", padding=(2, 1, 2, 2)),
        [(1, 7, 6, 5), (1, 1, 5, 4)],
    ),
    "depthwise_nchw": (_conv("NCHW", "OIHW", groups=4), [(1, 4, 9, 8), (4, 1, 3, 3)]),
    "depthwise_nhwc": (_conv("NHWC", "HWIO", groups=16), [(1, 9, 8, 16), (3, 3, 1, 16)]),
    "matmul": (lambda bb, x, y: R.matmul(x, y), [(2, 9, 20), (20, 7)]),
    "dense_bias": (_bias_dense, [(6, 20), (7, 20), (7,)]),
    "quantize_dequantize": (
        lambda bb, x: R.dequantize(
            bb.emit(R.quantize(x, relax.const(0.05), relax.const(3, "int8"), out_dtype="int8")),
            relax.const(0.05),
            relax.const(3, "int8"),
        ),
        [(4, 40)],
    ),
    "maximum": (lambda bb, x, y: R.maximum(x, y), [(5, 24), (5, 24)]),
    "minimum_broadcast": (lambda bb, x, y: R.minimum(x, y), [(3, 4, 10), (4, 1)]),
    "clip_to_inf": (_clip(-1.5, np.inf), [(4, 40)]),
    "clip_from_inf": (_clip(-np.inf, 2.0), [(4, 40)]),
    "silu": (lambda bb, x: R.nn.silu(x), [(4, 40)]),
    "x_sigmoid_x": (lambda bb, x: R.multiply(x, bb.emit(R.sigmoid(x))), [(4, 40)]),
    "hardswish": (_hardswish, [(4, 40)]),
    "conv_hardswish": (_conv_hardswish, [(1, 6, 7, 5), (3, 3, 5, 8)]),
    "concat": (lambda bb, x, y: R.concat([x, y], axis=1), [(3, 5), (3, 7)]),
    "views_tanh": (_views, [(20, 8)]),
    "broadcast_sigmoid": (
        lambda bb, x: R.sigmoid(bb.emit(R.broadcast_to(x, (3, 4, 10)))),
        [(4, 1)],
    ),
    "mean_last": (lambda bb, x: R.mean(x, axis=[-1], keepdims=True), [(4, 40)]),
    "mean_spatial": (lambda bb, x: R.mean(x, axis=[2, 3]), [(2, 3, 5, 6)]),
    "adaptive_avg_pool": (lambda bb, x: R.nn.adaptive_avg_pool2d(x, (1, 1)), [(2, 3, 5, 6)]),
    "layer_norm": (
        lambda bb, x, g, b: R.nn.layer_norm(x, g, b, axes=[-1]),
        [(4, 40), (40,), (40,)],
    ),
    "max_pool1d": (lambda bb, x: R.nn.max_pool1d(x, 3, 1, 1), [(2, 3, 17)]),
    "matmul_row": (lambda bb, x, y: R.matmul(x, y), [(1, 20), (20, 7)]),
    "matmul_column": (lambda bb, x, y: R.matmul(x, y), [(6, 20), (20, 1)]),
    "batch_norm": (
        lambda bb, x, g, b, m, v: R.nn.batch_norm(x, g, b, m, v, axis=1, training=False)[0],
        [(2, 4, 5, 6), (4,), (4,), (4,), (4,)],
    ),
}


SUMS = ("avg_pool", "conv", "depthwise", "matmul", "dense", "mean", "adaptive", "layer_norm")


def _inputs(name: str, shapes) -> list[np.ndarray]:
    rng = np.random.default_rng(list(name.encode()))
    special = SPECIAL_FOR_SUMS if name.startswith(SUMS) else SPECIAL
    # Sparser in reductions, so that not every output sees a NaN.
    fraction = 0.05 if name.startswith(SUMS) else 0.3
    arrays = [salted(rng, shape, special, fraction) for shape in shapes]
    if name == "batch_norm":
        arrays[4] = np.abs(arrays[4])  # a NaN variance is still there; a negative one is not
    return arrays


@pytest.mark.parametrize("l1_kb", [None, 16])
@pytest.mark.parametrize("name", sorted(CASES))
def test_special_values_match_tvm(name, l1_kb):
    build, shapes = CASES[name]
    mod = module(build, *shapes)
    arrays = _inputs(name, shapes)
    expected = run(mod, arrays)
    config = example_npu.NPUConfig(l1_sram_kb=l1_kb) if l1_kb else None
    partitioned, report = partition_with_report(mod, config=config)
    assert not report.cpu_ops, f"{name} was not offloaded whole:\n{report.table()}"
    assert_same_special_values(run(partitioned, arrays), expected)


@pytest.mark.parametrize(
    "row",
    [[np.inf, 1, 2, 3], [np.nan, 1, 2, 3], [-np.inf] * 4, [np.inf, np.inf, 0, 0], [3e38] * 4,
     [-np.inf, 1, 2, 3], [0, -100, -200, 5]],
)  # fmt: skip
def test_softmax_rows_with_special_values(row):
    """The issue's rows: +inf gives NaN everywhere, NaN does not vanish, -inf gives exactly 0."""
    mod = module(lambda bb, x: R.nn.softmax(x, axis=-1), (3, 4))
    x = np.array([row] * 3, "float32")
    expected = run(mod, [x])
    actual = run(example_npu.partition_for_npu(mod), [x])
    assert_same_special_values(actual, expected)
    np.testing.assert_array_equal(actual == 0, expected == 0)  # e^-inf is 0, not ~1e-38


def test_packed_gemm_path_with_special_values():
    """A deep matmul tile on a 64 MB L1 is past the in-place GEMM's size, so the packed GEMM
    computes it: NaN and infinities in single rows of A and columns of B give TVM's NaN and inf
    rows and columns, the rest stays finite."""
    rng = np.random.default_rng(13)
    a = rng.standard_normal((48, 32768)).astype("float32")
    b = rng.standard_normal((32768, 16)).astype("float32")
    a[1, 5], a[2, 100], a[3, 7], a[3, 9] = np.nan, np.inf, np.inf, -np.inf
    b[200, 3], b[10, 7] = np.inf, np.nan
    mod = module(lambda bb, x, y: R.matmul(x, y), a.shape, b.shape)
    config = example_npu.NPUConfig(l1_sram_kb=65536)
    partitioned, report = partition_with_report(mod, config=config)
    assert not report.cpu_ops, report.table()
    expected = run(mod, [a, b])
    finite = np.isfinite(expected)
    assert np.isnan(expected).any() and np.isinf(expected).any() and finite.any()
    actual = run(partitioned, [a, b])
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected), "NaN positions differ")
    np.testing.assert_array_equal(actual[np.isinf(expected)], expected[np.isinf(expected)])
    # Finite sums of 32768 products: within float32's summation error bound of the exact value.
    with np.errstate(invalid="ignore", over="ignore"):
        exact = a.astype("float64") @ b.astype("float64")
        bound = a.shape[1] * np.finfo("float32").eps * (np.abs(a) @ np.abs(b).astype("float64"))
    assert (np.abs(actual[finite] - exact[finite]) <= bound[finite]).all()


@pytest.mark.parametrize("l1_kb", [None, 16])
@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_of_all_minus_inf_is_nan_as_in_tvm(axis, l1_kb):
    """Rows (or columns) of only -inf, long enough for the vector path and split by a small L1:
    TVM gives NaN (e^(-inf - -inf)); a row with one finite value gives exactly 1 and 0s."""
    x = np.random.default_rng(5).standard_normal((6, 70)).astype("float32")
    x[1, :] = -np.inf
    x[3, :] = -np.inf
    x[3, 17] = 2.5
    x[:, 40] = -np.inf
    x = x if axis == -1 else x.T.copy()
    mod = module(lambda bb, v: R.nn.softmax(v, axis=axis), x.shape)
    expected = run(mod, [x])
    config = example_npu.NPUConfig(l1_sram_kb=l1_kb) if l1_kb else None
    actual = run(example_npu.partition_for_npu(mod, config=config), [x])
    assert np.isnan(expected).any() and (expected == 1).any()
    assert_same_special_values(actual, expected)
    np.testing.assert_array_equal(actual == 0, expected == 0)


@pytest.mark.parametrize("kind", ["conv2d", "dense"])
def test_quantized_layers_with_special_inputs_match_tvm(kind):
    """NaN and infinities reach the int8 kernels (VNNI or portable) through quantize: NaN and +inf
    become the dtype's maximum, -inf its minimum, as TVM's build clips them; the integer layer
    then stays within TVM's float QDQ build's 1 LSB."""
    rng = np.random.default_rng(11)
    x_shape, w_shape = ((1, 8, 9, 9), (16, 8, 3, 3)) if kind == "conv2d" else ((6, 64), (16, 64))
    mod = qdq_module(
        kind,
        x_shape,
        rng.integers(-127, 128, size=w_shape).astype("int8"),
        rng.uniform(0.01, 0.02, size=w_shape[0]).astype("float32"),
        (0.05, 3),
        (0.1, -2),
        bias=rng.standard_normal(w_shape[0]).astype("float32"),
        activation="relu",
        conv_attrs={"padding": (1, 1, 1, 1)} if kind == "conv2d" else None,
        float_input=True,
    )
    x = salted(rng, x_shape, fraction=0.2)
    expected = run(mod, [x])
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops, report.table()
    actual = run(partitioned, [x])
    assert np.abs(actual.astype(np.int64) - expected.astype(np.int64)).max() <= 1


def test_huge_input_through_a_model_gives_tvms_nan():
    """A model fed 3e38 everywhere: the dense overflows to inf and the softmax turns it to NaN."""
    rng = np.random.default_rng(3)
    w = relax.const(np.abs(rng.standard_normal((10, 16))).astype("float32"))

    def build(bb, x):
        logits = bb.emit(R.matmul(x, bb.emit(R.permute_dims(w))))
        return R.nn.softmax(bb.emit(R.nn.relu(logits)), axis=-1)

    mod = module(build, (2, 16))
    x = np.full((2, 16), 3e38, "float32")
    expected = run(mod, [x])
    assert np.isnan(expected).all()
    assert_same_special_values(run(example_npu.partition_for_npu(mod), [x]), expected)
