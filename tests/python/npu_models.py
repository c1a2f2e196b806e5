"""Single-op and small Relax modules the NPU-model tests profile."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax


def _module(params: list[relax.Var], body) -> tvm.IRModule:
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(body(bb, *params))
        bb.emit_func_output(out)
    return bb.get()


def gemm(m: int, k: int, n: int, dtype: str = "float32") -> tvm.IRModule:
    a = relax.Var("a", relax.TensorType((m, k), dtype))
    b = relax.Var("b", relax.TensorType((k, n), dtype))
    return _module([a, b], lambda bb, a, b: relax.op.matmul(a, b))


def conv3x3(channels: int, size: int, out_channels: int, relu: bool = False) -> tvm.IRModule:
    x = relax.Var("x", relax.TensorType((1, channels, size, size), "float32"))
    w = relax.Var("w", relax.TensorType((out_channels, channels, 3, 3), "float32"))

    def body(bb, x, w):
        conv = relax.op.nn.conv2d(x, w, padding=(1, 1, 1, 1))
        return relax.op.nn.relu(bb.emit(conv)) if relu else conv

    return _module([x, w], body)


def conv_chain(channels: int, size: int, count: int, seed: int = 0) -> tvm.IRModule:
    """``count`` 3x3 convolutions + relu in a row, weights bound as constants."""
    rng = np.random.default_rng(seed)
    x = relax.Var("x", relax.TensorType((1, channels, size, size), "float32"))

    def body(bb, x):
        for _ in range(count):
            w = (rng.standard_normal((channels, channels, 3, 3)) * 0.1).astype("float32")
            conv = relax.op.nn.conv2d(x, relax.const(w), padding=(1, 1, 1, 1))
            x = bb.emit(relax.op.nn.relu(bb.emit(conv)))
        return x

    return _module([x], body)


def add(shape: tuple[int, ...]) -> tvm.IRModule:
    a = relax.Var("a", relax.TensorType(shape, "float32"))
    b = relax.Var("b", relax.TensorType(shape, "float32"))
    return _module([a, b], lambda bb, a, b: relax.op.add(a, b))


def inputs_for(mod: tvm.IRModule, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal([int(d) for d in p.ty.shape]).astype(str(p.ty.dtype))
        for p in mod["main"].params
    ]
