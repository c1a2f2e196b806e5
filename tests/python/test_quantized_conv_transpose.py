"""Quantized transposed convolution: the QDQ chain dequantize -> conv2d_transpose (+ bias)
(+ relu / clip) -> quantize is one qnn.conv2d_transpose on the matrix engine (int8 x int8 ->
int64 sums by output phase, then the NPU's requantization). Bit-exact to the integer reference
below (scatter of every input pixel times every tap, then qdq_models' requantization), within
1 LSB of TVM's float QDQ build."""

from __future__ import annotations

import functools
import os

import example_npu
import numpy as np
import pytest
from example_npu import NPUConfig
from example_npu.partition.report import partition_with_report
from qdq_checks import assert_one_integer_op_bit_exact, assert_one_lsb_mismatches_rare
from qdq_models import int32_bias_values, qdq_module, requantize_reference
from spec_models import npu_ops, run

SEED = int(os.environ.get("EXAMPLE_NPU_SEED", "20261204"))
CASES = 24


def transposed_accumulators(x, zp, w, strides, padding, output_padding, dilation, groups):
    """Integer NCHW / IOHW transposed convolution of (x - zp) with w, channels last."""
    xi = x.astype(np.int64) - zp
    n, c, h, wd = xi.shape
    _, group_out, kh, kw = w.shape
    top, left, bottom, right = padding
    oh = (h - 1) * strides[0] + dilation[0] * (kh - 1) + 1 + output_padding[0] - top - bottom
    ow = (wd - 1) * strides[1] + dilation[1] * (kw - 1) + 1 + output_padding[1] - left - right
    acc = np.zeros((n, oh, ow, group_out * groups), np.int64)
    group_in = c // groups
    for i in range(c):
        g = i // group_in
        for y in range(h):
            for x_ in range(wd):
                for ky in range(kh):
                    for kx in range(kw):
                        oy = y * strides[0] - top + ky * dilation[0]
                        ox = x_ * strides[1] - left + kx * dilation[1]
                        if 0 <= oy < oh and 0 <= ox < ow:
                            taps = w[i, :, ky, kx].astype(np.int64)
                            acc[:, oy, ox, g * group_out : (g + 1) * group_out] += (
                                xi[:, i, y, x_, None] * taps
                            )
    return acc


