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
