"""QDQ islands around the glue ops run as quantized NPU ops, bit-exact to numpy references and
to TVM's CPU build.

Each seeded random case builds ``dequantize -> op -> quantize`` in Relax (int8, uint8 and, where
the NPU takes it, int16; any zero point; a third of the scales "round" ones such as 0.25 or 0.1,
whose ratios put many results on a .5 tie), partitions it with ``partition_for_npu``, checks that
the NPU graph holds the expected ``qnn.*`` op and no float op, and compares the NPU's integers
with qnn_reference.py and with TVM's CPU build of the float QDQ graph bit for bit.
"""

from __future__ import annotations

import os
from fractions import Fraction

import example_npu
import numpy as np
import pytest
import qnn_reference as ref
import tvm
from example_npu import NPUConfig
from spec_models import npu_ops, run
from tvm import relax

SEED = int(os.environ.get("EXAMPLE_NPU_SEED", "20261202"))
CASES_PER_KIND = 6


def _const(value, dtype):
    return relax.const(np.asarray(value, dtype=dtype))


def _hardswish(x: relax.Expr) -> relax.Expr:
    """HardSwish as the ONNX importer emits it."""
    shifted = relax.op.clip(relax.op.add(x, _const(3, "float32")), 0, 6)
    return relax.op.multiply(x, relax.op.divide(shifted, _const(6, "float32")))


TABLE_OPS = {
    "sigmoid": relax.op.sigmoid,
    "tanh": relax.op.tanh,
    "gelu": relax.op.nn.gelu,
    "silu": relax.op.nn.silu,
    "hardswish": _hardswish,
}


def _hardswish_reference(v):
    x = v.astype(np.float32)
    return x * np.clip(x + np.float32(3), 0, 6) / np.float32(6)


def island(inputs, glue, out_params, out_dtype) -> tuple:
    """main(x_i) = quantize(glue(dequantize(x_i)...)); inputs: (name, shape, dtype, params)."""
    params = [relax.Var(name, relax.TensorType(shape, dtype)) for name, shape, dtype, _ in inputs]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            values = [
                bb.emit(relax.op.dequantize(p, _const(s, "float32"), _const(z, dtype)))
                for p, (_, _, dtype, (s, z)) in zip(params, inputs, strict=True)
            ]
            out = bb.emit(glue(*values))
            result = bb.emit_output(
                relax.op.quantize(
                    out,
                    _const(out_params[0], "float32"),
                    _const(out_params[1], out_dtype),
                    out_dtype=out_dtype,
                )
            )
        bb.emit_func_output(result)
    return bb.get()


# Scales whose ratios are small fractions (a half, a quarter, 0.1 / 0.2): exact or float32-near
# ties, where rounding the exact value instead of TVM's float32 steps gives another integer.
ROUND_SCALES = (0.0625, 0.125, 0.25, 0.05, 0.1, 0.2)


