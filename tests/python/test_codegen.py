"""Codegen: main calls the external symbol and the graph JSON describes the region."""

from __future__ import annotations

import json

import example_npu
import pytest
import tvm
from example_npu.codegen.graph import CodegenError, serialize_function
from spec_models import SPEC_MODULES, MultipleOps, external_symbols
from tvm import relax
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
from tvm.relax.transform import FuseOpsByPattern, MergeCompositeFunctions


def merged(mod: tvm.IRModule) -> relax.Function:
    patterns = get_patterns_with_prefix("example_npu")
    mod = FuseOpsByPattern(patterns, bind_constants=False, annotate_codegen=False)(mod)
    mod = MergeCompositeFunctions()(mod)
    (func,) = [f for _, f in mod.functions.items() if f.attrs and "Codegen" in f.attrs]
    return func


@pytest.mark.parametrize("name", sorted(SPEC_MODULES))
def test_main_calls_the_npu_symbol(name):
    mod = example_npu.partition_for_npu(SPEC_MODULES[name])
    symbols = external_symbols(mod)
    assert len(symbols) == 1 and symbols[0].endswith("example_npu")
    (npu_module,) = mod.attrs["external_mods"]
    assert npu_module.kind == "example_npu_json"
    assert npu_module.get_function("get_symbol")() == symbols[0]
    graph = json.loads(npu_module.inspect_source())
    assert graph["symbol"] == symbols[0]


def test_multiple_ops_graph_has_three_kernel_nodes_and_intermediates():
    graph = serialize_function(merged(MultipleOps), {})
    ops = [node["op"] for node in graph["nodes"]]
    assert ops == ["input", "nn.relu", "nn.max_pool2d", "nn.relu"]
    assert graph["arg_nodes"] == [0] and graph["heads"] == [3]
    relu, pool, relu2 = graph["nodes"][1:]
    assert relu["inputs"] == [0] and pool["inputs"] == [1] and relu2["inputs"] == [2]
    assert pool["shape"] == [1, 16, 16, 16] and pool["dtype"] == "float32"
    assert pool["attrs"]["pool_size"] == [2, 2] and pool["attrs"]["layout"] == "NCHW"
    assert pool["composite"] == "example_npu.max_pool2d"


def test_bound_constants_become_const_nodes_in_loader_order():
    import numpy as np

    weight = relax.const(np.ones((4, 8), "float32"))
    x = relax.Var("x", relax.TensorType((2, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.nn.relu(relax.op.matmul(x, weight)))
        bb.emit_func_output(y)
    mod = example_npu.partition_for_npu(bb.get())
    (npu_module,) = mod.attrs["external_mods"]
    const_vars = list(npu_module.get_function("get_const_vars")())
    assert len(const_vars) == 1 and const_vars[0].endswith("_example_npu_const_0")
    graph = json.loads(npu_module.inspect_source())
    assert [n["name"] for n in graph["nodes"] if n["op"] == "const"] == const_vars


def test_unknown_codegen_options_are_rejected():
    with pytest.raises(CodegenError, match="unknown example_npu codegen options"):
        example_npu.example_npu_codegen([merged(MultipleOps)], {"frobnicate": 1}, {})
