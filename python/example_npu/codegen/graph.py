"""Codegen: partitioned Relax functions -> NPU graph JSON -> runtime modules.

``RunCodegen`` calls the global ``relax.ext.example_npu`` once with every function whose
``Codegen`` attribute is ``"example_npu"``. Each function is flattened into the NPU graph format
(see ``src/graph/graph.h``): parameters become input nodes, ``relax.Constant`` objects become
const nodes (named as TVM's constant loader expects), and every Relax op call inside the
composite functions becomes one kernel node. Fusion of those nodes is the C++ compiler's job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import tvm
import tvm_ffi
from tvm import relax
from tvm.ir.expr import Constant

from ..config import NPUConfig
from .attrs import CodegenError, attrs_to_dict, scalar_arg, tensor_type
from .glue import (
    EMBEDDING_COMPOSITE,
    NAN_GUARDED_SOFTMAX_COMPOSITE,
    SAFE_SOFTMAX_COMPOSITE,
    SELECT_COMPOSITE,
    lower_embedding,
    lower_glue_op,
    lower_safe_softmax,
    lower_select,
)
from .quantized import QNN_COMPOSITE_PREFIX, lower_qnn_composite, quantization_attrs
from .spatial import PRELU_WHERE_COMPOSITE, lower_prelu_where

CODEGEN_NAME = "example_npu"
GRAPH_FORMAT_VERSION = 1

# A value in the builder's environment: one node id, or a tuple of them (batch_norm's 3 outputs).
_Value = int | tuple


class _GraphBuilder:
    """Flattens one partitioned function (and the composites it calls) into graph nodes."""

    def __init__(self, symbol: str, constant_names: Mapping[Any, str]):
        self.symbol = symbol
        self.constant_names = constant_names
        self.nodes: list[dict[str, Any]] = []
        self.const_ids: dict[str, int] = {}

    def _add(self, node: dict[str, Any]) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    def build(self, func: relax.Function) -> dict[str, Any]:
        env: dict[Any, Any] = {}
        arg_nodes = []
        for param in func.params:
            shape, dtype = tensor_type(param.ty, f"parameter {param.name}")
            node_id = self._add({"op": "input", "name": param.name, "shape": shape, "dtype": dtype})
            env[param] = node_id
            arg_nodes.append(node_id)
        result = self._eval_body(func.body, env, composite="")
        return {
            "version": GRAPH_FORMAT_VERSION,
            "symbol": self.symbol,
            "nodes": self.nodes,
            "arg_nodes": arg_nodes,
            "heads": list(_flatten(result)),
        }

    def _eval_body(self, body: Any, env: dict[Any, Any], composite: str) -> _Value:
        if not isinstance(body, relax.SeqExpr):
            return self._eval(body, env, composite)
        for block in body.blocks:
            for binding in block.bindings:
                if not isinstance(binding, relax.VarBinding):
                    raise CodegenError(
                        f"{self.symbol}: unsupported binding {type(binding).__name__}"
                    )
                if isinstance(binding.value, relax.Function):
                    env[binding.var] = binding.value  # a composite, inlined where it is called
                else:
                    env[binding.var] = self._eval(binding.value, env, composite)
        return self._eval(body.body, env, composite)

    def _eval(self, expr: Any, env: dict[Any, Any], composite: str) -> _Value:
        if isinstance(expr, relax.Var):
            if expr not in env:
                raise CodegenError(f"{self.symbol}: unbound variable {expr.name}")
            value = env[expr]
            # Constant arguments of a composite become const nodes only where they are used as
            # tensors (a quantized op reads its scales as attributes instead).
            return self._const(value) if isinstance(value, Constant) else value
        if isinstance(expr, Constant):
            return self._const(expr)
        if isinstance(expr, relax.Tuple):
            return tuple(self._eval(field, env, composite) for field in expr.fields)
        if isinstance(expr, relax.TupleGetItem):
            value = self._eval(expr.tuple_value, env, composite)
            if not isinstance(value, tuple):
                raise CodegenError(f"{self.symbol}: indexing a non-tuple value")
            return value[expr.index]
        if isinstance(expr, relax.Call):
            if isinstance(expr.op, relax.Var):
                return self._inline_composite(expr, env)
            if isinstance(expr.op, tvm.ir.Op):
                return self._op_node(expr, env, composite)
        raise CodegenError(
            f"{self.symbol}: cannot serialise {type(expr).__name__} to the NPU graph"
        )

    def _inline_composite(self, call: relax.Call, env: dict[Any, Any]) -> _Value:
        func = env.get(call.op)
        if not isinstance(func, relax.Function):
            raise CodegenError(f"{self.symbol}: call to {call.op.name} is not a composite function")
        composite = str(func.attrs["Composite"]) if "Composite" in func.attrs else ""
        inner_env: dict[Any, Any] = {}
        for param, arg in zip(func.params, call.args, strict=True):
            constant = self.constant_of(arg, env)
            inner_env[param] = constant if constant is not None else self._eval(arg, env, composite)
        if composite.startswith(QNN_COMPOSITE_PREFIX):
            return lower_qnn_composite(self, func, inner_env, composite)
        if composite in (SAFE_SOFTMAX_COMPOSITE, NAN_GUARDED_SOFTMAX_COMPOSITE):
            return lower_safe_softmax(self, func, inner_env, composite)
        if composite == EMBEDDING_COMPOSITE:
            return lower_embedding(self, func, inner_env, composite)
        if composite == PRELU_WHERE_COMPOSITE:
            return lower_prelu_where(self, func, inner_env, composite)
        if composite == SELECT_COMPOSITE:
            return lower_select(self, func, inner_env, composite)
        return self._eval_body(func.body, inner_env, composite)

    def constant_of(self, expr: Any, env: Mapping[Any, Any]) -> Constant | None:
        """The relax.Constant an argument stands for, if it is one (directly or via a param)."""
        if isinstance(expr, Constant):
            return expr
        if isinstance(expr, relax.Var) and isinstance(env.get(expr), Constant):
            return env[expr]
        return None

    def add_node(self, node: dict[str, Any]) -> int:
        return self._add(node)

    @staticmethod
    def tensor_type(ty: Any, what: str) -> tuple[list[int], str]:
        return tensor_type(ty, what)

    def eval_tensor(self, expr: Any, env: dict[Any, Any], composite: str) -> int:
        value = self._eval(expr, env, composite)
        if isinstance(value, tuple):
            raise CodegenError(f"{self.symbol}: expected a tensor, got a tuple")
        return value

    def _const(self, const: Constant) -> int:
        if const not in self.constant_names:
            raise CodegenError(f"{self.symbol}: constant has no name from RunCodegen")
        name = str(self.constant_names[const])
        if name not in self.const_ids:
            shape, dtype = tensor_type(const.ty, f"constant {name}")
            self.const_ids[name] = self._add(
                {"op": "const", "name": name, "shape": shape, "dtype": dtype}
            )
        return self.const_ids[name]

    def _op_node(self, call: relax.Call, env: dict[Any, Any], composite: str) -> _Value:
        glue = lower_glue_op(self, call, env, composite)
        if glue is not None:
            return glue
        op_name = call.op.name.removeprefix("relax.")
        attrs = attrs_to_dict(call.attrs)
        if op_name in ("quantize", "dequantize"):
            attrs = quantization_attrs(self, call, env)
        tensor_args = call.args
        if op_name == "clip":
            attrs = {
                "min": scalar_arg(call.args[1], "clip min"),
                "max": scalar_arg(call.args[2], "clip max"),
            }
            tensor_args = call.args[:1]
        elif op_name in ("reshape", "quantize", "dequantize"):
            tensor_args = call.args[:1]  # the shape / quantization params are attributes
        inputs = []
        for arg in tensor_args:
            value = self._eval(arg, env, composite)
            if isinstance(value, tuple):
                raise CodegenError(f"{self.symbol}: {op_name} takes a tuple argument")
            inputs.append(value)
        shape, dtype = tensor_type(call.ty, f"{op_name} result")
        node_id = self._add(
            {
                "op": op_name,
                "name": f"{op_name.split('.')[-1]}_{len(self.nodes)}",
                "inputs": inputs,
                "shape": shape,
                "dtype": dtype,
                "attrs": attrs,
                "composite": composite,
            }
        )
        if op_name == "nn.batch_norm":
            # Inference batch_norm returns (out, moving_mean, moving_var) unchanged.
            return (node_id, inputs[3], inputs[4])
        return node_id


def _flatten(value: _Value):
    if isinstance(value, tuple):
        for item in value:
            yield from _flatten(item)
    else:
        yield value


def _integer_bilinear(node: dict[str, Any]) -> bool:
    return (
        node["op"] == "image.resize2d"
        and node["dtype"] == "int8"
        and node["attrs"].get("method") == "linear"
    )


def serialize_function(
    func: relax.Function,
    constant_names: Mapping[Any, str],
    config: NPUConfig | None = None,
    rounding: str = "tvm",
) -> dict[str, Any]:
    """Returns the NPU graph (as a dict) of one function carrying ``Codegen="example_npu"``.

    The NPUConfig travels in the graph, so the compiled module (and an exported library) keeps
    the architecture it was compiled for.
    """
    symbol = str(func.attrs["global_symbol"])
    graph = _GraphBuilder(symbol, constant_names).build(func)
    if rounding != "tvm":  # the C++ default; every qnn op but the table lookup computes with it
        for node in graph["nodes"]:
            if node["op"].startswith("qnn.") and node["op"] != "qnn.lut":
                node["attrs"]["rounding"] = rounding
            elif _integer_bilinear(node):  # TFLite's int8 RESIZE_BILINEAR kernel
                node["attrs"]["rounding"] = rounding
    graph["npu_config"] = asdict(config or NPUConfig())
    return graph


def create_runtime_module(graph: dict[str, Any]) -> tvm_ffi.Module:
    """Builds the C++ ``example_npu_json`` module; the C++ side validates the graph again."""
    const_names = [node["name"] for node in graph["nodes"] if node["op"] == "const"]
    create = tvm_ffi.get_global_func("runtime.ExampleNPUJSONRuntimeCreate")
    return create(graph["symbol"], json.dumps(graph), const_names)


def example_npu_codegen(
    functions: Sequence[relax.Function],
    options: Mapping[str, Any],
    constant_names: Mapping[Any, str],
) -> list[tvm_ffi.Module]:
    """The ``relax.ext.example_npu`` entry point called by ``RunCodegen``."""
    unknown = set(options) - {"npu_config", "rounding"}
    if unknown:
        raise CodegenError(f"unknown example_npu codegen options: {sorted(unknown)}")
    config = NPUConfig.from_json(str(options["npu_config"])) if "npu_config" in options else None
    rounding = str(options.get("rounding", "tvm"))
    return [
        create_runtime_module(serialize_function(f, constant_names, config, rounding))
        for f in functions
    ]
