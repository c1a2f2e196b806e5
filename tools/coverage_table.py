"""Coverage table: which op x layout x dtype runs on the NPU, generated from the pattern checks.

``python tools/coverage_table.py`` prints the table as markdown.
``docs/reference/coverage.md`` is that output, committed, and a test keeps it equal to what this
module generates now. Each row builds one representative Relax call (or a short chain, for the
fused rows) for each dtype. Each call goes through :func:`example_npu.partition_with_report`. A
cell then says ``offloaded``, ``rejected (n)`` or ``partial (n)`` (some of a chain's ops stayed
on the CPU) with the check's reason n listed below the table, or ``n/a`` when Relax itself does
not accept the op for that dtype.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import example_npu  # noqa: F401  # registers the patterns
import numpy as np
import tvm
from example_npu.frontend.canonicalize import canonicalize
from example_npu.partition.report import partition_with_report
from example_npu.partition.table import PREFIX, UNARY_MATH
from tvm import relax
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
from tvm.relax.transform import FuseOpsByPattern

DTYPES = ("float32", "float16", "int8", "uint8", "int16", "float64")
OUTPUT = "docs/reference/coverage.md"
REGENERATE = f"python tools/coverage_table.py > {OUTPUT}"

# "nn.conv2d: " / "depthwise_conv2d: " at the start of a check's reason.
_ROLE_PREFIX = re.compile(r"^[\w.]+: ")

Params = Sequence[tuple[str, tuple[int, ...]]]
Body = Callable[[relax.BlockBuilder, dict[str, relax.Var], str], relax.Expr]


@dataclass(frozen=True)
class Probe:
    """One row: a representative call built for any dtype."""

    op: str
    layout: str
    params: Params
    body: Body
    # dtype of each parameter given the row's dtype (quantize takes float data for int rows).
    param_dtype: Callable[[str, str], str] = lambda name, dtype: dtype

    def build(self, dtype: str) -> tvm.IRModule:
        vars_ = {
            name: relax.Var(name, relax.TensorType(shape, self.param_dtype(name, dtype)))
            for name, shape in self.params
        }
        bb = relax.BlockBuilder()
        with bb.function("main", list(vars_.values())):
            with bb.dataflow():
                out = bb.emit_output(self.body(bb, vars_, dtype))
            bb.emit_func_output(out)
        return bb.get()


def _single(op: Callable[..., relax.Expr], *names: str, **attrs) -> Body:
    return lambda bb, v, dtype: op(*[v[name] for name in names], **attrs)


def _conv_probe(
    name: str,
    op: Callable[..., relax.Expr],
    layouts: tuple[str, str],
    shapes: tuple[tuple[int, ...], tuple[int, ...]],
    **attrs,
) -> Probe:
    """A convolution of data "x" and weight "w" in the given (data, kernel) layouts."""
    data_layout, kernel_layout = layouts
    return Probe(
        name,
        f"{data_layout} / {kernel_layout}",
        (("x", shapes[0]), ("w", shapes[1])),
        _single(op, "x", "w", data_layout=data_layout, kernel_layout=kernel_layout, **attrs),
    )


def _conv_probes() -> list[Probe]:
    conv2d, conv1d = relax.op.nn.conv2d, relax.op.nn.conv1d
    data = {"NCHW": (1, 4, 6, 6), "NHWC": (1, 6, 6, 4)}
    weight = {"OIHW": (8, 4, 3, 3), "HWIO": (3, 3, 4, 8)}
    probes = [
        _conv_probe(
            "conv2d",
            conv2d,
            layouts,
            (data[layouts[0]], weight[layouts[1]]),
            padding=(1, 0, 1, 2),
            strides=(2, 1),
        )
        for layouts in (("NCHW", "OIHW"), ("NHWC", "HWIO"), ("NCHW", "HWIO"), ("NHWC", "OIHW"))
    ]
    probes.append(
        _conv_probe(
            "conv2d (groups=2)", conv2d, ("NCHW", "OIHW"), ((1, 4, 6, 6), (6, 2, 3, 3)), groups=2
        )
    )
    probes += [
        _conv_probe("depthwise_conv2d", conv2d, layouts, shapes, groups=4, padding=1)
        for layouts, shapes in (
            (("NCHW", "OIHW"), ((1, 4, 6, 6), (8, 1, 3, 3))),
            (("NHWC", "HWIO"), ((1, 6, 6, 4), (3, 3, 1, 8))),
        )
    ]
    probes += [
        _conv_probe("conv1d", conv1d, layouts, shapes, strides=2, padding=(1, 2))
        for layouts, shapes in (
            (("NCW", "OIW"), ((1, 4, 9), (6, 4, 3))),
            (("NWC", "WIO"), ((1, 9, 4), (3, 4, 6))),
        )
    ]
    return probes


def _pool_probes() -> list[Probe]:
    probes = []
    for name, op in (
        ("max_pool2d", relax.op.nn.max_pool2d),
        ("avg_pool2d", relax.op.nn.avg_pool2d),
    ):
        for layout, shape in (("NCHW", (1, 4, 7, 7)), ("NHWC", (1, 7, 7, 4))):
            probes.append(
                Probe(
                    name,
                    layout,
                    (("x", shape),),
                    _single(op, "x", pool_size=(3, 3), strides=(2, 2), padding=1, layout=layout),
                )
            )
    return probes


def _batch_norm(bb: relax.BlockBuilder, v: dict[str, relax.Var], dtype: str) -> relax.Expr:
    stats = [v[name] for name in ("gamma", "beta", "mean", "var")]
    bn = bb.emit(relax.op.nn.batch_norm(v["x"], *stats, axis=1, training=False))
    return relax.TupleGetItem(bn, 0)


def _dense(bb: relax.BlockBuilder, v: dict[str, relax.Var], dtype: str) -> relax.Expr:
    return relax.op.matmul(v["x"], bb.emit(relax.op.permute_dims(v["w"])))


def _then(first: Body, *ops: Callable[..., relax.Expr], bias: str = "") -> Body:
    """first, then + bias (when named), then each of ops in turn."""

    def body(bb: relax.BlockBuilder, v: dict[str, relax.Var], dtype: str) -> relax.Expr:
        out = first(bb, v, dtype)
        if bias:
            out = relax.op.add(bb.emit(out), v[bias])
        for op in ops:
            out = op(bb.emit(out))
        return out

    return body


def _conv_bias(bb: relax.BlockBuilder, v: dict[str, relax.Var], dtype: str) -> relax.Expr:
    conv = bb.emit(relax.op.nn.conv2d(v["x"], v["w"], padding=1))
    return relax.op.add(conv, bb.emit(relax.op.reshape(v["b"], (1, 8, 1, 1))))


def _relu6(x: relax.Expr) -> relax.Expr:
    return relax.op.clip(x, 0, 6)


def _quantize_dtype(name: str, dtype: str) -> str:
    return {"x": "float32", "scale": "float32", "zero_point": dtype}[name]


def _dequantize_dtype(name: str, dtype: str) -> str:
    return {"x": dtype, "scale": "float32", "zero_point": dtype}[name]


def _const(values, dtype: str) -> relax.Expr:
    return relax.const(np.asarray(values, dtype=dtype))


def _qdq_chain(producer: str, bias: bool, activation: str | None) -> Body:
    """dequantize(x) -> producer(., dequantize(int8 weight)) [+ bias] [+ act] -> quantize."""

    def body(bb: relax.BlockBuilder, v: dict[str, relax.Var], dtype: str) -> relax.Expr:
        channels = 8
        x = bb.emit(relax.op.dequantize(v["x"], _const(0.05, "float32"), _const(0, dtype)))
        shape = {
            "conv2d": (channels, 4, 3, 3),
            "conv2d_transpose": (4, channels, 2, 2),
            "matmul": (4, channels),
            "dense": (channels, 4),
        }
        axis = {"conv2d": 0, "conv2d_transpose": 1, "matmul": 1, "dense": 0}[producer]
        w = bb.emit(
            relax.op.dequantize(
                _const(np.ones(shape[producer]), "int8"),
                _const(np.full(channels, 0.01), "float32"),
                _const(np.zeros(channels), "int8"),
                axis=axis,
            )
        )
        if producer == "conv2d":
            y = bb.emit(relax.op.nn.conv2d(x, w))
        elif producer == "conv2d_transpose":
            y = bb.emit(relax.op.nn.conv2d_transpose(x, w, strides=2))
        elif producer == "matmul":
            y = bb.emit(relax.op.matmul(x, w))
        else:
            y = bb.emit(relax.op.matmul(x, relax.op.permute_dims(w)))
        if bias:
            bias_shape = (1, channels, 1, 1) if producer.startswith("conv2d") else (channels,)
            y = bb.emit(relax.op.add(y, _const(np.zeros(bias_shape), "float32")))
        if activation == "relu":
            y = bb.emit(relax.op.nn.relu(y))
        elif activation == "relu6":
            y = bb.emit(_relu6(y))
        return relax.op.quantize(y, _const(0.1, "float32"), _const(0, dtype), out_dtype=dtype)

    return body


def _qdq_probes() -> list[Probe]:
    rows = []
    for producer in ("conv2d", "conv2d_transpose", "matmul", "dense"):
        x_shape = (1, 4, 6, 6) if producer.startswith("conv2d") else (3, 4)
        for bias in (False, True):
            for activation in (None, "relu", "relu6"):
                name = f"QDQ {producer}" + (" + bias" if bias else "")
                name += f" + {activation}" if activation else ""
                rows.append(
                    Probe(
                        name,
                        "dequantize -> op -> quantize, int8 weight",
                        (("x", x_shape),),
                        _qdq_chain(producer, bias, activation),
                    )
                )
    return rows


def _safe_softmax(bb: relax.BlockBuilder, v: dict[str, relax.Var], dtype: str) -> relax.Expr:
    """torch.export's masked-attention softmax: rows that are all -inf give 0."""
    x = v["x"]
    softmax = bb.emit(relax.op.nn.softmax(x, axis=-1))
    kept = bb.emit(relax.op.logical_not(relax.op.equal(x, _const(-np.inf, dtype))))
    row_max = bb.emit(relax.op.max(relax.op.astype(kept, "int8"), axis=[-1], keepdims=True))
    masked = bb.emit(relax.op.logical_not(relax.op.astype(row_max, "bool")))
    fill = bb.emit(relax.op.full_like(softmax, _const(0.0, dtype)))
    return relax.op.where(masked, fill, softmax)


