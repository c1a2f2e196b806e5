"""onnxruntime's ``MatMulInteger`` as TVM imports it, with the int8 weight the NPU multiplies by.

``quantize_dynamic`` writes ``MatMulInteger(a_uint8, b_int8, a_zero_point, b_zero_point)``; TVM's
ONNX importer lowers it to an int32 ``matmul`` of both operands cast to int32 less their zero
points, and the canonicalizer's constant folding turns the weight side into one int32 constant.
Where that constant holds int8 values (the quantizer's symmetric int8 weights), it becomes
``astype(int8 constant, "int32")``: the same int32 values, and the int8 weight the integer matmul
pattern (``partition/quantized_rows.py``) offloads. Runs after every fold (a fold would undo it).
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import Constant
from tvm.relax.expr_functor import PyExprMutator, mutator

from ..relax_types import call_op_name, dtype_of

_INT8_MIN, _INT8_MAX = -128, 127


def _int8_values(expr: relax.Expr) -> np.ndarray | None:
    """The values of an int32 constant matrix when every one of them is an int8, else None."""
    if not isinstance(expr, Constant) or dtype_of(expr) != "int32":
        return None
    values = expr.value.numpy()
    if values.ndim != 2 or values.size == 0:
        return None
    if values.min() < _INT8_MIN or values.max() > _INT8_MAX:
        return None
    return values.astype("int8")


@mutator
class _Int8Weights(PyExprMutator):
    def visit_call_(self, call: relax.Call) -> relax.Expr:  # noqa: D102 (visitor protocol)
        call = super().visit_call_(call)
        if call_op_name(call) != "relax.matmul" or dtype_of(call) != "int32":
            return call
        weight = _int8_values(call.args[1])
        if weight is None:
            return call
        widened = self.builder_.emit(relax.op.astype(relax.const(weight, "int8"), "int32"))
        return self.builder_.normalize(relax.op.matmul(call.args[0], widened, out_dtype="int32"))


def int8_integer_weights(mod: tvm.IRModule) -> tvm.IRModule:
    """``main`` with the int8-valued int32 weight constants of int32 matmuls as
    ``astype(int8 constant, "int32")`` (see the module docstring)."""
    mod = mod.clone() if hasattr(mod, "clone") else tvm.IRModule(mod.functions, attrs=mod.attrs)
    main = _Int8Weights(mod).visit_expr(mod["main"])
    mod[mod.get_global_var("main")] = main
    return relax.transform.Normalize()(mod)
