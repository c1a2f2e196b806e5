"""Attention's activation x activation matmuls (q.k^T, p.v) as onnxruntime quantizes them:
quantize(matmul(dequantize(a), dequantize(b))) with both operands run-time int8 tensors (b with
its own zero point) is one integer qnn.matmul on the NPU. Randomized cases (rank 2 to 4, int8 /
uint8 left operands and results, random zero points and scales) are bit-equal to TVM's CPU build
of the float QDQ graph, and to a numpy integer reference but at near rounding ties."""

from __future__ import annotations

import functools

import example_npu
import numpy as np
import pytest
import tvm
from example_npu import NPUConfig
from example_npu.partition.report import partition_with_report
from qdq_checks import assert_one_integer_op_bit_exact, assert_one_lsb_mismatches_rare
from qdq_models import requantize_reference
from spec_models import npu_ops, run
from tvm import relax

SEED = 20
CASES = 16


def _c(value, dtype):
    return relax.const(np.asarray(value, dtype=dtype))


def random_case(rng: np.random.Generator) -> dict:
    batch = [(), (3,), (1, 2)][int(rng.integers(0, 3))]
    m, k, n = (int(v) for v in rng.integers(1, 24, 3))
    lhs_dtype, out_dtype = (str(rng.choice(["int8", "uint8"])) for _ in range(2))

    def params(dtype):
        info = np.iinfo(dtype)
        return float(rng.uniform(0.005, 0.05)), int(rng.integers(info.min, info.max + 1))

    def values(shape, dtype):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max + 1, shape).astype(dtype)

    return {
        "a": values((*batch, m, k), lhs_dtype),
        "b": values((*batch, k, n), "int8"),
        "a_params": params(lhs_dtype),
        "b_params": params("int8"),
        # Scaled so results span a few hundred steps.
        "y_params": (float(rng.uniform(0.2, 1.0)) * np.sqrt(k) * 0.01, params(out_dtype)[1]),
        "out_dtype": out_dtype,
    }


def build(case: dict) -> tvm.IRModule:
    a = relax.Var("a", relax.TensorType(case["a"].shape, str(case["a"].dtype)))
    b = relax.Var("b", relax.TensorType(case["b"].shape, str(case["b"].dtype)))
    bb = relax.BlockBuilder()
    with bb.function("main", [a, b]):
        with bb.dataflow():
            operands = [
                bb.emit(relax.op.dequantize(v, _c(scale, "float32"), _c(zp, str(v.ty.dtype))))
                for v, (scale, zp) in ((a, case["a_params"]), (b, case["b_params"]))
            ]
            product = bb.emit(relax.op.matmul(*operands))
            scale, zp = case["y_params"]
            dtype = case["out_dtype"]
            out = relax.op.quantize(product, _c(scale, "float32"), _c(zp, dtype), out_dtype=dtype)
            out = bb.emit_output(out)
        bb.emit_func_output(out)
    return bb.get()


def reference(case: dict) -> np.ndarray:
    a = case["a"].astype(np.int64) - case["a_params"][1]
    b = case["b"].astype(np.int64) - case["b_params"][1]
    acc = np.matmul(a, b)
    scale = case["b_params"][0]
    y = case["y_params"]
    return requantize_reference(acc, case["a_params"][0], [scale], y, None, None, case["out_dtype"])


@functools.cache
def one_lsb_share(index: int) -> float:
    case = random_case(np.random.default_rng([SEED, index]))
    label = f"seed={SEED} case={index} {case['a'].shape} x {case['b'].shape}"
    return assert_one_integer_op_bit_exact(
        build(case), [case["a"], case["b"]], reference(case), label, "qnn.matmul"
    )


@pytest.mark.parametrize("index", range(CASES))
def test_activation_matmul_is_tvms_build_bit_for_bit(index):
    one_lsb_share(index)


def test_one_lsb_mismatches_are_rare():
    assert_one_lsb_mismatches_rare(one_lsb_share, CASES, "activation qnn.matmul")


def test_tiny_l1_tiles_stay_bit_exact():
    """Attention-sized operands split over k, m and n (each k-tile subtracts its own share of
    the zero-point term)."""
    rng = np.random.default_rng([SEED, 99])
    case = random_case(rng)
    case["a"] = rng.integers(-128, 128, (1, 2, 40, 72)).astype("int8")
    case["b"] = rng.integers(-128, 128, (1, 2, 72, 48)).astype("int8")
    case["y_params"] = (0.02 * np.sqrt(72) * 0.4, 3)
    tiny = example_npu.partition_for_npu(build(case), config=NPUConfig(l1_sram_kb=4))
    assert npu_ops(tiny) == ["qnn.matmul"]
    np.testing.assert_array_equal(run(tiny, [case["a"], case["b"]]), reference(case))


def test_a_uint8_right_operand_stays_off_the_integer_matmul():
    """The integer matmul reads an int8 right operand; a uint8 one keeps the float ops (on the
    NPU), still within 1 LSB of TVM's build."""
    case = random_case(np.random.default_rng([SEED, 7]))
    case["b"] = (case["b"].astype(np.int16) + 128).astype("uint8")
    case["b_params"] = (case["b_params"][0], case["b_params"][1] + 128)
    model = build(case)
    offloaded, report = partition_with_report(model)
    assert "qnn.matmul" not in npu_ops(offloaded), report.table()
    inputs = [case["a"], case["b"]]
    diff = run(offloaded, inputs).astype(np.int64) - run(model, inputs).astype(np.int64)
    assert np.abs(diff).max() <= 1