def _nan_guarded_softmax(bb: relax.BlockBuilder, v: dict[str, relax.Var], dtype: str) -> relax.Expr:
    """The ONNX exporter's masked-attention softmax: NaNs of the softmax become 0."""
    softmax = bb.emit(relax.op.nn.softmax(v["x"], axis=-1))
    return relax.op.where(relax.op.isnan(softmax), _const(0.0, dtype), softmax)


def _select(bb: relax.BlockBuilder, v: dict[str, relax.Var], dtype: str) -> relax.Expr:
    """torch's softplus threshold: where(x > 20, x, exp(x))."""
    return relax.op.where(
        relax.op.greater(v["x"], _const(20.0, dtype)), v["x"], relax.op.exp(v["x"])
    )


def _glue_probes() -> list[Probe]:
    """Data movement (any dtype), reductions, normalisation and the activation forms."""
    image = (("x", (1, 4, 6, 6)),)
    nhwc = (("x", (1, 6, 6, 4)),)
    vector = (("x", (2, 3, 4)),)
    op = relax.op
    return [
        Probe("reshape", "view", image, _single(op.reshape, "x", shape=(1, 4, 36))),
        Probe("flatten", "view", image, _single(op.flatten, "x")),
        Probe("squeeze", "view", (("x", (1, 4, 1, 6)),), _single(op.squeeze, "x", axis=[2])),
        Probe("expand_dims", "view", vector, _single(op.expand_dims, "x", axis=[1])),
        Probe(
            "permute_dims", "DMA transpose", vector, _single(op.permute_dims, "x", axes=[2, 0, 1])
        ),
        Probe(
            "concat",
            "axis=1, DMA into slices",
            (("a", (1, 4, 3, 3)), ("b", (1, 2, 3, 3))),
            lambda bb, v, dtype: op.concat([v["a"], v["b"]], axis=1),
        ),
        Probe(
            "split",
            "channels",
            image,
            lambda bb, v, dtype: bb.emit(op.split(v["x"], 2, axis=1))[1],
        ),
        Probe(
            "strided_slice",
            "channels, step 2",
            image,
            _single(op.strided_slice, "x", axes=[1], begin=[1], end=[4], strides=[2]),
        ),
        Probe(
            "take",
            "constant scalar index",
            vector,
            lambda bb, v, dtype: op.take(v["x"], relax.const(1, "int64"), axis=1),
        ),
        Probe(
            "take",
            "constant indices stepping evenly (as_strided)",
            vector,
            lambda bb, v, dtype: op.take(
                v["x"], relax.const(np.arange(0, 4, 2).reshape(1, 2), "int64"), axis=1
            ),
        ),
        Probe(
            "take",
            "run-time int32 ids, axis 0 (embedding: DMA row gather)",
            (("table", (8, 4)), ("ids", (3,))),
            _single(op.take, "table", "ids", axis=0),
            param_dtype=lambda name, dtype: "int32" if name == "ids" else dtype,
        ),
        Probe("astype", "to float32", vector, _single(op.astype, "x", dtype="float32")),
        Probe(
            "astype",
            "int64 to float32 (a tokenizer mask)",
            vector,
            _single(op.astype, "x", dtype="float32"),
            param_dtype=lambda name, dtype: "int64",
        ),
        Probe(
            "astype",
            "float32 to int32 (computed position ids)",
            vector,
            _single(op.astype, "x", dtype="int32"),
        ),
        Probe(
            "broadcast_to",
            "stride-0 view",
            (("x", (1, 3, 1)),),
            _single(op.broadcast_to, "x", shape=(2, 3, 4)),
        ),
        Probe(
            "mean", "spatial, keepdims", image, _single(op.mean, "x", axis=[2, 3], keepdims=True)
        ),
        Probe("mean", "last axis", vector, _single(op.mean, "x", axis=[-1])),
        Probe(
            "adaptive_avg_pool2d",
            "NCHW, output 1x1",
            image,
            _single(op.nn.adaptive_avg_pool2d, "x", output_size=(1, 1)),
        ),
        Probe(
            "adaptive_avg_pool2d",
            "NHWC, output 2x3",
            nhwc,
            _single(op.nn.adaptive_avg_pool2d, "x", output_size=(2, 3), layout="NHWC"),
        ),
        Probe(
            "layer_norm",
            "last axis",
            (("x", (2, 3, 8)), ("gamma", (8,)), ("beta", (8,))),
            _single(op.nn.layer_norm, "x", "gamma", "beta", axes=[-1]),
        ),
        *[
            Probe(
                f"{kind}_pool1d",
                layout,
                (("x", shape),),
                _single(
                    getattr(op.nn, f"{kind}_pool1d"),
                    "x",
                    pool_size=3,
                    strides=2,
                    padding=1,
                    layout=layout,
                ),
            )
            for kind in ("max", "avg")
            for layout, shape in (("NCW", (1, 4, 9)), ("NWC", (1, 9, 4)))
        ],
        *[
            Probe(
                name,
                "broadcast",
                (("a", (2, 3, 4)), ("b", (3, 1))),
                _single(getattr(op, name), "a", "b"),
            )
            for name in ("maximum", "minimum")
        ],
        Probe(
            "clip",
            "any bounds (-inf, 6)",
            vector,
            lambda bb, v, dtype: op.clip(
                v["x"], relax.prim_value(float("-inf")), relax.prim_value(6.0)
            ),
        ),
        Probe("silu", "x * sigmoid(x)", vector, _single(op.nn.silu, "x")),
        Probe("safe_softmax", "where(all(x == -inf), 0, softmax(x))", vector, _safe_softmax),
        Probe(
            "nan_guarded_softmax",
            "where(isnan(softmax(x)), 0, softmax(x))",
            vector,
            _nan_guarded_softmax,
        ),
        Probe("select", "where(x > 20, x, exp(x))", vector, _select),
    ]