def random_case(rng: np.random.Generator, index: int) -> dict:
    act_dtype = ("int8", "uint8", "int16")[index % 3]
    info = np.iinfo(act_dtype)
    groups = 2 if index % 4 == 3 else 1
    stride = int(rng.integers(1, 4))
    attrs = {
        "strides": (stride, stride),
        "padding": tuple(int(p) for p in rng.integers(0, 2, 4)),
        "output_padding": (int(rng.integers(0, stride)),) * 2,
        "dilation": (1, int(rng.integers(1, 3))),
        "groups": groups,
    }
    c, o, k = int(rng.integers(1, 5)) * groups, int(rng.integers(1, 5)) * groups, 2 + index % 2
    zp = (
        0
        if act_dtype == "int16"
        else int(rng.integers(-20, 21)) + (128 if act_dtype == "uint8" else 0)
    )
    case = {
        "act_dtype": act_dtype,
        # Per-channel weight scales are per output channel of a group-1 layer (axis 1 of IOHW).
        "per_channel": groups == 1 and bool(rng.integers(2)),
        "bias": ("float", "int32", None)[index % 3 if index % 5 else 2],
        "activation": (None, "relu", "relu6")[int(rng.integers(3))],
        "x_params": (float(rng.uniform(0.01, 0.1)), zp),
        "y_params": (float(rng.uniform(0.05, 0.5)), zp),
        "conv": attrs,
        "x_shape": (1, c, int(rng.integers(2, 7)), int(rng.integers(2, 7))),
        "weight": rng.integers(-127, 128, (c, o // groups, k, k)).astype("int8"),
    }
    if act_dtype == "int16":
        case["x_params"] = (case["x_params"][0] / 64, 0)
        case["y_params"] = (case["y_params"][0] / 64, 0)
    case["weight_scale"] = rng.uniform(0.002, 0.02, o if case["per_channel"] else 1).astype(
        "float32"
    )
    case["bias_values"] = rng.uniform(-2, 2, o).astype("float32") if case["bias"] else None
    case["x"] = rng.integers(info.min, info.max + 1, case["x_shape"]).astype(act_dtype)
    return case


def build(case: dict):
    return qdq_module(
        "conv2d_transpose",
        case["x_shape"],
        case["weight"],
        case["weight_scale"],
        case["x_params"],
        case["y_params"],
        bias=case["bias_values"],
        activation=case["activation"],
        act_dtype=case["act_dtype"],
        conv_attrs=case["conv"],
        int32_bias=case["bias"] == "int32",
    )


def reference(case: dict) -> np.ndarray:
    a = case["conv"]
    acc = transposed_accumulators(
        case["x"],
        case["x_params"][1],
        case["weight"],
        a["strides"],
        a["padding"],
        a["output_padding"],
        a["dilation"],
        a["groups"],
    )
    bias_q = None
    if case["bias"] == "int32":
        bias_q = int32_bias_values(case["bias_values"], case["x_params"][0], case["weight_scale"])
    out = requantize_reference(
        acc,
        case["x_params"][0],
        case["weight_scale"],
        case["y_params"],
        case["bias_values"],
        case["activation"],
        case["act_dtype"],
        bias_q=bias_q,
    )
    return out.transpose(0, 3, 1, 2)


def label(case: dict, index: int) -> str:
    return f"seed={SEED} case={index} {case['act_dtype']} bias={case['bias']} {case['conv']}"


@functools.cache
def one_lsb_share(index: int) -> float:
    """Runs randomized case ``index`` (bit-exact, within 1 LSB of TVM) and returns the share of
    elements 1 LSB away; cached so the aggregate test below reuses the cases already run."""
    case = random_case(np.random.default_rng([SEED, index]), index)
    return assert_one_integer_op_bit_exact(
        build(case),
        case["x"],
        reference(case),
        label(case, index),
        "qnn.conv2d_transpose",
        breaks_ties=False,
    )


@pytest.mark.parametrize("index", range(CASES))
def test_qdq_conv2d_transpose_is_bit_exact_and_within_one_lsb_of_tvm(index):
    one_lsb_share(index)


def test_one_lsb_mismatches_are_rare():
    """Over all the randomized cases above (those not yet run in this session run here)."""
    assert_one_lsb_mismatches_rare(one_lsb_share, CASES, "qnn.conv2d_transpose")


@pytest.mark.parametrize("index", [0, 1, 2, 3])
def test_tiny_l1_tiles_stay_bit_exact(index):
    case = random_case(np.random.default_rng([SEED, index]), index)
    case["x_shape"] = (1, 48 * case["conv"]["groups"], 9, 7)
    rng = np.random.default_rng([SEED, index, 1])
    info = np.iinfo(case["act_dtype"])
    case["x"] = rng.integers(info.min, info.max + 1, case["x_shape"]).astype(case["act_dtype"])
    out_per_group = case["weight"].shape[1]
    case["weight"] = rng.integers(-127, 128, (case["x_shape"][1], out_per_group, 3, 3)).astype(
        "int8"
    )
    tiny = example_npu.partition_for_npu(build(case), config=NPUConfig(l1_sram_kb=4))
    assert npu_ops(tiny) == ["qnn.conv2d_transpose"]
    np.testing.assert_array_equal(run(tiny, [case["x"]]), reference(case))


def test_per_channel_scales_of_a_grouped_layer_stay_off_the_integer_path_with_a_reason():
    """Grouped IOHW weights hold out-channels-per-group on axis 1: per-axis scales there do not
    name one scale per output channel, so the chain is no integer op; the result stays right."""
    case = random_case(np.random.default_rng([SEED, 3]), 3)
    assert case["conv"]["groups"] == 2
    case["weight_scale"] = np.full(case["weight"].shape[1], 0.01, "float32")
    model = build(case)
    partitioned, report = partition_with_report(model)
    print(report.table())
    assert report.cpu_ops, "the per-axis weight dequantize stays on the CPU"
    assert all(report.cpu_reason(op) for op in report.cpu_ops)
    np.testing.assert_array_equal(run(partitioned, [case["x"]]), run(model, [case["x"]]))
