"""The ops of detection and segmentation networks on the NPU, each against TVM's CPU build.

Resampling (nearest / bilinear in every coordinate mode the frontends emit), transposed
convolution (strides, padding, output padding, dilation, groups), group / instance norm, leaky
ReLU and PReLU (torch's and ONNX's import), the reductions sum / max / min / variance /
argmax / argmin, log_softmax and padding (constant, reflect, replicate, circular). Copies
(nearest resampling, max / min, argmax, padding, leaky ReLU) are bit-exact; the rest is
compared within float32 rounding of a different summation order.
"""

from __future__ import annotations

import numpy as np
import pytest
from example_npu.frontend.canonicalize import canonicalize
from example_npu.partition.report import partition_with_report
from spec_models import npu_ops
from test_glue_ops import data, module, offloaded_and_compared, run
from tvm import relax

op = relax.op

_RESIZE_MODES = [
    ("nearest_neighbor", "asymmetric", "floor"),  # PyTorch's nearest / ONNX's default nearest
    ("nearest_neighbor", "half_pixel", "round_prefer_ceil"),
    ("nearest_neighbor", "tf_half_pixel_for_nn", "round"),
    ("nearest_neighbor", "align_corners", ""),
    ("linear", "half_pixel", ""),  # PyTorch's bilinear, align_corners=False
    ("linear", "align_corners", ""),
    ("linear", "asymmetric", ""),
    ("linear", "pytorch_half_pixel", ""),
]


@pytest.mark.parametrize(("method", "mode", "rounding"), _RESIZE_MODES)
@pytest.mark.parametrize(
    ("layout", "shape", "size"),
    [("NCHW", (1, 3, 5, 6), (10, 12)), ("NHWC", (2, 7, 5, 4), (3, 9))],
    ids=["nchw-up", "nhwc-down"],
)
def test_resize2d(method, mode, rounding, layout, shape, size):
    mod = module(
        {"x": (shape, "float32")},
        lambda bb, v: op.image.resize2d(
            v["x"],
            size,
            layout=layout,
            method=method,
            coordinate_transformation_mode=mode,
            rounding_method=rounding,
        ),
    )
    exact = method == "nearest_neighbor"
    offloaded_and_compared(mod, [data(shape, "float32")], exact=exact)


@pytest.mark.parametrize("method", ["nearest_neighbor", "linear"])
def test_resize2d_of_int8_is_exact(method):
    shape = (1, 4, 3, 5)
    mod = module(
        {"x": (shape, "int8")},
        lambda bb, v: op.image.resize2d(
            v["x"], (6, 10), method=method, coordinate_transformation_mode="asymmetric"
        ),
    )
    offloaded_and_compared(mod, [data(shape, "int8")])


def test_bicubic_resize2d_stays_on_the_cpu_with_its_reason():
    mod = module(
        {"x": ((1, 2, 4, 4), "float32")},
        lambda bb, v: op.image.resize2d(v["x"], (8, 8), method="cubic"),
    )
    _, report = partition_with_report(mod)
    assert "method cubic" in report.cpu_reason("relax.image.resize2d")


_TRANSPOSED = [
    # (in shape NCHW, out channels, kernel, stride, padding, output padding, dilation, groups)
    ((1, 8, 5, 5), 4, 2, 2, 0, 0, 1, 1),  # U-Net's 2x up-convolution
    ((1, 6, 4, 5), 6, 3, 2, 1, 1, 1, 1),
    ((2, 4, 3, 3), 8, 3, 3, 1, 2, 1, 2),
    ((1, 5, 4, 4), 3, 3, 1, 0, 0, 2, 1),
    ((1, 6, 6, 3), 6, 4, 2, 1, 0, 1, 6),  # depthwise
]