def _detection_probes() -> list[Probe]:
    """Resampling, transposed convolution, normalisation, activations and reductions of
    detection and segmentation networks."""
    image = (("x", (1, 4, 6, 6)),)
    nhwc = (("x", (1, 6, 6, 4)),)
    vector = (("x", (2, 3, 4)),)
    norm_io = (("x", (1, 4, 6, 6)), ("gamma", (4,)), ("beta", (4,)))
    op = relax.op
    resize = op.image.resize2d
    return [
        Probe(
            "image.resize2d",
            "nearest, asymmetric (PyTorch 2x upsample)",
            image,
            _single(
                resize,
                "x",
                size=(12, 12),
                method="nearest_neighbor",
                coordinate_transformation_mode="asymmetric",
                rounding_method="floor",
            ),
        ),
        Probe(
            "image.resize2d",
            "bilinear, half_pixel, NHWC",
            nhwc,
            _single(resize, "x", size=(9, 10), layout="NHWC", method="linear"),
        ),
        Probe(
            "image.resize2d",
            "bilinear, align_corners",
            image,
            _single(
                resize,
                "x",
                size=(11, 11),
                method="linear",
                coordinate_transformation_mode="align_corners",
            ),
        ),
        Probe(
            "image.resize2d", "bicubic", image, _single(resize, "x", size=(12, 12), method="cubic")
        ),
        Probe(
            "conv2d_transpose",
            "NCHW / IOHW, stride 2, padding 1, output padding 1",
            (("x", (1, 4, 5, 5)), ("w", (4, 6, 3, 3))),
            _single(op.nn.conv2d_transpose, "x", "w", strides=2, padding=1, output_padding=1),
        ),
        Probe(
            "conv2d_transpose",
            "NCHW / IOHW, groups=2",
            (("x", (1, 4, 5, 5)), ("w", (4, 3, 2, 2))),
            _single(op.nn.conv2d_transpose, "x", "w", strides=2, groups=2),
        ),
        Probe(
            "group_norm",
            "2 groups, axes [2, 3]",
            norm_io,
            _single(
                op.nn.group_norm, "x", "gamma", "beta", num_groups=2, channel_axis=1, axes=[2, 3]
            ),
        ),
        Probe(
            "instance_norm",
            "axes [2, 3]",
            norm_io,
            _single(op.nn.instance_norm, "x", "gamma", "beta", channel_axis=1, axes=[2, 3]),
        ),
        Probe("leakyrelu", "alpha 0.1", vector, _single(op.nn.leakyrelu, "x", alpha=0.1)),
        Probe(
            "prelu",
            "slope per channel, axis 1",
            (("x", (1, 4, 3, 3)), ("slope", (4,))),
            _single(op.nn.prelu, "x", "slope", axis=1),
        ),
        *[
            Probe(
                name,
                "axis=[1], keepdims",
                vector,
                _single(getattr(op, name), "x", axis=[1], keepdims=True),
            )
            for name in ("sum", "max", "min", "variance")
        ],
        *[
            Probe(name, "axis=1 -> int64", image, _single(getattr(op, name), "x", axis=1))
            for name in ("argmax", "argmin")
        ],
        Probe(
            "topk",
            "k=3, axis=1, values and int64 indices",
            image,
            _single(op.topk, "x", k=3, axis=1, ret_type="both", dtype="int64"),
        ),
        Probe(
            "prelu",
            "where(x > 0, x, slope * x) (torch.export)",
            (("x", (1, 4, 3, 3)), ("slope", (1, 4, 1, 1))),
            lambda bb, v, dtype: op.where(
                bb.emit(op.greater(v["x"], _const(0, dtype))),
                v["x"],
                bb.emit(op.multiply(v["slope"], v["x"])),
            ),
        ),
        Probe("log_softmax", "axis=-1", vector, _single(op.nn.log_softmax, "x", axis=-1)),
        Probe(
            "tile",
            "repeats [2, 1, 3], DMA copies",
            vector,
            _single(op.tile, "x", repeats=[2, 1, 3]),
        ),
        *[
            Probe(
                "pad",
                f"{mode}, H and W",
                image,
                _single(op.nn.pad, "x", pad_width=(0, 0, 0, 0, 1, 2, 2, 1), pad_mode=mode),
            )
            for mode in ("constant", "reflect", "replicate", "circular")
        ],
        Probe(
            "adaptive_avg_pool2d",
            "NCHW, output 4x4 (uneven windows)",
            image,
            _single(op.nn.adaptive_avg_pool2d, "x", output_size=(4, 4)),
        ),
    ]


