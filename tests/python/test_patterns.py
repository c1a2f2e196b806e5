"""Pattern registration: names, build-dependent rows, the table. Precedence over upstream's
pattern file, in every import order, is tested in fresh processes by test_autoload.py."""

from __future__ import annotations

import example_npu
from example_npu.partition.table import PATTERN_TABLE, op_exists
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix

SPEC_PATTERNS = {
    "dense",
    "matmul",
    "conv1d",
    "conv2d",
    "depthwise_conv2d",
    "max_pool2d",
    "avg_pool2d",
    "batch_norm",
    "softmax",
    "add",
    "multiply",
    "subtract",
    "divide",
    "relu",
    "gelu",
    "quantize",
    "dequantize",
    "conv2d_relu_fused",
    "matmul_relu_fused",
}
BUILD_DEPENDENT = {
    "relu6": "relax.clip",
    "sigmoid": "relax.sigmoid",
    "tanh": "relax.tanh",
    "gelu_tanh": "relax.nn.gelu_tanh",
}


def registered_names() -> list[str]:
    return [pattern.name for pattern in get_patterns_with_prefix("example_npu")]


def test_every_spec_pattern_is_registered_once():
    names = registered_names()
    assert {f"example_npu.{name}" for name in SPEC_PATTERNS} <= set(names)
    assert len(names) == len(set(names)), "a pattern name is registered twice"


def test_build_dependent_patterns_follow_op_availability():
    names = set(registered_names())
    for name, op in BUILD_DEPENDENT.items():
        assert (f"example_npu.{name}" in names) == op_exists(op), name
    assert not op_exists("relax.nn.no_such_op")


def test_fused_patterns_have_priority_over_single_ops():
    names = registered_names()  # highest priority first
    assert names.index("example_npu.conv2d_relu_fused") < names.index("example_npu.conv2d")
    assert names.index("example_npu.matmul_relu_fused") < names.index("example_npu.matmul")
    assert names.index("example_npu.dense") < names.index("example_npu.matmul")


def test_registered_list_matches_table():
    available = [row.full_name for row in PATTERN_TABLE if all(map(op_exists, row.requires_ops))]
    assert example_npu.REGISTERED_PATTERNS == available
