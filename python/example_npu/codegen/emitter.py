"""Emitting the NPU nodes of one lowered Relax call (shared by the glue and spatial lowerings)."""

from __future__ import annotations

from typing import Any

from tvm import relax


class Emitter:
    """Adds nodes of one lowering to the graph being built."""

    def __init__(
        self, builder: Any, call: relax.Call, composite: str, env: dict[Any, Any] | None = None
    ):
        self.builder = builder
        self.call = call
        self.composite = composite
        self.env = env if env is not None else {}

    def node(self, op: str, inputs: list[int], ty: Any, attrs: dict[str, Any] | None = None):
        """A node whose shape and dtype are those of the Relax type ``ty``."""
        shape, dtype = self.builder.tensor_type(ty, f"{op} result")
        return self.shaped(op, inputs, shape, dtype, attrs or {})

    def shaped(self, op: str, inputs: list[int], shape: list[int], dtype: str, attrs: dict):
        return self.builder.add_node(
            {
                "op": op,
                "name": f"{op.split('.')[-1]}_{len(self.builder.nodes)}",
                "inputs": inputs,
                "shape": shape,
                "dtype": dtype,
                "attrs": attrs,
                "composite": self.composite,
            }
        )

    def operand(self, index: int) -> int:
        """The node id of the call's tensor operand ``index``."""
        return self.builder.eval_tensor(self.call.args[index], self.env, self.composite)


def input_shape(builder: Any, expr: Any) -> tuple[list[int], str]:
    return builder.tensor_type(expr.ty, "operand")