def _island(glue: Callable[..., relax.Expr], inputs: int = 1) -> Body:
    """dequantize each input (its own scale) -> glue -> quantize: a QDQ island of int data."""

    def body(bb: relax.BlockBuilder, v: dict[str, relax.Var], dtype: str) -> relax.Expr:
        names = ("x", "y", "z", "w")[:inputs]
        values = [
            bb.emit(relax.op.dequantize(v[n], _const(0.05 * (i + 1), "float32"), _const(2, dtype)))
            for i, n in enumerate(names)
        ]
        out = glue(*values)
        out = out if isinstance(out, relax.Var) else bb.emit(out)
        return relax.op.quantize(out, _const(0.07, "float32"), _const(3, dtype), out_dtype=dtype)

    return body


def _integer_matmul(zero_point: bool) -> Body:
    """onnxruntime's MatMulInteger as TVM imports it, and the cast of its int32 result (ONNX
    defines it for 8-bit operands only: other dtypes are n/a)."""

    def body(bb: relax.BlockBuilder, v: dict[str, relax.Var], dtype: str) -> relax.Expr:
        if dtype not in ("int8", "uint8"):
            raise ValueError(f"MatMulInteger takes no {dtype} operands")
        x = bb.emit(relax.op.astype(v["x"], "int32"))
        if zero_point:
            x = bb.emit(relax.op.subtract(x, bb.emit(relax.op.astype(v["zp"], "int32"))))
        weight = np.arange(-64, 64, dtype=np.int8).reshape(16, 8)
        weight = bb.emit(relax.op.astype(_const(weight, "int8"), "int32"))
        return relax.op.astype(bb.emit(relax.op.matmul(x, weight, out_dtype="int32")), "float32")

    return body