def _params(rng, dtype):
    info = np.iinfo(dtype)
    drawn = float(rng.choice(ROUND_SCALES)) if rng.integers(3) == 0 else rng.uniform(0.005, 0.1)
    scale = float(drawn) / (64 if dtype == "int16" else 1)
    zero_point = 0 if dtype == "int16" else int(rng.integers(info.min // 2, info.max // 2 + 1))
    return (scale, zero_point)


def _data(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


KINDS = ("requantize", "add", "multiply", "max_pool2d", "avg_pool2d", "mean", "softmax", "concat")
KINDS += tuple(TABLE_OPS)


def random_case(kind: str, rng: np.random.Generator, large: bool = False) -> dict:
    """One island of `kind`: the module, its inputs, the expected NPU op and the reference
    (`large`: feature maps big enough to need several tiles in a small L1)."""
    dtypes = ("int8", "uint8") if kind in (*TABLE_OPS, "softmax") else ("int8", "uint8", "int16")
    dtype = str(rng.choice(dtypes))
    out_dtype = dtype
    out = _params(rng, out_dtype)
    low, high = (12, 24) if large else (3, 10)
    shape = (1, int(rng.integers(1, 6)), int(rng.integers(low, high)), int(rng.integers(low, high)))
    x_params = _params(rng, dtype)
    x = _data(rng, shape, dtype)
    inputs = [("x", shape, dtype, x_params)]
    arrays = [x]
    bounds = None
    act = str(rng.choice(["none", "relu", "clip"]))
    if kind in ("requantize", "add", "multiply") and act != "none":
        bounds = (0.0, None) if act == "relu" else (-0.5, 2.0)

    def activate(value):
        if act == "relu":
            return relax.op.nn.relu(value)
        if act == "clip":
            return relax.op.clip(value, -0.5, 2.0)
        return value

    if kind == "requantize":
        glue, op = activate, "qnn.requantize"
        expected = ref.requantize(x, x_params, out, out_dtype, bounds)
    elif kind in ("add", "multiply"):
        b_shape = shape if rng.integers(2) else (1, shape[1], 1, 1)
        b_params = _params(rng, dtype)
        b = _data(rng, b_shape, dtype)
        inputs.append(("b", b_shape, dtype, b_params))
        arrays.append(b)
        fn = getattr(relax.op, kind)
        glue, op = (lambda u, v: activate(fn(u, v))), f"qnn.{kind}"
        expected = getattr(ref, kind)(x, x_params, b, b_params, out, out_dtype, bounds)
    elif kind in ("max_pool2d", "avg_pool2d", "mean"):
        if kind == "mean":
            size, strides, padding, include = shape[2:], (1, 1), (0, 0, 0, 0), False
            glue = lambda u: relax.op.mean(u, axis=[2, 3], keepdims=True)  # noqa: E731
            op, out_hw = "qnn.avg_pool2d", (1, 1)
        else:
            size = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
            strides = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
            padding = tuple(int(p) for p in rng.integers(0, 2, 4))
            padding = tuple(min(p, s - 1) for p, s in zip(padding, (*size, *size), strict=True))
            include = bool(rng.integers(2))
            attrs = dict(pool_size=size, strides=strides, padding=padding)
            if kind == "avg_pool2d":
                attrs["count_include_pad"] = include
            pool = getattr(relax.op.nn, kind)
            glue = lambda u, f=pool, a=attrs: f(u, **a)  # noqa: E731
            op = f"qnn.{kind}"
            out_hw = tuple(
                (shape[2 + i] + padding[i] + padding[i + 2] - size[i]) // strides[i] + 1
                for i in range(2)
            )
        pool_kind = "max" if kind == "max_pool2d" else "avg"
        expected = ref.pool2d(
            x, x_params, out, out_dtype, pool_kind, size, strides, padding, out_hw, include
        )
    elif kind == "softmax":
        axis = int(rng.integers(1, 4))
        out = (1.0 / 256, -128 if dtype == "int8" else 0)
        glue, op = (lambda u: relax.op.nn.softmax(u, axis=axis)), "qnn.softmax"
        expected = ref.softmax(x, x_params, out, out_dtype, axis)
    elif kind == "concat":
        count = int(rng.integers(2, 7))  # more than 4 nest into two qnn.concat
        xs, params = [x], [x_params]
        for i in range(1, count):
            part = (1, int(rng.integers(1, 4)), shape[2], shape[3])
            params.append(_params(rng, dtype))
            xs.append(_data(rng, part, dtype))
            inputs.append((f"x{i}", part, dtype, params[-1]))
        arrays = xs
        glue, op = (lambda *us: relax.op.concat(us, axis=1)), "qnn.concat"
        expected = ref.concat(xs, params, out, out_dtype, 1)
    else:
        glue, op = TABLE_OPS[kind], "qnn.lut"
        fn = _hardswish_reference if kind == "hardswish" else ref.ACTIVATIONS[kind]
        expected = ref.table_activation(x, x_params, out, out_dtype, fn)
    return {
        "model": island(inputs, glue, out, out_dtype),
        "inputs": arrays,
        "op": op,
        "expected": expected,
        "label": f"{kind} {dtype} x{x_params} out{out} act={act} shape={shape}",
    }


CASES = [(kind, i) for kind in KINDS for i in range(CASES_PER_KIND)]


@pytest.mark.parametrize("kind,index", CASES)
def test_island_is_one_integer_op_bit_exact_to_numpy(kind, index):
    case = random_case(kind, np.random.default_rng([SEED, KINDS.index(kind), index]))
    offloaded = example_npu.partition_for_npu(case["model"])
    ops = npu_ops(offloaded)
    assert case["op"] in ops and not {"dequantize", "quantize"} & set(ops), (case["label"], ops)
    npu = run(offloaded, case["inputs"])
    np.testing.assert_array_equal(npu, case["expected"], err_msg=case["label"])
    cpu = run(case["model"], case["inputs"])
    np.testing.assert_array_equal(npu, cpu, err_msg=case["label"])


TIE_GLUE = {
    "requantize": lambda u: u,
    "add": relax.op.add,
    "multiply": relax.op.multiply,
    "max_pool2d": lambda u: relax.op.nn.max_pool2d(u, pool_size=(2, 2), strides=(2, 2)),
    "avg_pool2d": lambda u: relax.op.nn.avg_pool2d(u, pool_size=(2, 2), strides=(2, 2)),
}


def _exactly_rounded(kind: str, x: np.ndarray, b: np.ndarray, scales: tuple) -> np.ndarray:
    """The island's exact rational value (float32 scales as exact fractions), rounded half up:
    the glue ops' first definition, which these scales tell apart from TVM's."""
    sx, sb, so = (Fraction(float(np.float32(s))) for s in scales)
    if kind in ("max_pool2d", "avg_pool2d"):
        n, c, h, w = x.shape
        windows = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5)
        windows = windows.reshape(n, c, h // 2, w // 2, 4).astype(int)
        values = [
            (max(t) if kind == "max_pool2d" else Fraction(sum(t), 4)) * sx / so
            for t in windows.reshape(-1, 4).tolist()
        ]
        shape = windows.shape[:4]
    else:
        terms = {
            "requantize": lambda u, v: u * sx,
            "add": lambda u, v: u * sx + v * sb,
            "multiply": lambda u, v: u * sx * v * sb,
        }[kind]
        pairs = zip(x.reshape(-1).tolist(), b.reshape(-1).tolist(), strict=True)
        values = [terms(u, v) / so for u, v in pairs]
        shape = x.shape
    rounded = [int(np.clip(np.floor(v + Fraction(1, 2)), -128, 127)) for v in values]
    return np.array(rounded, dtype=np.int64).reshape(shape)


@pytest.mark.parametrize("kind", sorted(TIE_GLUE))
def test_ties_round_as_tvms_float32_steps(kind):
    """Scales 0.1 and 0.3 into 0.2 put many results on a .5 tie or within float32's error of
    one: the NPU's integers are TVM's float32 steps', which rounding the exact value (ties half
    up) would not give."""
    scales = (0.1, 0.3, 0.2)
    shape = (1, 16, 8, 8)
    rng = np.random.default_rng(5)
    x, b = _data(rng, shape, "int8"), _data(rng, shape, "int8")
    binary = kind in ("add", "multiply")
    inputs = [("x", shape, "int8", (scales[0], 0))]
    inputs += [("b", shape, "int8", (scales[1], 0))] if binary else []
    model = island(inputs, TIE_GLUE[kind], (scales[2], 0), "int8")
    offloaded = example_npu.partition_for_npu(model)
    assert f"qnn.{kind}" in npu_ops(offloaded), npu_ops(offloaded)
    arrays = [x, b] if binary else [x]
    cpu = run(model, arrays)
    np.testing.assert_array_equal(run(offloaded, arrays), cpu)
    assert (_exactly_rounded(kind, x, b, scales) != cpu).any()


@pytest.mark.parametrize("kind", ["add", "avg_pool2d", "concat", "softmax", "sigmoid"])
def test_tiny_l1_tiles_islands_without_changing_a_bit(kind):
    """A 1 KB L1 splits every island into several tiles; the integers stay the same."""
    case = random_case(kind, np.random.default_rng([SEED, 99, KINDS.index(kind)]), large=True)
    config = NPUConfig(l1_sram_kb=1, tile_height=8, tile_width=8)
    tiny = example_npu.partition_for_npu(case["model"], config=config)
    ex = tvm.compile(tiny, "llvm")
    profile = example_npu.profile(ex, *case["inputs"])
    assert max(node.tiles for node in profile.nodes) > 1, case["label"]
    np.testing.assert_array_equal(run(tiny, case["inputs"]), case["expected"])


MIXED_WIDTH_GLUE = {
    "mean": lambda u: relax.op.mean(u, axis=[2, 3], keepdims=True),
    "avg_pool2d": lambda u: relax.op.nn.avg_pool2d(u, pool_size=(2, 2)),
    "max_pool2d": lambda u: relax.op.nn.max_pool2d(u, pool_size=(2, 2)),
    "add": lambda u: relax.op.add(u, u),
    "relu": relax.op.nn.relu,
    "concat": lambda u: relax.op.concat([u, u], axis=1),
}


@pytest.mark.parametrize("kind", sorted(MIXED_WIDTH_GLUE))
@pytest.mark.parametrize("in_dtype,out_dtype", [("int16", "int8"), ("int8", "int16")])
def test_islands_between_widths_tile_by_each_operand_dtype(kind, in_dtype, out_dtype):
    """An island that dequantizes int16 and quantizes to int8 (or the reverse) sizes every L1
    slot by the dtype of the tile it holds; a 1 KB L1 splits it into many tiles. The integers
    are TVM's CPU build's of the float QDQ graph."""
    shape = (1, 3, 9, 7)
    model = island(
        [("x", shape, in_dtype, (0.05, 3))], MIXED_WIDTH_GLUE[kind], (0.03, -2), out_dtype
    )
    x = np.random.default_rng(0).integers(-120, 120, size=shape).astype(in_dtype)
    config = NPUConfig(l1_sram_kb=1, tile_height=2, tile_width=2)
    offloaded = example_npu.partition_for_npu(model, config=config)
    assert not {"dequantize", "quantize"} & set(npu_ops(offloaded)), npu_ops(offloaded)
    np.testing.assert_array_equal(run(offloaded, [x]), run(model, [x]))