def _transposed_module(case, layout: str):
    shape, out_channels, kernel, stride, pad, out_pad, dilation, groups = case
    channels = shape[1]
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((channels, out_channels // groups, kernel, kernel))
    bias = rng.standard_normal(out_channels).astype("float32")
    if layout == "NHWC":
        shape = (shape[0], shape[2], shape[3], shape[1])
    bias_shape = (1, out_channels, 1, 1) if layout == "NCHW" else (out_channels,)

    def body(bb, v):
        y = bb.emit(
            op.nn.conv2d_transpose(
                v["x"],
                relax.const(weight.astype("float32")),
                strides=stride,
                padding=pad,
                output_padding=out_pad,
                dilation=dilation,
                groups=groups,
                data_layout=layout,
            )
        )
        return op.add(y, relax.const(bias.reshape(bias_shape)))

    return module({"x": (shape, "float32")}, body)


@pytest.mark.parametrize("case", _TRANSPOSED, ids=[str(i) for i in range(len(_TRANSPOSED))])
def test_conv2d_transpose_with_bias(case):
    x = data(case[0], "float32")
    offloaded_and_compared(_transposed_module(case, "NCHW"), [x], exact=False, atol=1e-4)


@pytest.mark.parametrize("case", _TRANSPOSED[1:3], ids=["1", "2"])
def test_conv2d_transpose_nhwc_equals_tvms_nchw_build(case):
    """TVM's CPU build has no NHWC conv2d_transpose: the reference is its NCHW build."""
    x = data(case[0], "float32")
    partitioned, report = partition_with_report(_transposed_module(case, "NHWC"))
    assert not report.cpu_ops, report.table()
    (npu,) = run(partitioned, [x.transpose(0, 2, 3, 1)])
    (cpu,) = run(_transposed_module(case, "NCHW"), [x])
    np.testing.assert_allclose(npu, cpu.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-4)


def test_conv2d_transpose_with_an_oihw_weight_stays_on_the_cpu():
    weight = relax.const(np.ones((2, 3, 3, 3), "float32"))
    mod = module(
        {"x": ((1, 3, 4, 4), "float32")},
        lambda bb, v: op.nn.conv2d_transpose(v["x"], weight, strides=2, kernel_layout="OIHW"),
    )
    _, report = partition_with_report(mod)
    assert "kernel layout OIHW" in report.cpu_reason("relax.nn.conv2d_transpose")


@pytest.mark.parametrize(
    ("shape", "groups", "channel_axis", "axes"),
    [((2, 8, 5, 6), 4, 1, [2, 3]), ((1, 6, 7, 7), 6, 1, [2, 3]), ((1, 5, 4, 12), 3, 3, [1, 2])],
)
def test_group_norm(shape, groups, channel_axis, axes):
    channels = shape[channel_axis]
    rng = np.random.default_rng(4)
    gamma = relax.const(rng.uniform(0.5, 1.5, channels).astype("float32"))
    beta = relax.const(rng.uniform(-0.5, 0.5, channels).astype("float32"))
    mod = module(
        {"x": (shape, "float32")},
        lambda bb, v: op.nn.group_norm(v["x"], gamma, beta, groups, channel_axis, axes),
    )
    offloaded_and_compared(mod, [data(shape, "float32")], exact=False, atol=1e-4, rtol=1e-4)


def test_instance_norm_then_leaky_relu():
    shape = (2, 5, 6, 7)
    rng = np.random.default_rng(5)
    gamma = relax.const(rng.uniform(0.5, 1.5, 5).astype("float32"))
    beta = relax.const(rng.uniform(-0.5, 0.5, 5).astype("float32"))

    def body(bb, v):
        y = bb.emit(op.nn.instance_norm(v["x"], gamma, beta, 1, [2, 3]))
        return op.nn.leakyrelu(y, 0.2)

    mod = module({"x": (shape, "float32")}, body)
    offloaded_and_compared(mod, [data(shape, "float32")], exact=False, atol=1e-4, rtol=1e-4)


def test_leakyrelu_is_bit_exact():
    mod = module({"x": ((3, 50), "float32")}, lambda bb, v: op.nn.leakyrelu(v["x"], 0.01))
    offloaded_and_compared(mod, [data((3, 50), "float32")])


@pytest.mark.parametrize(
    ("shape", "slope_shape", "axis"),
    [
        ((2, 4, 3, 5), (4,), 1),  # torch.export: nn.PReLU(4)
        ((2, 4, 3, 5), (1,), 3),  # torch's nn.PReLU() / ONNX's one slope
        ((3, 6), (6,), 1),
    ],
)
def test_prelu(shape, slope_shape, axis):
    slope = relax.const(np.random.default_rng(6).uniform(0, 0.5, slope_shape).astype("float32"))
    mod = module({"x": (shape, "float32")}, lambda bb, v: op.nn.prelu(v["x"], slope, axis))
    offloaded_and_compared(mod, [data(shape, "float32")])


def test_prelu_of_onnx_import_reshapes_its_slope_on_the_npu():
    """ONNX's PRelu slope (C, 1, 1) is reshaped to (C,) by the importer."""
    slope = relax.const(np.linspace(0.05, 0.4, 4).reshape(4, 1, 1).astype("float32"))

    def body(bb, v):
        flat = bb.emit(op.reshape(slope, (4,)))
        return op.nn.prelu(v["x"], flat, 1)

    shape = (1, 4, 3, 3)
    offloaded_and_compared(module({"x": (shape, "float32")}, body), [data(shape, "float32")])


@pytest.mark.parametrize("name", ["sum", "max", "min", "variance"])
@pytest.mark.parametrize(
    ("axes", "keepdims", "shape"),
    [([1], True, (2, 5, 3)), ([2, 3], False, (2, 3, 4, 5)), (None, False, (4, 6))],
)
def test_reductions(name, axes, keepdims, shape):
    mod = module(
        {"x": (shape, "float32")},
        lambda bb, v: getattr(op, name)(v["x"], axis=axes, keepdims=keepdims),
    )
    exact = name in ("max", "min")
    offloaded_and_compared(mod, [data(shape, "float32")], exact=exact, atol=1e-4)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize(
    ("axis", "keepdims", "shape"),
    [(1, False, (1, 5, 6, 7)), (-1, True, (3, 9)), (None, False, (4, 5))],
)
def test_arg_reductions_give_int64_indices(name, axis, keepdims, shape):
    x = data(shape, "float32").round()  # ties: the first index, as TVM
    mod = module(
        {"x": (shape, "float32")},
        lambda bb, v: getattr(op, name)(v["x"], axis=axis, keepdims=keepdims),
    )
    offloaded_and_compared(mod, [x])


@pytest.mark.parametrize(("shape", "axis"), [((2, 10), -1), ((1, 6, 4, 4), 1)])
def test_log_softmax(shape, axis):
    mod = module({"x": (shape, "float32")}, lambda bb, v: op.nn.log_softmax(v["x"], axis))
    offloaded_and_compared(mod, [data(shape, "float32")], exact=False)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_pad(mode, dtype):
    shape = (1, 3, 5, 6)
    widths = [0, 0, 0, 1, 2, 1, 3, 2]
    mod = module(
        {"x": (shape, dtype)},
        lambda bb, v: op.nn.pad(v["x"], widths, pad_mode=mode, pad_value=2.0),
    )
    offloaded_and_compared(mod, [data(shape, dtype)])


def _where_prelu(form: str, slope: np.ndarray):
    def body(bb, v):
        x, s, zero = v["x"], relax.const(slope), relax.const(0.0, "float32")
        if form == "torch":  # torch.export: where(x > 0, x, slope * x)
            return op.where(bb.emit(op.greater(x, zero)), x, bb.emit(op.multiply(s, x)))
        return op.where(bb.emit(op.less(x, zero)), bb.emit(op.multiply(x, s)), x)  # ONNX

    return body


@pytest.mark.parametrize(
    ("form", "slope_shape"), [("torch", (1, 4, 1, 1)), ("torch", (1, 1, 1, 1)), ("onnx", (4, 3, 1))]
)
def test_prelu_as_where_is_one_npu_prelu(form, slope_shape):
    shape = (2, 4, 3, 5)
    slope = np.random.default_rng(7).uniform(0, 0.5, slope_shape).astype("float32")
    mod = module({"x": (shape, "float32")}, _where_prelu(form, slope))
    offloaded_and_compared(mod, [data(shape, "float32")])


def test_where_that_is_not_a_prelu_is_a_select_not_a_prelu():
    """where(x > 1, x, 0.5 * x) compares with 1: the PReLU form refuses it (its reason says
    why), the general select runs it."""

    def body(bb, v):
        x = v["x"]
        keep = bb.emit(op.greater(x, relax.const(1.0, "float32")))
        return op.where(keep, x, bb.emit(op.multiply(x, relax.const(0.5, "float32"))))

    mod = module({"x": ((2, 6), "float32")}, body)
    partitioned, _ = partition_with_report(mod)
    assert "nn.prelu" not in npu_ops(partitioned) and "where" in npu_ops(partitioned)
    offloaded_and_compared(mod, [data((2, 6), "float32")])


@pytest.mark.parametrize(("shape", "repeats"), [((4,), [1]), ((2, 3), [2, 1]), ((1, 2, 3), [3, 2])])
def test_tile_copies_by_dma(shape, repeats):
    mod = module({"x": (shape, "float32")}, lambda bb, v: op.tile(v["x"], repeats))
    offloaded_and_compared(mod, [data(shape, "float32")])


def _qdq(body, scale_in: float = 0.05, scale_out: float = 0.04):
    """dequantize(int8 x) -> body -> quantize: the QDQ form onnxruntime's quantizer leaves."""

    def wrapped(bb, v):
        x = bb.emit(op.dequantize(v["x"], relax.const(scale_in), relax.const(np.int8(3))))
        y = bb.emit(body(bb, x))
        return op.quantize(y, relax.const(scale_out), relax.const(np.int8(-2)), out_dtype="int8")

    return wrapped


def test_qdq_leakyrelu_is_an_integer_table():
    mod = module({"x": ((1, 4, 5, 5), "int8")}, _qdq(lambda bb, x: op.nn.leakyrelu(x, 0.1)))
    _, report = partition_with_report(mod)
    assert report.npu_ops["relax.take"] == 1 and "relax.nn.leakyrelu" not in report.npu_ops
    offloaded_and_compared(mod, [data((1, 4, 5, 5), "int8")])


def test_qdq_nearest_upsampling_resamples_the_integers():
    def upsample(bb, x):
        return op.image.resize2d(
            x,
            (10, 10),
            method="nearest_neighbor",
            coordinate_transformation_mode="asymmetric",
            rounding_method="floor",
        )

    mod = module({"x": ((1, 4, 5, 5), "int8")}, _qdq(upsample, 0.05, 0.05))
    assert "R.image.resize2d(lv1" in canonicalize(mod).script()  # of the quantized lv1
    offloaded_and_compared(mod, [data((1, 4, 5, 5), "int8")])


def test_qdq_transposed_conv_and_bilinear_resize_run_between_npu_dequantize_and_quantize():
    weight = relax.const(np.random.default_rng(8).standard_normal((4, 3, 2, 2)).astype("float32"))

    def decoder(bb, x):
        up = bb.emit(op.nn.conv2d_transpose(x, weight, strides=2))
        return op.image.resize2d(up, (7, 7), method="linear")

    mod = module({"x": ((1, 4, 5, 5), "int8")}, _qdq(decoder, 0.05, 0.1))
    offloaded_and_compared(mod, [data((1, 4, 5, 5), "int8")])