def _island_probes() -> list[Probe]:
    image = (("x", (1, 4, 6, 6)),)
    pool = {"pool_size": (3, 3), "strides": (2, 2), "padding": 1}
    rows = [
        Probe("QDQ requantize", "dequantize -> quantize", image, _island(lambda x: x)),
        Probe("QDQ requantize + relu", "-", image, _island(relax.op.nn.relu)),
        Probe("QDQ requantize + clip", "clip(x, 0, 6)", image, _island(_relu6)),
        Probe("QDQ sigmoid", "256-entry table (take)", image, _island(relax.op.sigmoid)),
        Probe(
            "QDQ float tail",
            "tanh(dequantize(x)), a float result: float32 table (take)",
            image,
            lambda bb, v, dtype: relax.op.tanh(
                bb.emit(relax.op.dequantize(v["x"], _const(0.05, "float32"), _const(2, dtype)))
            ),
        ),
        Probe(
            "QDQ hardswish",
            "x * clip(x + 3, 0, 6) / 6 (ONNX import)",
            image,
            _island(
                lambda x: relax.op.multiply(
                    x, relax.op.divide(_relu6(x + _const(3, "float32")), _const(6, "float32"))
                )
            ),
        ),
        Probe(
            "QDQ max_pool2d", "NCHW", image, _island(lambda x: relax.op.nn.max_pool2d(x, **pool))
        ),
        Probe(
            "QDQ avg_pool2d", "NCHW", image, _island(lambda x: relax.op.nn.avg_pool2d(x, **pool))
        ),
        Probe(
            "QDQ mean",
            "axis=[2, 3] (global average pool)",
            image,
            _island(lambda x: relax.op.mean(x, axis=[2, 3], keepdims=True)),
        ),
        Probe("QDQ softmax", "axis=1", image, _island(lambda x: relax.op.nn.softmax(x, axis=1))),
    ]
    rows.append(
        Probe(
            "QDQ matmul",
            "two run-time tensors (attention), batched",
            (("x", (1, 2, 8, 16)), ("y", (1, 2, 16, 8))),
            _island(relax.op.matmul, 2),
        )
    )
    for zero_point in (False, True):
        rows.append(
            Probe(
                "MatMulInteger",
                "float32(x - zp) @ int8 weight" if zero_point else "float32(x @ int8 weight)",
                (("x", (1, 8, 16)), ("zp", ())) if zero_point else (("x", (1, 8, 16)),),
                _integer_matmul(zero_point),
            )
        )
    for name in ("add", "multiply"):
        op = getattr(relax.op, name)
        rows.append(
            Probe(
                f"QDQ {name}",
                "same shape",
                (("x", (1, 4, 6, 6)), ("y", (1, 4, 6, 6))),
                _island(op, 2),
            )
        )
        rows.append(
            Probe(
                f"QDQ {name} + relu",
                "broadcast (1, C, 1, 1)",
                (("x", (1, 4, 6, 6)), ("y", (1, 4, 1, 1))),
                _island(lambda a, b, op=op: relax.op.nn.relu(op(a, b)), 2),
            )
        )
        rows.append(
            Probe(
                f"QDQ {name} + clip",
                "clip(x, 0, 6)",
                (("x", (1, 4, 6, 6)), ("y", (1, 4, 6, 6))),
                _island(lambda a, b, op=op: _relu6(op(a, b)), 2),
            )
        )
    for count in range(2, 5):
        names = ("x", "y", "z", "w")[:count]
        rows.append(
            Probe(
                "QDQ concat",
                f"{count} inputs, axis=1",
                tuple((n, (1, 2 + i, 6, 6)) for i, n in enumerate(names)),
                _island(lambda *xs: relax.op.concat(xs, axis=1), count),
            )
        )
    return rows


