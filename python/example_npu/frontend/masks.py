"""Run-time attention masks as float arithmetic the NPU runs, bit for bit.

A tokenizer's ``attention_mask`` reaches the model as an int64 tensor at run time.
``transformers`` turns it into the additive attention bias through ``bool`` ops:
``astype(mask, bool)``, an ``index_tensor`` with constant ``arange`` indices, ``bitwise_and``
with the (constant) causal mask, then ``where(allowed, 0, finfo.min)``; older code casts first
(``(1 - mask.to(float)) * finfo.min`` after an int64 ``expand_dims``). The NPU has no ``bool``
datapath and moves no int64 data outside an embedding, so here:

* a ``bool`` value computed at run time becomes a float32 tensor of 0.0 / 1.0:
  ``astype(x, bool)`` of an integer ``x`` is ``minimum(abs(float(x)), 1)`` (the float of a
  non-zero integer is at least 1 in magnitude), ``and`` / ``or`` / ``not`` / ``xor`` are
  ``multiply`` / ``maximum`` / ``1 - f`` / ``abs(f - g)``, data movement is the same op on the
  floats and constants are their 0.0 / 1.0;
* ``where(c, a, b)`` of such a ``c`` and float32 constants ``a``, ``b`` (no NaN, no -0.0;
  tensors finite, scalars may be infinite) is ``term(a, f) + term(b, 1 - f)`` with
  ``term(x, w) = w * x``, or ``(w * ±FLT_MAX) * 2`` for an infinite scalar (±inf for w = 1,
  ±0 for w = 0, never inf * 0); every product has a factor 0 or 1 and one of the two terms is a
  zero, so the sum is exactly the selected value. ``astype(c, float32)`` is ``f`` itself;
* an integer value cast to float32 after data movement is cast first:
  ``astype(expand_dims(x), float32)`` is ``expand_dims(astype(x, float32))``;
* ``index_tensor`` / ``gather_nd`` with constant in-range indices (what
  ``mask[batch_idx, kv_idx]`` exports to through torch.export / ONNX) is a ``take`` of constant
  rows of the flattened indexed axes, any dtype;
* ``where(c, x, y)`` of a constant ``bool`` mask ``c`` (GPT-Neo's causal mask) and float32 ``x``,
  ``y`` is ``where(greater(float(c), 0.5), x, y)`` (:func:`constant_conditions_as_comparisons`,
  after every fold): the NPU's select reads its condition as a 0.0 / 1.0 comparison result.

Every rewrite computes exactly what TVM's build of the original computes; a chain with any
other op (a comparison of floats, a ``bool`` model input) is left as it is.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import Constant
from tvm.relax.expr_functor import PyExprMutator, mutator

from ..relax_types import call_op_name, dtype_of, is_integer_dtype, static_shape
from .chain_rewriter import ChainRewriter

# Ops that only move or copy elements: the same op on another dtype moves the same elements.
_MOVEMENT = frozenset(
    {
        "relax.reshape",
        "relax.expand_dims",
        "relax.squeeze",
        "relax.flatten",
        "relax.permute_dims",
        "relax.broadcast_to",
        "relax.strided_slice",
        "relax.take",
    }
)
_AND = frozenset({"relax.logical_and", "relax.bitwise_and"})
_OR = frozenset({"relax.logical_or", "relax.bitwise_or"})
_XOR = frozenset({"relax.logical_xor", "relax.bitwise_xor"})
_NOT = frozenset({"relax.logical_not", "relax.bitwise_not"})

_FLT_MAX = float(np.finfo(np.float32).max)


def gather_as_take(call: relax.Call) -> relax.Expr | None:
    """``index_tensor(x, (i0, .., ik))`` or ``gather_nd(x, i)`` (``batch_dims`` 0; the last axis
    of ``i`` holds the k coordinates) with constant in-range indices, as ``take`` of the
    flattened first k axes at the raveled indices (None otherwise)."""
    data = call.args[0]
    shape = static_shape(data.ty)
    if isinstance(data, Constant) or shape is None:
        return None  # a constant one is folded
    arrays = _coordinates(call)
    if arrays is None or not arrays or len(arrays) > len(shape):
        return None
    k = len(arrays)
    if any(((a < 0) | (a >= n)).any() for a, n in zip(arrays, shape[:k], strict=True)):
        return None  # out of range; negative ones are left to TVM's own rule
    try:
        flat = np.ravel_multi_index(np.broadcast_arrays(*arrays), shape[:k])
    except ValueError:
        return None
    rows = relax.op.reshape(data, [int(np.prod(shape[:k], dtype=np.int64)), *shape[k:]])
    return relax.op.take(rows, relax.const(flat.astype("int64")), axis=0)


def _coordinates(call: relax.Call) -> list[np.ndarray] | None:
    """The constant index arrays of one indexed axis each, or None."""
    indices = call.args[1]
    if call_op_name(call) == "relax.gather_nd":
        if int(call.attrs.batch_dims) != 0 or not isinstance(indices, Constant):
            return None
        fields = [indices]
    elif isinstance(indices, relax.Tuple):
        fields = list(indices.fields)
    else:
        return None
    if not all(isinstance(i, Constant) and is_integer_dtype(dtype_of(i)) for i in fields):
        return None
    arrays = [i.value.numpy().astype("int64") for i in fields]
    if call_op_name(call) == "relax.gather_nd":
        if arrays[0].ndim == 0:
            return None
        arrays = [arrays[0][..., axis] for axis in range(arrays[0].shape[-1])]
    return arrays


class MaskRewriter(ChainRewriter):
    """Float forms of run-time ``bool`` / integer values, emitted next to the originals."""

    def __init__(
        self,
        emit: Callable[[relax.Expr], relax.Expr],
        bound: Callable[[relax.Expr], relax.Expr | None],
    ) -> None:
        super().__init__(emit, bound)
        self.floats: dict[relax.Expr, relax.Expr | None] = {}

    def rewrite(self, call: relax.Call) -> relax.Expr | None:
        """The float form of an ``astype(.., float32)`` or a constant-operand ``where`` of a
        run-time ``bool`` / integer value, or None when ``call`` is neither."""
        name = call_op_name(call)
        if dtype_of(call) != "float32" or isinstance(call.args[0], Constant):
            return None
        if name == "relax.astype":
            source = call.args[0]
            if dtype_of(source) == "bool" or self._moved(source):
                return self.float_of(source)
            return None
        if name == "relax.where" and dtype_of(call.args[0]) == "bool":
            return self._select(call)
        return None

    def _moved(self, expr: relax.Expr) -> bool:
        """An integer value that data movement produced (cast first, then move)."""
        return is_integer_dtype(dtype_of(expr)) and call_op_name(self.value_of(expr)) in _MOVEMENT

    def float_of(self, expr: relax.Expr) -> relax.Expr | None:
        """float32 of an integer value, 0.0 / 1.0 of a bool one; None if not expressible."""
        if expr not in self.floats:
            self.floats[expr] = self._float_of(expr)
        return self.floats[expr]

    def _float_of(self, expr: relax.Expr) -> relax.Expr | None:
        dtype = dtype_of(expr)
        if isinstance(expr, Constant) and (dtype == "bool" or is_integer_dtype(dtype)):
            return relax.const(expr.value.numpy().astype("float32"))
        value = self.value_of(expr)
        name = call_op_name(value)
        if name in _MOVEMENT and dtype_of(value.args[0]) == dtype:
            moved = self.float_of(value.args[0])
            if moved is None:
                return None
            return self.emit(relax.Call(value.op, [moved, *value.args[1:]], value.attrs))
        if is_integer_dtype(dtype):
            return self.emit(relax.op.astype(expr, "float32"))
        if dtype != "bool" or not isinstance(value, relax.Call):
            return None
        return self._bool_op(value)

    def _bool_op(self, call: relax.Call) -> relax.Expr | None:
        name = call_op_name(call)
        if name == "relax.astype":
            if not is_integer_dtype(dtype_of(call.args[0])):
                return None  # float -> bool: NaN is true, not expressible this way
            number = self.float_of(call.args[0])
            return None if number is None else self._truth(number)
        operands = [self.float_of(arg) for arg in call.args]
        if any(f is None for f in operands):
            return None
        op = relax.op
        if name in _AND:
            return self.emit(op.multiply(*operands))
        if name in _OR:
            return self.emit(op.maximum(*operands))
        if name in _XOR:
            return self.emit(op.abs(self.emit(op.subtract(*operands))))
        if name in _NOT:
            return self.emit(op.subtract(relax.const(1.0), operands[0]))
        return None

    def _truth(self, number: relax.Expr) -> relax.Expr:
        """1.0 where the float of an integer is non-zero, else 0.0."""
        return self.emit(relax.op.minimum(self.emit(relax.op.abs(number)), relax.const(1.0)))

    def _select(self, where: relax.Call) -> relax.Expr | None:
        condition, picked, other = where.args
        if not all(isinstance(v, Constant) and dtype_of(v) == "float32" for v in (picked, other)):
            return None
        if _term_factors(picked) is None or _term_factors(other) is None:
            return None
        kept = self.float_of(condition)
        if kept is None:
            return None
        dropped = self.emit(relax.op.subtract(relax.const(1.0), kept))
        return relax.op.add(self._term(picked, kept), self._term(other, dropped))

    def _term(self, value: Constant, weight: relax.Expr) -> relax.Expr:
        factor, double = _term_factors(value)
        product = self.emit(relax.op.multiply(weight, relax.const(factor)))
        return self.emit(relax.op.multiply(product, relax.const(2.0))) if double else product


def _term_factors(value: Constant) -> tuple[np.ndarray, bool] | None:
    """(factor, doubled) with ``weight * factor [* 2]`` equal to ``value`` for weight 1 and a
    zero for weight 0; None for NaN, -0.0, or infinities in a tensor."""
    array = value.value.numpy()
    if np.isnan(array).any() or (np.signbit(array) & (array == 0)).any():
        return None
    if np.isfinite(array).all():
        return array, False
    if array.size != 1:
        return None
    return np.full(array.shape, np.copysign(_FLT_MAX, array), "float32"), True


@mutator
class _ConstantConditions(PyExprMutator):
    def visit_call_(self, call: relax.Call) -> relax.Expr:  # noqa: D102 (visitor protocol)
        call = super().visit_call_(call)
        if call_op_name(call) != "relax.where" or not isinstance(call.args[0], Constant):
            return call
        if dtype_of(call.args[0]) != "bool" or any(
            dtype_of(value) != "float32" for value in call.args[1:]
        ):
            return call
        mask = relax.const(call.args[0].value.numpy().astype("float32"))
        condition = self.builder_.emit(relax.op.greater(mask, relax.const(0.5, "float32")))
        return self.builder_.normalize(relax.op.where(condition, *call.args[1:]))


def constant_conditions_as_comparisons(mod: tvm.IRModule) -> tvm.IRModule:
    """``main`` with every float32 ``where`` of a constant ``bool`` condition selecting on
    ``float(c) > 0.5`` instead (the same elements; no constant fold may run after it)."""
    mod = mod.clone() if hasattr(mod, "clone") else tvm.IRModule(mod.functions, attrs=mod.attrs)
    main = _ConstantConditions(mod).visit_expr(mod["main"])
    mod[mod.get_global_var("main")] = main
    return relax.transform.Normalize()(mod)
