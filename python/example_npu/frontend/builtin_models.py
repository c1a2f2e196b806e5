"""The embedded default model the demo runs: a small CNN classifier with seeded weights."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax


def default_model(seed: int = 0) -> tvm.IRModule:
    """conv3x3+relu -> maxpool -> conv3x3+relu -> avgpool -> flatten (CPU) -> linear -> softmax.

    Weights are bound constants, as a model imported from a framework has them. The flatten
    reshape has no NPU pattern, so the model shows CPU code between two NPU regions.
    """
    rng = np.random.default_rng(seed)

    def weight(*shape: int) -> relax.Expr:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        return relax.const((rng.standard_normal(shape) / np.sqrt(fan_in)).astype("float32"))

    image = relax.Var("image", relax.TensorType((1, 3, 32, 32), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [image]):
        with bb.dataflow():
            x = bb.emit(
                relax.op.nn.relu(
                    relax.op.nn.conv2d(image, weight(16, 3, 3, 3), padding=(1, 1, 1, 1))
                )
            )
            x = bb.emit(relax.op.nn.max_pool2d(x, (2, 2), (2, 2)))
            x = bb.emit(
                relax.op.nn.relu(relax.op.nn.conv2d(x, weight(32, 16, 3, 3), padding=(1, 1, 1, 1)))
            )
            x = bb.emit(relax.op.nn.avg_pool2d(x, (2, 2), (2, 2)))
            x = bb.emit(relax.op.reshape(x, (1, 32 * 8 * 8)))
            x = bb.emit(relax.op.matmul(x, relax.op.permute_dims(weight(10, 32 * 8 * 8))))
            x = bb.emit(relax.op.add(x, weight(10)))
            out = bb.emit_output(relax.op.nn.softmax(x, axis=-1))
        bb.emit_func_output(out)
    return bb.get()


def resnet18(image: int = 224, width: int = 64, classes: int = 1000, seed: int = 0) -> tvm.IRModule:
    """ResNet-18 (He et al. 2016, torchvision's layout) with batch norm folded into the
    convolutions, as a deployed model has it, and seeded random weights.

    7x7/2 stem, 3x3/2 max pool, four stages of two basic blocks (widths ``width`` x 1, 2, 4, 8;
    stride 2 and a 1x1 projection on the shortcut from the second stage on), global average
    pool, flatten, Linear. ``image=224, width=64`` is the real network's size (1.8 GMACs).
    """
    rng = np.random.default_rng(seed)

    def const(*shape: int, scale: float | None = None) -> relax.Expr:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        std = scale if scale is not None else np.sqrt(2.0 / fan_in)
        return relax.const((rng.standard_normal(shape) * std).astype("float32"))

    image_var = relax.Var("image", relax.TensorType((1, 3, image, image), "float32"))
    bb = relax.BlockBuilder()

    def conv(x: relax.Expr, cin: int, cout: int, kernel: int, stride: int, relu: bool):
        y = bb.emit(
            relax.op.nn.conv2d(
                x, const(cout, cin, kernel, kernel), strides=stride, padding=kernel // 2
            )
        )
        y = bb.emit(relax.op.add(y, const(1, cout, 1, 1, scale=0.1)))
        return bb.emit(relax.op.nn.relu(y)) if relu else y

    with bb.function("main", [image_var]):
        with bb.dataflow():
            x = conv(image_var, 3, width, 7, 2, relu=True)
            x = bb.emit(relax.op.nn.max_pool2d(x, 3, 2, 1))
            channels = width
            for stage in range(4):
                cout = width << stage
                for block in range(2):
                    stride = 2 if stage > 0 and block == 0 else 1
                    y = conv(x, channels, cout, 3, stride, relu=True)
                    y = conv(y, cout, cout, 3, 1, relu=False)
                    shortcut = x if channels == cout else conv(x, channels, cout, 1, stride, False)
                    x = bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(y, shortcut))))
                    channels = cout
            spatial = (image + 31) // 32
            x = bb.emit(relax.op.nn.avg_pool2d(x, spatial, 1))
            x = bb.emit(relax.op.reshape(x, (1, channels)))
            x = bb.emit(relax.op.matmul(x, relax.op.permute_dims(const(classes, channels))))
            out = bb.emit_output(relax.op.add(x, const(classes, scale=0.1)))
        bb.emit_func_output(out)
    return bb.get()