def probes() -> list[Probe]:
    """Every row of the table, in table order."""
    conv_io = (("x", (1, 4, 6, 6)), ("w", (8, 4, 3, 3)))
    vector = (("x", (2, 3, 4)),)
    rows = [
        Probe("matmul", "2-D", (("a", (3, 4)), ("b", (4, 5))), _single(relax.op.matmul, "a", "b")),
        Probe(
            "matmul",
            "N-D, broadcast batch",
            (("a", (2, 1, 3, 4)), ("b", (5, 4, 2))),
            _single(relax.op.matmul, "a", "b"),
        ),
        Probe(
            "matmul",
            "1-D operand",
            (("a", (4,)), ("b", (2, 4, 5))),
            _single(relax.op.matmul, "a", "b"),
        ),
        Probe("dense", "matmul(x, permute_dims(w))", (("x", (3, 4)), ("w", (5, 4))), _dense),
        *_conv_probes(),
        *_pool_probes(),
        Probe(
            "batch_norm",
            "axis=1",
            (("x", (1, 4, 3, 3)), *[(name, (4,)) for name in ("gamma", "beta", "mean", "var")]),
            _batch_norm,
        ),
        Probe("softmax", "axis=-1", vector, _single(relax.op.nn.softmax, "x", axis=-1)),
        Probe("relu", "-", vector, _single(relax.op.nn.relu, "x")),
        Probe("relu6", "clip(x, 0, 6)", vector, lambda bb, v, dtype: _relu6(v["x"])),
        Probe("gelu", "-", vector, _single(relax.op.nn.gelu, "x")),
        Probe("gelu_tanh", "-", vector, _single(relax.op.nn.gelu_tanh, "x")),
        Probe("sigmoid", "-", vector, _single(relax.op.sigmoid, "x")),
        Probe("tanh", "-", vector, _single(relax.op.tanh, "x")),
        *[Probe(name, "-", vector, _single(getattr(relax.op, name), "x")) for name in UNARY_MATH],
        Probe(
            "power",
            "broadcast exponent",
            (("a", (2, 3, 4)), ("b", (4,))),
            _single(relax.op.power, "a", "b"),
        ),
        *_glue_probes(),
        *_detection_probes(),
    ]
    for name in ("add", "subtract", "multiply", "divide"):
        rows.append(
            Probe(
                name,
                "broadcast",
                (("a", (2, 3, 4)), ("b", (3, 1))),
                _single(getattr(relax.op, name), "a", "b"),
            )
        )
    matmul = _single(relax.op.matmul, "a", "b")
    mm_io = (("a", (3, 4)), ("b", (4, 5)))
    rows += [
        Probe(
            "conv2d + relu",
            "NCHW / OIHW",
            conv_io,
            _then(_single(relax.op.nn.conv2d, "x", "w"), relax.op.nn.relu),
        ),
        Probe(
            "conv2d + bias", "NCHW / OIHW, bias (1, C, 1, 1)", (*conv_io, ("b", (8,))), _conv_bias
        ),
        Probe("matmul + bias", "2-D", (*mm_io, ("c", (5,))), _then(matmul, bias="c")),
        Probe(
            "dense + bias",
            "Linear",
            (("x", (3, 4)), ("w", (5, 4)), ("c", (5,))),
            _then(_dense, bias="c"),
        ),
        Probe(
            "dense + bias + gelu",
            "Linear",
            (("x", (3, 4)), ("w", (5, 4)), ("c", (5,))),
            _then(_dense, relax.op.nn.gelu, bias="c"),
        ),
        Probe(
            "conv2d + bias + relu",
            "NCHW / OIHW, bias (1, C, 1, 1)",
            (*conv_io, ("b", (8,))),
            _then(_conv_bias, relax.op.nn.relu),
        ),
        Probe(
            "conv2d + bias + relu6",
            "NCHW / OIHW, bias (1, C, 1, 1)",
            (*conv_io, ("b", (8,))),
            _then(_conv_bias, _relu6),
        ),
        Probe("matmul + relu", "2-D", mm_io, _then(matmul, relax.op.nn.relu)),
        Probe(
            "dense + relu",
            "Linear",
            (("x", (3, 4)), ("w", (5, 4))),
            _then(_dense, relax.op.nn.relu),
        ),
        Probe(
            "matmul + bias + relu",
            "2-D",
            (*mm_io, ("c", (5,))),
            _then(matmul, relax.op.nn.relu, bias="c"),
        ),
        Probe(
            "matmul + bias + gelu",
            "2-D",
            (*mm_io, ("c", (5,))),
            _then(matmul, relax.op.nn.gelu, bias="c"),
        ),
        Probe(
            "dense + bias + relu",
            "Linear",
            (("x", (3, 4)), ("w", (5, 4)), ("c", (5,))),
            _then(_dense, relax.op.nn.relu, bias="c"),
        ),
        Probe(
            "quantize",
            "float32 -> dtype",
            (("x", (2, 8)), ("scale", (8,)), ("zero_point", (8,))),
            lambda bb, v, dtype: relax.op.quantize(
                v["x"], v["scale"], v["zero_point"], axis=1, out_dtype=dtype
            ),
            _quantize_dtype,
        ),
        Probe(
            "dequantize",
            "dtype -> float32",
            (("x", (2, 8)), ("scale", (8,)), ("zero_point", (8,))),
            lambda bb, v, dtype: relax.op.dequantize(
                v["x"], v["scale"], v["zero_point"], axis=1, out_dtype="float32"
            ),
            _dequantize_dtype,
        ),
        Probe(
            "quantize",
            "per tensor, constant scale / zero point",
            (("x", (2, 8)),),
            lambda bb, v, dtype: relax.op.quantize(
                v["x"], _const(0.05, "float32"), _const(3, dtype), out_dtype=dtype
            ),
            lambda name, dtype: "float32",
        ),
        Probe(
            "dequantize",
            "per tensor, constant scale / zero point",
            (("x", (2, 8)),),
            lambda bb, v, dtype: relax.op.dequantize(
                v["x"], _const(0.05, "float32"), _const(3, dtype)
            ),
        ),
        *_qdq_probes(),
        *_island_probes(),
    ]
    return rows


