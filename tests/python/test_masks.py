"""Run-time attention masks as float arithmetic on the NPU (frontend/masks.py): the bool chains
transformers builds from a tokenizer's attention_mask, where of constants, casts before data
movement, index_tensor / gather_nd with constant indices; bit for bit TVM's LLVM build of the
original."""

from __future__ import annotations

import example_npu  # noqa: F401  # registers patterns, codegen and runtime
import numpy as np
import pytest
import tvm
from example_npu.partition.report import partition_with_report
from tvm import relax

LENGTH = 24
FINFO_MIN = float(np.finfo(np.float32).min)


def _module(mask_dtype: str, build) -> tvm.IRModule:
    mask = relax.Var("attention_mask", relax.TensorType((2, LENGTH), mask_dtype))
    bb = relax.BlockBuilder()
    with bb.function("main", [mask]):
        with bb.dataflow():
            out = bb.emit_output(build(bb, mask))
        bb.emit_func_output(out)
    return bb.get()


def _run(mod: tvm.IRModule, mask: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(mask)).numpy()


def _masks(dtype: str) -> list[np.ndarray]:
    """Padding masks, and integers other than 0 / 1 (any non-zero integer is true)."""
    padded = np.ones((2, LENGTH), dtype)
    padded[0, 17:] = 0
    padded[1, :3] = 0
    info = np.iinfo(dtype)
    rng = np.random.default_rng(3)
    arbitrary = rng.integers(-3, 4, size=(2, LENGTH)).astype(dtype)
    arbitrary[0, :4] = [info.min, info.max, 0, -1]
    return [padded, np.zeros((2, LENGTH), dtype), arbitrary]


def _on_the_npu_bit_for_bit(mod: tvm.IRModule, masks: list[np.ndarray]) -> None:
    partitioned, report = partition_with_report(mod)
    assert len(report.npu_functions) == 1 and not report.cpu_ops, report.table()
    for mask in masks:
        expected, actual = _run(mod, mask), _run(partitioned, mask)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        np.testing.assert_array_equal(actual.view("uint32"), expected.view("uint32"))


def _transformers_mask(fill: float, picked: float = 0.0, causal: bool = True):
    """transformers 5's sdpa mask as torch.export imports it: astype(mask, bool), index_tensor
    with arange indices (mask[batch, None, None, kv]), bitwise_and with the causal mask, where
    to an additive bias."""
    op = relax.op

    def build(bb, mask):
        allowed = bb.emit(op.astype(mask, "bool"))
        batch = relax.const(np.arange(2).reshape(2, 1, 1, 1), "int64")
        kv = relax.const(np.arange(LENGTH).reshape(1, 1, 1, LENGTH), "int64")
        padding = bb.emit(op.index_tensor(allowed, relax.Tuple([batch, kv])))
        if causal:
            lower = np.tril(np.ones((LENGTH, LENGTH), bool)).reshape(1, 1, LENGTH, LENGTH)
            padding = bb.emit(op.bitwise_and(relax.const(lower), padding))
        full = bb.emit(op.broadcast_to(padding, (2, 1, LENGTH, LENGTH)))
        return op.where(full, relax.const(picked, "float32"), relax.const(fill, "float32"))

    return build


@pytest.mark.parametrize("dtype", ["int64", "int32"])
@pytest.mark.parametrize(
    ("fill", "picked", "causal"),
    [(FINFO_MIN, 0.0, True), (-np.inf, 0.0, True), (-np.inf, np.inf, False), (-2.5, 1.5, True)],
)
def test_transformers_padding_and_causal_mask_runs_on_the_npu(dtype, fill, picked, causal):
    mod = _module(dtype, _transformers_mask(fill, picked, causal))
    _on_the_npu_bit_for_bit(mod, _masks(dtype))


