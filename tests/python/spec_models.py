"""The four modules of the specification's test description, plus shared run helpers."""

from __future__ import annotations

import json

import numpy as np
import tvm
from tvm import relax
from tvm.script import relax as R


@tvm.script.ir_module
class MatmulReLU:
    @R.function
    def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 8), "float32")) -> R.Tensor(
        (2, 8), "float32"
    ):
        with R.dataflow():
            y = relax.op.matmul(x, w)
            z = relax.op.nn.relu(y)
            R.output(z)
        return z


@tvm.script.ir_module
class Conv2dReLU:
    @R.function
    def main(
        x: R.Tensor((1, 3, 32, 32), "float32"), w: R.Tensor((16, 3, 3, 3), "float32")
    ) -> R.Tensor((1, 16, 30, 30), "float32"):
        with R.dataflow():
            y = relax.op.nn.conv2d(x, w)
            z = relax.op.nn.relu(y)
            R.output(z)
        return z


@tvm.script.ir_module
class MultipleOps:
    @R.function
    def main(x: R.Tensor((1, 16, 32, 32), "float32")) -> R.Tensor((1, 16, 16, 16), "float32"):
        with R.dataflow():
            y = relax.op.nn.relu(x)
            z = relax.op.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2))
            out = relax.op.nn.relu(z)
            R.output(out)
        return out


@tvm.script.ir_module
class Softmax:
    @R.function
    def main(x: R.Tensor((2, 8), "float32")) -> R.Tensor((2, 8), "float32"):
        with R.dataflow():
            z = relax.op.nn.softmax(x)
            R.output(z)
        return z


SPEC_MODULES = {
    "MatmulReLU": MatmulReLU,
    "Conv2dReLU": Conv2dReLU,
    "MultipleOps": MultipleOps,
    "Softmax": Softmax,
}


def random_inputs(mod: tvm.IRModule, seed: int = 0) -> list[np.ndarray]:
    """Standard-normal inputs matching main's parameters."""
    rng = np.random.default_rng(seed)
    arrays = []
    for param in mod["main"].params:
        shape = [int(dim) for dim in param.ty.shape]
        arrays.append(rng.standard_normal(shape).astype(str(param.ty.dtype)))
    return arrays


def run(mod: tvm.IRModule, inputs: list[np.ndarray]) -> np.ndarray | list[np.ndarray]:
    """Compiles mod for llvm (NPU functions included) and runs main on the CPU device."""
    ex = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(array) for array in inputs])
    if isinstance(out, tvm.runtime.Tensor):
        return out.numpy()
    return [item.numpy() for item in out]


def npu_nodes(mod: tvm.IRModule) -> list[dict]:
    """The op nodes (no inputs / constants) of every NPU function of a partitioned module."""
    return [
        node
        for module in mod.attrs["external_mods"]
        for node in json.loads(module.inspect_source())["nodes"]
        if node["op"] not in ("input", "const")
    ]


def npu_ops(mod: tvm.IRModule) -> list[str]:
    return [node["op"] for node in npu_nodes(mod)]


def external_symbols(mod: tvm.IRModule) -> list[str]:
    """Global symbols main calls through call_dps_packed (the NPU functions)."""
    symbols = []

    def visit(expr):
        if isinstance(expr, relax.Call) and expr.op == tvm.ir.Op.get("relax.call_dps_packed"):
            symbols.append(str(expr.args[0].global_symbol))

    relax.analysis.post_order_visit(mod["main"].body, visit)
    return symbols