def _compute_ops(mod: tvm.IRModule) -> list[str]:
    ops: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, relax.Call) and isinstance(node.op, tvm.ir.Op):
            ops.append(node.op.name)

    relax.analysis.post_order_visit(mod["main"].body, visit)
    return ops


def _composites(mod: tvm.IRModule) -> list[str]:
    """The pattern names partition_for_npu's first pass forms for mod (which pattern won)."""
    fused = FuseOpsByPattern(
        get_patterns_with_prefix(PREFIX + "."), bind_constants=True, annotate_codegen=False
    )(canonicalize(mod))
    names = []
    for _, func in fused.functions.items():
        if isinstance(func, relax.Function) and func.attrs and "Composite" in func.attrs:
            names.append(str(func.attrs["Composite"]).removeprefix(PREFIX + "."))
    return sorted(names)


def _reasons(report, ops: Sequence[str]) -> str:
    """The reasons for ops left on the CPU, each once, without the op-name prefix."""
    found: list[str] = []
    for op in ops:
        for reason in sorted(report.reasons.get(op.removeprefix("relax."), set())):
            found.append(_ROLE_PREFIX.sub("", reason))
    return "; ".join(dict.fromkeys(found))


def cell(probe: Probe, dtype: str) -> tuple[str, list[str]]:
    """(cell text, composites formed) for one row and dtype."""
    try:
        mod = probe.build(dtype)
    except Exception:  # noqa: BLE001  # Relax's type inference refuses this op for the dtype
        return f"n/a (Relax rejects it for {dtype})", []
    ops = _compute_ops(mod)
    _, report = partition_with_report(mod)
    on_cpu = list(dict.fromkeys(op for op in ops if report.cpu_ops.get(op)))
    composites = _composites(mod)
    if not on_cpu:
        return "offloaded", composites
    if len(on_cpu) == len(set(ops)):
        return f"rejected: {_reasons(report, on_cpu)}", composites
    names = ", ".join(op.removeprefix("relax.") for op in on_cpu)
    return f"partial: {names} on the CPU ({_reasons(report, on_cpu)})", composites


