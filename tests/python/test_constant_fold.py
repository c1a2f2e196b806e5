"""Constant folding before partitioning: values computed from constants alone are folded to
what TVM's CPU build computes, bool arithmetic TVM cannot build is legalized, identities go."""

from __future__ import annotations

import example_npu  # noqa: F401  # registers patterns, codegen and runtime
import numpy as np
import pytest
import tvm
from example_npu.frontend import constant_fold
from example_npu.frontend.canonicalize import canonicalize
from example_npu.partition.report import partition_with_report
from tvm import relax


def _module(params: list[relax.Var], build) -> tvm.IRModule:
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(build(bb, *params))
        bb.emit_func_output(out)
    return bb.get()


def _ops(mod: tvm.IRModule) -> list[str]:
    found: list[str] = []
    relax.analysis.post_order_visit(
        mod["main"].body,
        lambda n: (
            found.append(n.op.name)
            if isinstance(n, relax.Call) and isinstance(n.op, tvm.ir.Op)
            else None
        ),
    )
    return found


def _run(mod: tvm.IRModule, *args: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return vm["main"](*(tvm.runtime.tensor(a) for a in args)).numpy()


def _causal_mask_model(length: int) -> tvm.IRModule:
    """x + where(j <= i, 0, finfo.min), the mask built from arange: float, int64 and bool ops."""
    x = relax.Var("x", relax.TensorType((1, length, length), "float32"))

    def build(bb, x):
        rows = bb.emit(relax.op.expand_dims(relax.op.arange(0, length, 1, "int64"), [-1]))
        cols = bb.emit(relax.op.expand_dims(relax.op.arange(0, length, 1, "int64"), [0]))
        allowed = bb.emit(relax.op.less_equal(relax.op.subtract(cols, rows), relax.const(0)))
        lowest = relax.const(np.finfo("float32").min, "float32")
        bias = bb.emit(relax.op.where(allowed, relax.const(0.0, "float32"), lowest))
        return relax.op.add(x, bias)

    return _module([x], build)


def test_a_float_mask_built_from_constants_is_folded_bit_exactly():
    mod = _causal_mask_model(12)
    folded = canonicalize(mod)
    assert _ops(folded) == ["relax.add"], _ops(folded)
    x = np.random.default_rng(0).standard_normal((1, 12, 12)).astype("float32")
    np.testing.assert_array_equal(_run(folded, x), _run(mod, x))
    _, report = partition_with_report(mod)
    assert len(report.npu_functions) == 1 and not report.cpu_ops, report.table()


def test_results_over_the_size_limit_stay_calls(monkeypatch):
    monkeypatch.setattr(constant_fold, "FOLD_MAX_ELEMENTS", 100)
    constant_fold._FOLDED.clear()
    folded = canonicalize(_causal_mask_model(12))  # the 144-element mask is over the limit
    assert "relax.where" in _ops(folded)
    constant_fold._FOLDED.clear()


def test_a_weight_norm_over_the_size_limit_folds_into_the_weight(monkeypatch):
    """wav2vec2's positional conv weight is torch's weight_norm: g * v / ||v||, computed from its
    parameters. Results no larger than a constant they are computed from fold whatever the limit
    (here 100 elements against a 384-element v); only the conv is left, bit for bit TVM's."""
    monkeypatch.setattr(constant_fold, "FOLD_MAX_ELEMENTS", 100)
    constant_fold._FOLDED.clear()
    rng = np.random.default_rng(4)
    v = rng.standard_normal((8, 4, 12)).astype("float32")
    g = rng.uniform(0.5, 2.0, (1, 1, 12)).astype("float32")
    x = relax.Var("x", relax.TensorType((1, 8, 20), "float32"))

    def build(bb, x):
        op = relax.op
        norm = op.sqrt(
            op.sum(op.power(relax.const(v), relax.const(2.0)), axis=[0, 1], keepdims=True)
        )
        weight = op.multiply(relax.const(g), op.divide(relax.const(v), norm))
        return op.nn.conv1d(x, bb.emit(weight), padding=6, groups=2)

    mod = _module([x], build)
    folded = canonicalize(mod)
    assert _ops(folded) == ["relax.nn.conv1d"], _ops(folded)
    data = rng.standard_normal((1, 8, 20)).astype("float32")
    np.testing.assert_array_equal(_run(folded, data), _run(mod, data))
    constant_fold._FOLDED.clear()


def _bool_cumsum_model(shape: tuple[int, ...], exclusive: bool) -> tvm.IRModule:
    """astype(cumsum(b), float32) of a bool tensor, as TVM's PyTorch importer emits it."""
    b = relax.Var("b", relax.TensorType(shape, "bool"))

    def build(bb, b):
        scan = bb.emit(relax.op.cumsum(b, axis=-1, exclusive=exclusive))
        return relax.op.astype(scan, "float32")

    return _module([b], build)


@pytest.mark.parametrize("exclusive", [False, True])
def test_a_run_time_bool_cumsum_builds_as_the_running_or_its_type_declares(exclusive):
    mod = _bool_cumsum_model((3, 9), exclusive)
    with pytest.raises(Exception, match="kDLFloat"):
        tvm.compile(mod, target="llvm")  # TVM's own build of its import
    b = np.random.default_rng(1).random((3, 9)) < 0.3
    b[0] = False
    ones = b.astype("int64")
    expected = np.cumsum(ones, axis=-1) - (ones if exclusive else 0)
    out = _run(canonicalize(mod), b)
    np.testing.assert_array_equal(out, (expected != 0).astype("float32"))


def test_bool_comparisons_and_reductions_fold_without_tvm_building_them():
    """equal / max of bools (TVM's LLVM build fails on both) folded from constants."""
    values = np.array([[True, False, True], [False, False, True]])
    b = relax.Var("x", relax.TensorType((2, 3), "float32"))

    def build(bb, x):
        c = relax.const(values)
        same = bb.emit(relax.op.equal(c, relax.const(np.array([True, False, False]))))
        any_row = bb.emit(relax.op.max(same, axis=[1], keepdims=True))
        return relax.op.where(any_row, x, relax.op.negative(x))

    folded = canonicalize(_module([b], build))
    assert "relax.equal" not in _ops(folded) and "relax.max" not in _ops(folded)
    x = np.arange(6, dtype="float32").reshape(2, 3)
    same = values == np.array([True, False, False])
    np.testing.assert_array_equal(_run(folded, x), np.where(same.any(1, keepdims=True), x, -x))


def test_identities_disappear():
    x = relax.Var("x", relax.TensorType((1, 4, 4, 8), "float32"))

    def build(bb, x):
        padded = bb.emit(relax.op.nn.pad(x, [0] * 8))
        same = bb.emit(relax.op.astype(relax.op.reshape(padded, (1, 4, 4, 8)), "float32"))
        kept = bb.emit(relax.op.where(relax.const(np.ones((1, 4, 1, 1), bool)), same, x))
        return relax.op.nn.relu(relax.op.permute_dims(kept, [0, 1, 2, 3]))

    assert _ops(canonicalize(_module([x], build))) == ["relax.nn.relu"]


def test_a_linear_weight_transpose_stays_for_the_dense_pattern():
    x = relax.Var("x", relax.TensorType((2, 8), "float32"))
    weight = relax.const(np.ones((4, 8), "float32"))

    def build(bb, x):
        return relax.op.matmul(x, relax.op.permute_dims(weight, [1, 0]))

    assert "relax.permute_dims" in _ops(canonicalize(_module([x], build)))


@pytest.mark.parametrize("axes", [None, [1, 0]])
def test_a_square_transpose_is_not_an_identity(axes):
    """permute_dims without axes reverses them: on a square matrix the type is unchanged but
    the values move (the random dense suite's float16 case #14 lost its transpose)."""
    x = relax.Var("x", relax.TensorType((4, 4), "float32"))
    mod = _module([x], lambda bb, x: relax.op.permute_dims(x, axes))
    data = np.arange(16, dtype="float32").reshape(4, 4)
    assert "relax.permute_dims" in _ops(canonicalize(mod))
    np.testing.assert_array_equal(_run(canonicalize(mod), data), data.T)
