"""Bias + activation chains partition into one fused composite and compute like TVM."""

from __future__ import annotations

import example_npu
import numpy as np
import pytest
import tvm
from spec_models import run
from tvm import relax

RNG = np.random.default_rng(2024)


def composite_names(mod: tvm.IRModule) -> list[str]:
    names = []
    for _, func in mod.functions.items():

        def visit(expr):
            if isinstance(expr, relax.Function) and expr.attrs and "Composite" in expr.attrs:
                names.append(str(expr.attrs["Composite"]))

        relax.analysis.post_order_visit(func.body, visit)
    return sorted(names)


def merged_only(mod: tvm.IRModule) -> tvm.IRModule:
    patterns = tvm.relax.backend.pattern_registry.get_patterns_with_prefix("example_npu")
    mod = relax.transform.FuseOpsByPattern(patterns, annotate_codegen=False)(mod)
    return relax.transform.MergeCompositeFunctions()(mod)


def conv_model(dtype: str, bias_form: str, activation: str | None) -> tvm.IRModule:
    x = relax.Var("x", relax.TensorType((1, 4, 9, 9), dtype))
    weight = relax.const(RNG.standard_normal((6, 4, 3, 3)).astype(dtype))
    bias = RNG.standard_normal(6).astype(dtype)
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            conv = bb.emit(relax.op.nn.conv2d(x, weight, padding=(1, 2, 0, 1), strides=(2, 1)))
            if bias_form == "reshape":  # what the PyTorch importer emits
                b = bb.emit(relax.op.reshape(relax.const(bias), (1, 6, 1, 1)))
                y = bb.emit(relax.op.add(conv, b))
            else:  # a folded (1, C, 1, 1) constant on the left
                y = bb.emit(relax.op.add(relax.const(bias.reshape(1, 6, 1, 1)), conv))
            if activation == "relu":
                y = bb.emit(relax.op.nn.relu(y))
            elif activation == "relu6":
                y = bb.emit(relax.op.clip(y, 0, 6))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return bb.get()


def linear_model(dtype: str, activation: str | None, dense: bool) -> tvm.IRModule:
    x = relax.Var("x", relax.TensorType((3, 16), dtype))
    w = RNG.standard_normal((8, 16) if dense else (16, 8)).astype(dtype)
    bias = relax.const(RNG.standard_normal(8).astype(dtype))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            rhs = relax.op.permute_dims(relax.const(w)) if dense else relax.const(w)
            y = bb.emit(relax.op.add(bb.emit(relax.op.matmul(x, rhs)), bias))
            if activation == "relu":
                y = bb.emit(relax.op.nn.relu(y))
            elif activation == "gelu":
                y = bb.emit(relax.op.nn.gelu(y))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return bb.get()


def check_matches(model: tvm.IRModule, input_shape: tuple[int, ...], dtype: str) -> None:
    x = RNG.standard_normal(input_shape).astype(dtype)
    npu = run(example_npu.partition_for_npu(model), [x])
    cpu = run(model, [x])
    if dtype == "float32":
        np.testing.assert_allclose(npu, cpu, rtol=1e-5, atol=1e-5)
    else:  # TVM's float16 build accumulates in float16; the NPU accumulates in float32
        np.testing.assert_allclose(
            npu.astype("float32"), cpu.astype("float32"), rtol=2e-2, atol=5e-2
        )


@pytest.mark.parametrize("activation", [None, "relu", "relu6"])
@pytest.mark.parametrize("bias_form", ["reshape", "constant"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_conv_bias_activation_is_one_composite(dtype, bias_form, activation):
    model = conv_model(dtype, bias_form, activation)
    suffix = f"_{activation}" if activation else ""
    assert composite_names(merged_only(model)) == [f"example_npu.conv2d_bias{suffix}_fused"]
    check_matches(model, (1, 4, 9, 9), dtype)


@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_linear_bias_activation_is_one_composite(dtype, dense, activation):
    model = linear_model(dtype, activation, dense)
    producer = "dense" if dense else "matmul"
    suffix = f"_{activation}" if activation else ""
    assert composite_names(merged_only(model)) == [f"example_npu.{producer}_bias{suffix}_fused"]
    check_matches(model, (3, 16), dtype)


def test_float16_result_is_float32_accumulation_rounded_once():
    """Against a float64 reference of the same float16 inputs the NPU is within one rounding."""
    model = linear_model("float16", None, dense=False)
    x = RNG.standard_normal((3, 16)).astype("float16")
    npu = run(example_npu.partition_for_npu(model), [x]).astype("float64")
    (w, b) = [c.value.numpy().astype("float64") for c in _constants(model)]
    exact = x.astype("float64") @ w
    # matmul rounded to float16, then the bias add rounded again: two half-ulp steps at most.
    ref = (exact.astype("float16").astype("float64") + b).astype("float16").astype("float64")
    np.testing.assert_allclose(npu, ref, rtol=2e-3, atol=2e-3)


def _constants(mod: tvm.IRModule) -> list:
    found = []
    relax.analysis.post_order_visit(
        mod["main"].body,
        lambda e: (
            found.append(e)
            if isinstance(e, tvm.ir.expr.Constant) and isinstance(e.value, tvm.runtime.Tensor)
            else None
        ),
    )
    return found


def test_bias_that_grows_the_output_is_not_fused():
    x = relax.Var("x", relax.TensorType((3, 16), "float32"))
    w = relax.const(RNG.standard_normal((16, 8)).astype("float32"))
    big = relax.const(RNG.standard_normal((2, 3, 8)).astype("float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.add(bb.emit(relax.op.matmul(x, w)), big))
        bb.emit_func_output(out)
    model = bb.get()
    assert composite_names(merged_only(model)) == ["example_npu.add", "example_npu.matmul"]
    check_matches(model, (3, 16), "float32")
