"""Support check of onnxruntime's ``MatMulInteger`` (``quantize_dynamic`` models) on the NPU.

The NPU computes ``float32(sum_k (x[m, k] - zero_point) * w[k, n])`` as one integer matmul with a
float32 result (src/graph/qnn_attrs.cc, ``ParseIntegerSumAttrs``): the sums are exact, as TVM's
int32 matmul is wherever it cannot wrap, and the cast rounds as TVM's does. The activation's zero
point may be computed at run time (``DynamicQuantizeLinear``): the NPU then reads it from that
input of the function when the matmul runs (``input_zero_point_node``), with no new program.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from tvm.ir.expr import Constant

from ...relax_types import constant_value, shape_of, tensor_dtype
from ..verdict import ACCEPT, Verdict, first_failure, reject
from .compute import check_static_shapes

_ACTIVATIONS = ("int8", "uint8")
# |x - zero point| <= 255 and |w| <= 128: below this depth no sum can leave int32 (TVM's wraps).
MAX_DEPTH = (2**31 - 1) // (255 * 128)


def _check_casts(annotated: Mapping[str, Any]) -> Verdict:
    x = annotated["input"]
    if tensor_dtype(x) not in _ACTIVATIONS:
        return reject(f"matmul: {tensor_dtype(x)} activations (the integer matmul reads 8 bits)")
    if tensor_dtype(annotated["x32"]) != "int32" or tensor_dtype(annotated["w32"]) != "int32":
        return reject("matmul: the integer operands must be widened to int32")
    if tensor_dtype(annotated["weight"]) != "int8":
        return reject(f"matmul: {tensor_dtype(annotated['weight'])} weight (int8 only)")
    if tensor_dtype(annotated["root"]) != "float32":
        return reject("matmul: the int32 result must be cast to float32")
    if "zero_point" in annotated:
        return _check_zero_point(annotated["zero_point"], tensor_dtype(x))
    return ACCEPT


def _check_zero_point(widened: Any, dtype: str) -> Verdict:
    """One zero point of the activation's dtype: astype(zp, int32), or the int32 constant the
    canonicalizer folded that to (its value then in the dtype's range)."""
    if shape_of(widened) not in ((), (1,)):
        return reject("matmul: a per-tensor zero point only")
    if isinstance(widened, Constant):
        low, high = np.iinfo(dtype).min, np.iinfo(dtype).max
        if not low <= int(constant_value(widened).reshape(-1)[0]) <= high:
            return reject(f"matmul: the zero point is outside the {dtype} range")
        return ACCEPT
    if tensor_dtype(widened.args[0]) != dtype:
        return reject("matmul: the zero point's dtype is not the activation's")
    return ACCEPT


def check_integer_matmul_region(annotated: Mapping[str, Any]) -> Verdict:
    """astype(matmul(x_q - zero point, w_int8), float32) with 8-bit x_q, a constant int8 weight
    matrix and a depth whose sums stay in int32."""
    matmul = annotated["matmul"]
    verdict = first_failure((_check_casts(annotated), check_static_shapes(matmul)))
    if not verdict:
        return verdict
    if tensor_dtype(matmul) != "int32":
        return reject(f"matmul: {tensor_dtype(matmul)} result (the integer sum is int32)")
    lhs, weight = shape_of(annotated["x32"]), shape_of(annotated["weight"])
    if lhs is None or weight is None or len(weight) != 2 or len(lhs) < 2:
        return reject("matmul: an activation of rank >= 2 times a weight matrix")
    if lhs[-1] > MAX_DEPTH:
        return reject(f"matmul: depth {lhs[-1]} can leave int32 (at most {MAX_DEPTH})")
    return ACCEPT