def _short(text: str, reasons: dict[str, int]) -> str:
    """A cell as the table shows it: a reason becomes a numbered note, listed below the table."""
    for kind in ("rejected", "partial"):
        if text.startswith(kind + ": "):
            reason = text.removeprefix(kind + ": ")
            number = reasons.setdefault(reason, len(reasons) + 1)
            return f"{kind} ({number})"
    return text.split(" (")[0] if text.startswith("n/a") else text


def table() -> str:
    """The whole coverage document as markdown."""
    lines = [
        "# NPU coverage by op, layout and dtype",
        "",
        f"Generated by `{REGENERATE}`; do not edit by hand.",
        "",
        "Each row is one representative Relax call (or chain), partitioned with",
        "`example_npu.partition_with_report`. `offloaded`: every op of the row runs on the",
        "NPU. `rejected (n)`: the support check refuses it, for reason n below; the call runs on",
        "TVM's CPU build instead. `partial (n)`: some of a chain's ops stay on the CPU. `n/a`:",
        "Relax itself does not accept the op for that dtype. The patterns column lists the",
        "composites the float32 call forms (for quantize/dequantize the dtype is the quantized",
        "one). What each pattern computes: [supported ops](../user-guide/supported-ops.md).",
        "",
        "| op | layout / form | patterns (float32) | " + " | ".join(DTYPES) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in DTYPES) + " |",
    ]
    reasons: dict[str, int] = {}
    for probe in probes():
        cells, patterns = [], []
        for dtype in DTYPES:
            text, composites = cell(probe, dtype)
            cells.append(_short(text, reasons))
            if dtype == "float32" or (not patterns and composites):
                patterns = composites
        lines.append(
            f"| {probe.op} | {probe.layout} | {', '.join(patterns) or '-'} | "
            + " | ".join(cells)
            + " |"
        )
    lines += ["", "## Reasons", ""]
    lines += [f"{number}. {reason}" for reason, number in reasons.items()]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv:
        print(f"usage: {REGENERATE}", file=sys.stderr)
        return 2
    sys.stdout.write(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