def test_logical_ops_and_casts_of_a_bool_mask():
    """or / xor / not of run-time bools, a bool cast to float32, a cast after expand_dims."""
    op = relax.op

    def build(bb, mask):
        allowed = bb.emit(op.astype(mask, "bool"))
        shifted = bb.emit(op.strided_slice(allowed, [1], [1], [LENGTH]))
        head = bb.emit(op.strided_slice(allowed, [1], [0], [LENGTH - 1]))
        either = bb.emit(op.logical_or(shifted, head))
        differs = bb.emit(op.bitwise_xor(shifted, head))
        neither = bb.emit(op.logical_not(either))
        cast = bb.emit(op.astype(bb.emit(op.expand_dims(mask, [1])), "float32"))
        tail = bb.emit(op.reshape(op.strided_slice(cast, [2], [1], [LENGTH]), (2, LENGTH - 1)))
        weights = relax.const(np.linspace(-3, 3, LENGTH - 1).astype("float32"))
        parts = [
            op.where(either, weights, relax.const(-1.0)),
            op.astype(differs, "float32"),
            op.where(neither, relax.const(7.0), relax.const(0.0)),
        ]
        return op.concat([*[bb.emit(p) for p in parts], tail], axis=1)

    _on_the_npu_bit_for_bit(_module("int64", build), _masks("int64"))


@pytest.mark.parametrize(("fill", "reason"), [(-0.0, "relax.where"), (np.nan, "relax.where")])
def test_a_fill_the_float_form_cannot_give_exactly_stays_on_the_cpu(fill, reason):
    """-0.0 (the sum's zero would be +0.0) and NaN (NaN * 0) are left to TVM's where."""
    mod = _module("int64", _transformers_mask(fill))
    partitioned, report = partition_with_report(mod)
    assert reason in report.cpu_ops, report.table()
    mask = _masks("int64")[0]
    np.testing.assert_array_equal(_run(partitioned, mask), _run(mod, mask))


def test_a_float_made_bool_stays_on_the_cpu():
    """bool of a float is true for NaN: not expressible as minimum(abs(x), 1)."""
    x = relax.Var("x", relax.TensorType((2, LENGTH), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            flag = bb.emit(relax.op.astype(x, "bool"))
            out = bb.emit_output(relax.op.where(flag, relax.const(0.0), relax.const(-1.0)))
        bb.emit_func_output(out)
    _, report = partition_with_report(bb.get())
    assert "relax.where" in report.cpu_ops, report.table()


@pytest.mark.parametrize(
    ("indices", "offloaded"),
    [
        ([np.array([[1], [0]]), np.array([[0, 2, 3]])], True),  # broadcast, as x[b, None, kv]
        ([np.array([2, 2, 0])], True),
        ([np.array([[0, 1]]), np.array([[4, 0]])], False),  # 4 is outside the axis
        ([np.array([-1, 0])], False),  # negative: left to TVM
    ],
)
@pytest.mark.parametrize("form", ["index_tensor", "gather_nd"])
def test_gathers_with_constant_indices_are_a_take(indices, offloaded, form):
    """index_tensor (torch.export) and gather_nd (ONNX's GatherND: the coordinates stacked on
    the last axis) with constant in-range indices: rows of the flattened axes, exactly."""
    x = relax.Var("x", relax.TensorType((3, 4, 5), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            if form == "index_tensor":
                fields = relax.Tuple([relax.const(i, "int64") for i in indices])
                gathered = relax.op.index_tensor(x, fields)
            else:
                stacked = np.stack(np.broadcast_arrays(*indices), axis=-1)
                gathered = relax.op.gather_nd(x, relax.const(stacked, "int64"))
            out = bb.emit_output(gathered)
        bb.emit_func_output(out)
    mod = bb.get()
    partitioned, report = partition_with_report(mod)
    assert (f"relax.{form}" not in report.cpu_ops) == offloaded, report.table()
    if offloaded:
        assert not report.cpu_ops, report.table()
        data = np.random.default_rng(0).standard_normal((3, 4, 5)).astype("float32")
        vm = relax.VirtualMachine(tvm.compile(partitioned, target="llvm"), tvm.cpu())
        actual = vm["main"](tvm.runtime.tensor(data)).numpy()
        np.testing.assert_array_equal(actual, data[tuple(indices)])
