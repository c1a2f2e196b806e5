"""Bad graphs, bad bytes and bad calls raise Python exceptions that name the problem."""

from __future__ import annotations

import json

import example_npu
import numpy as np
import pytest
import tvm
from spec_models import MatmulReLU

create = tvm.get_global_func("runtime.ExampleNPUJSONRuntimeCreate")
load = tvm.get_global_func("ffi.Module.load_from_bytes.example_npu_json")


def relu_graph(**overrides):
    graph = {
        "version": 1,
        "symbol": "f",
        "nodes": [
            {"op": "input", "name": "x", "shape": [2, 3], "dtype": "float32"},
            {"op": "nn.relu", "name": "y", "inputs": [0], "shape": [2, 3], "dtype": "float32"},
        ],
        "arg_nodes": [0],
        "heads": [1],
    }
    graph.update(overrides)
    return graph


def make(graph, symbol="f", const_names=()):
    return create(
        symbol, json.dumps(graph) if isinstance(graph, dict) else graph, list(const_names)
    )


def test_valid_graph_runs():
    module = make(relu_graph())
    x = np.array([[-1, 2, -3], [4, -5, 6]], "float32")
    out = tvm.runtime.tensor(np.zeros((2, 3), "float32"))
    module.get_function("f")(tvm.runtime.tensor(x), out)
    np.testing.assert_array_equal(out.numpy(), np.maximum(x, 0))


@pytest.mark.parametrize(
    "graph, message",
    [
        ("{not json", "not valid JSON"),
        ("[]", "must be a JSON object"),
        (relu_graph(version=2), "version 2"),
        (relu_graph(heads=[5]), "head 5"),
        (relu_graph(arg_nodes=[]), "missing from arg_nodes"),
        (
            relu_graph(
                nodes=[
                    {"op": "input", "name": "x", "shape": [2], "dtype": "float32"},
                    {"op": "nn.frob", "name": "y", "inputs": [0], "shape": [2], "dtype": "float32"},
                ]
            ),
            "not an NPU operator",
        ),
        (
            relu_graph(nodes=[{"op": "input", "name": "x", "shape": [2], "dtype": "float64"}]),
            "not an NPU dtype",
        ),
        (
            relu_graph(
                nodes=[
                    {"op": "input", "name": "x", "shape": [2], "dtype": "float32"},
                    {"op": "nn.relu", "name": "y", "inputs": [3], "shape": [2], "dtype": "float32"},
                ]
            ),
            "does not name an earlier node",
        ),
        (
            relu_graph(
                nodes=[
                    {"op": "input", "name": "x", "shape": [2], "dtype": "float32"},
                    {"op": "nn.relu", "name": "y", "inputs": [0], "shape": [3], "dtype": "float32"},
                ]
            ),
            "declared shape",
        ),
        (
            relu_graph(
                nodes=[
                    {"op": "input", "name": "x", "shape": [1, 1, 4, 4], "dtype": "float32"},
                    {
                        "op": "nn.max_pool2d",
                        "name": "y",
                        "inputs": [0],
                        "shape": [1, 1, 2, 2],
                        "dtype": "float32",
                        "attrs": {"pool_size": [2, 2]},
                    },
                ]
            ),
            'no "strides"',
        ),
        (
            relu_graph(
                nodes=[
                    {"op": "input", "name": "x", "shape": [2], "dtype": "int8"},
                    {"op": "nn.relu", "name": "y", "inputs": [0], "shape": [2], "dtype": "int8"},
                ]
            ),
            "not executable",
        ),
    ],
)
def test_malformed_graphs_raise_value_error(graph, message):
    with pytest.raises(ValueError, match=message):
        make(graph)


def test_const_names_must_match_graph():
    with pytest.raises(ValueError, match="const_names"):
        make(relu_graph(), const_names=["w"])


@pytest.mark.parametrize(
    "data", [b"", b"\x00\x01garbage", b'{"format": "example_npu_json", "vers', b'{"format": 1}']
)
def test_truncated_or_corrupt_module_bytes_raise(data):
    with pytest.raises(ValueError, match="example_npu_json module bytes"):
        load(data)


def test_module_bytes_with_a_bad_graph_raise():
    data = json.dumps({"format": "example_npu_json", "version": 1, "graph": "{}"}).encode()
    with pytest.raises(ValueError, match="version"):
        load(data)


@pytest.fixture(scope="module")
def matmul_vm():
    ex = tvm.compile(example_npu.partition_for_npu(MatmulReLU), target="llvm")
    return tvm.relax.VirtualMachine(ex, tvm.cpu())


def test_direct_call_with_wrong_argument_count():
    module = make(relu_graph())
    with pytest.raises(ValueError, match="expects 2 tensor arguments"):
        module.get_function("f")(tvm.runtime.tensor(np.zeros((2, 3), "float32")))


def test_wrong_input_shape_through_the_vm_raises(matmul_vm):
    # The VM's own signature check catches it before the NPU call; either way a clear error.
    x = tvm.runtime.tensor(np.zeros((3, 4), "float32"))
    w = tvm.runtime.tensor(np.zeros((4, 8), "float32"))
    with pytest.raises(RuntimeError, match="shape"):
        matmul_vm["main"](x, w)


def test_wrong_dtype_at_the_runtime_boundary():
    module = make(relu_graph())
    out = tvm.runtime.tensor(np.zeros((2, 3), "float32"))
    with pytest.raises(TypeError, match="expected float32"):
        module.get_function("f")(tvm.runtime.tensor(np.zeros((2, 3), "int32")), out)


def test_wrong_shape_at_the_runtime_boundary():
    module = make(relu_graph())
    out = tvm.runtime.tensor(np.zeros((2, 3), "float32"))
    with pytest.raises(ValueError, match=r"has shape \(3, 2\), expected \(2, 3\)"):
        module.get_function("f")(tvm.runtime.tensor(np.zeros((3, 2), "float32")), out)


def test_non_tensor_argument_raises_type_error():
    module = make(relu_graph())
    out = tvm.runtime.tensor(np.zeros((2, 3), "float32"))
    with pytest.raises(TypeError, match="expected a tensor"):
        module.get_function("f")(1, out)


def test_unknown_function_name_returns_nothing():
    assert make(relu_graph()).implements_function("nope") is False


def test_constants_must_be_initialised_before_the_call():
    graph = relu_graph(
        nodes=[
            {"op": "input", "name": "x", "shape": [2], "dtype": "float32"},
            {"op": "const", "name": "f_example_npu_const_0", "shape": [2], "dtype": "float32"},
            {"op": "add", "name": "y", "inputs": [0, 1], "shape": [2], "dtype": "float32"},
        ],
        heads=[2],
    )
    module = make(graph, const_names=["f_example_npu_const_0"])
    x = tvm.runtime.tensor(np.ones(2, "float32"))
    out = tvm.runtime.tensor(np.zeros(2, "float32"))
    with pytest.raises(ValueError, match="__init_f"):
        module.get_function("f")(x, out)
    with pytest.raises(ValueError, match="expected 1 constants"):
        module.get_function("__init_f")([])
    module.get_function("__init_f")([tvm.runtime.tensor(np.array([1.0, -3.0], "float32"))])
    module.get_function("f")(x, out)
    np.testing.assert_array_equal(out.numpy(), [2.0, -2.0])
