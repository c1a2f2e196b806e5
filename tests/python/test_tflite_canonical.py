"""The exact rewrites of TVM's TFLite lowering (frontend/tflite_canonical.py): the rewritten
program, built by TVM for the CPU, computes bit for bit what the original computes, on graphs
written the way TVM's TFLite importer writes them."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from example_npu.frontend.tflite_canonical import canonicalize_tflite
from tvm import relax

RNG = np.random.default_rng(0)


def build(make, *shapes_dtypes) -> tvm.IRModule:
    params = [relax.Var(f"x{i}", relax.TensorType(s, d)) for i, (s, d) in enumerate(shapes_dtypes)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(make(bb, *params))
        bb.emit_func_output(out)
    return bb.get()


def run(mod: tvm.IRModule, *inputs: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return vm["main"](*(tvm.runtime.tensor(x) for x in inputs)).numpy()


def ops(mod: tvm.IRModule) -> list[str]:
    names = []
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            if isinstance(binding.value, relax.Call) and isinstance(binding.value.op, tvm.ir.Op):
                names.append(binding.value.op.name.removeprefix("relax."))
    return names


def int8(*shape: int) -> np.ndarray:
    return RNG.integers(-128, 128, shape).astype("int8")


def assert_same(original: tvm.IRModule, rewritten: tvm.IRModule, *inputs: np.ndarray) -> None:
    np.testing.assert_array_equal(run(rewritten, *inputs), run(original, *inputs))


def quantize(x, scale, zero_point):
    return relax.op.quantize(x, relax.const(np.float32(scale)), relax.const(np.int32(zero_point)))


def dequantize(x, scale, zero_point, axis=-1):
    scale = relax.const(np.asarray(scale, "float32"))
    return relax.op.dequantize(x, scale, relax.const(np.int32(zero_point)), axis=axis)


@pytest.mark.parametrize("bounds", [(-128, 127), (-5, 127), (-128, 40), (3, 9)])
def test_a_clip_of_quantized_integers_is_dropped_or_moved_exactly(bounds):
    def make(bb, x):
        q = bb.emit(quantize(x, 0.05, -7))
        return relax.op.clip(q, *bounds)

    # Values on and around every step boundary, the clip bounds included.
    steps = np.arange(-140, 141, dtype=np.float32)
    x = np.concatenate([(steps + 0.5) * 0.05, steps * 0.05, RNG.standard_normal(46) * 8])
    x = np.concatenate([x, np.nextafter(x, 9e9), np.nextafter(x, -9e9)]).astype("float32")
    mod = build(make, ((x.size,), "float32"))
    rewritten = canonicalize_tflite(mod)
    assert "clip" not in ops(rewritten)[1:]  # the integers are not clipped after quantize
    if bounds == (-128, 127):
        assert ops(rewritten) == ["quantize"]
    assert_same(mod, rewritten, x)


def test_depthwise_hwoi_weights_become_hwio_constants():
    weights = int8(1, 3, 3, 8)
    scales = RNG.uniform(0.001, 0.01, 8)

    def make(bb, x):
        w = bb.emit(dequantize(relax.const(weights), scales, 0, axis=3))
        w = bb.emit(relax.op.reshape(w, (3, 3, 8, 1)))
        xf = bb.emit(dequantize(x, 0.02, 3))
        conv = relax.op.nn.conv2d(
            xf, w, padding=[1, 1, 1, 1], groups=8, data_layout="NHWC", kernel_layout="HWOI",
            out_layout="NHWC",
        )  # fmt: skip
        return quantize(bb.emit(conv), 0.04, -2)

    mod = build(make, ((1, 6, 6, 8), "int8"))
    rewritten = canonicalize_tflite(mod)
    (conv,) = [
        b.value
        for b in rewritten["main"].body.blocks[0].bindings
        if isinstance(b.value, relax.Call) and b.value.op.name == "relax.nn.conv2d"
    ]
    assert conv.attrs.kernel_layout == "HWIO" and "reshape" not in ops(rewritten)
    assert_same(mod, rewritten, int8(1, 6, 6, 8))


def test_fully_connected_weights_behind_permute_dims_become_constants():
    weights = int8(12, 64)  # TFLite's [units, depth]
    scales = RNG.uniform(0.001, 0.01, 12)

    def make(bb, x):
        w = bb.emit(relax.op.permute_dims(relax.const(weights), [1, 0]))
        w = bb.emit(dequantize(w, scales, 0, axis=1))
        y = bb.emit(relax.op.matmul(bb.emit(dequantize(x, 0.02, 3)), w))
        return quantize(y, 0.1, 5)

    mod = build(make, ((2, 64), "int8"))
    rewritten = canonicalize_tflite(mod)
    assert "permute_dims" not in ops(rewritten)
    assert_same(mod, rewritten, int8(2, 64))


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_max_pool_of_integers_becomes_a_qdq_island(dtype):
    """TVM's MAX_POOL_2D after a PAD reads the integers: the rewritten QDQ form (which the NPU's
    quantized max pool takes) gives the same integers, padded edges included."""

    def make(bb, x):
        return relax.op.nn.max_pool2d(
            x, pool_size=[3, 3], strides=[2, 2], padding=[1, 0, 1, 1], layout="NHWC"
        )

    mod = build(make, ((1, 7, 8, 5), dtype))
    rewritten = canonicalize_tflite(mod)
    assert ops(rewritten) == ["dequantize", "nn.max_pool2d", "quantize"]
    low, high = (-128, 127) if dtype == "int8" else (0, 255)
    assert_same(mod, rewritten, RNG.integers(low, high + 1, (1, 7, 8, 5)).astype(dtype))


@pytest.mark.parametrize("output", [(0.05, 3), (0.04, 3)], ids=["same", "rescaled"])
def test_bilinear_island_becomes_an_integer_resize_only_with_tflite_semantics(output):
    """quantize(resize2d(dequantize(x), linear)) with x's own parameters is TFLite's int8
    RESIZE_BILINEAR: the integers themselves are resized (the NPU runs TFLite's kernel); with
    other output parameters, or without TFLite semantics, the island stays."""

    def make(bb, x):
        real = bb.emit(dequantize(x, 0.05, 3))
        resized = bb.emit(
            relax.op.image.resize2d(
                real,
                (9, 7),
                layout="NHWC",
                method="linear",
                coordinate_transformation_mode="half_pixel",
            )
        )
        return quantize(resized, *output)

    mod = build(make, ((1, 4, 3, 2), "int8"))
    island = ["dequantize", "image.resize2d", "quantize"]
    assert ops(canonicalize_tflite(mod)) == island
    expected = ["image.resize2d"] if output == (0.05, 3) else island
    rewritten = canonicalize_tflite(mod, tflite_semantics=True)
    assert ops(rewritten) == expected
    if expected != island:
        (binding,) = rewritten["main"].body.blocks[0].bindings
        assert str(binding.value.args[0].ty.dtype) == "int8"
        assert str(binding.value.attrs.coordinate_transformation_mode) == "half_pixel"
