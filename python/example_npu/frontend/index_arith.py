"""Run-time integer index arithmetic as exact float32 arithmetic the NPU runs.

RoBERTa-style models (RoBERTa, XLM-R, CamemBERT, Longformer, ...) compute their position ids
from the token ids at run time: ``mask = ids != pad``, ``cumsum(mask) * mask + pad``, then
gather position embeddings with them. That is integer arithmetic, which the NPU has no
datapath for; but every value in it is a small whole number, and float32 represents every whole
number up to 2**24 exactly, so the same arithmetic in float32 gives the same numbers. Here
``astype(x, int32 | int64)`` of such an ``x`` becomes ``astype(f, ..)`` of its float32 form
``f``, built along ``x``'s chain of bindings with an interval for every value:

* a comparison of an integer tensor with a constant smaller than 2**24 in magnitude (any
  tensor: float32 rounds a larger integer to a value at least 2**24 in magnitude, so the
  comparison keeps its answer), or of two values with float forms, is
  ``where(compare(float(a), float(b)), 1.0, 0.0)``: interval [0, 1];
* ``logical_not`` of such a 0 / 1 value is ``1 - f``; casts between integer types and from
  ``bool`` keep the float form when the interval fits the target type;
* ``add`` / ``subtract`` / ``multiply`` of forms or integer constants: the op on the floats;
* ``cumsum`` along an axis of n <= 1024 elements is a matmul with the constant n x n triangle
  of ones (axis moved last and back): every product is an element or zero and every partial
  sum lies in the interval [n * min(lo, 0), n * max(hi, 0)], so the sums are exact;
* data movement is the same op on the floats.

Every interval must stay within [-2**24, 2**24]; a chain with any other op, or a value that
might leave it, is left as it is (and runs on the CPU). The casts back to int32 / int64
truncate whole numbers, which changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from tvm import relax
from tvm.ir.expr import Constant

from ..relax_types import call_op_name, dtype_of, is_integer_dtype, static_shape
from .chain_rewriter import ChainRewriter

_EXACT = 2**24  # every whole number up to this magnitude is a float32
_MAX_CUMSUM = 1024  # longest cumsum axis made a matmul: its triangle is n * n floats

_COMPARE = {
    "relax.equal": relax.op.equal,
    "relax.not_equal": relax.op.not_equal,
    "relax.less": relax.op.less,
    "relax.less_equal": relax.op.less_equal,
    "relax.greater": relax.op.greater,
    "relax.greater_equal": relax.op.greater_equal,
}
_ARITHMETIC = {
    "relax.add": relax.op.add,
    "relax.subtract": relax.op.subtract,
    "relax.multiply": relax.op.multiply,
}
_MOVEMENT = frozenset(
    {
        "relax.reshape",
        "relax.expand_dims",
        "relax.squeeze",
        "relax.permute_dims",
        "relax.broadcast_to",
        "relax.strided_slice",
    }
)
_INDEX_TYPES = ("int32", "int64")


@dataclass(frozen=True)
class FloatForm:
    """A float32 expression equal to an integer value, whose elements lie in [lo, hi]."""

    expr: relax.Expr
    lo: int
    hi: int


def _magnitude(values: np.ndarray) -> float:
    """The largest magnitude of integer values (through float64: no int64 wrap-around)."""
    return float(np.abs(values.astype("float64")).max(initial=0.0))


def _fits(dtype: str, lo: int, hi: int) -> bool:
    """Whether [lo, hi] is within float32's whole numbers and the integer ``dtype``."""
    if dtype == "bool":
        return 0 <= lo and hi <= 1
    try:
        info = np.iinfo(dtype)
    except (TypeError, ValueError):
        return False  # a dtype numpy does not know (int4, ...): left as it is
    return -_EXACT <= lo and hi <= _EXACT and info.min <= lo and hi <= info.max


class IndexArithmetic(ChainRewriter):
    """Float forms of run-time integer arithmetic that ends in a cast to int32 / int64."""

    def __init__(
        self,
        emit: Callable[[relax.Expr], relax.Expr],
        bound: Callable[[relax.Expr], relax.Expr | None],
    ) -> None:
        super().__init__(emit, bound)
        self.forms: dict[relax.Expr, FloatForm | None] = {}
        # Float forms already cast back by an earlier rewrite, by the float expression: a later
        # chain through that cast reads the float again.
        self.cast_back: dict[relax.Expr, FloatForm] = {}

    def rewrite(self, call: relax.Call) -> relax.Expr | None:
        """``astype(f, dtype)`` for an int32 / int64 ``call`` computing integers (arithmetic,
        ``cumsum``, a cast of computed integers) with float form ``f``, or None."""
        name = call_op_name(call)
        if dtype_of(call) not in _INDEX_TYPES:
            return None
        if name == "relax.astype":
            source = call.args[0]
            if isinstance(source, Constant) or not is_integer_dtype(dtype_of(source)):
                return None
            if not isinstance(self.bound(source), relax.Call):
                return None  # a model input: unbounded, and nothing computed to move
        elif name not in _ARITHMETIC and name != "relax.cumsum":
            return None
        elif all(isinstance(arg, Constant) for arg in call.args):
            return None  # folded
        form = self.form(call)
        if form is None:
            return None
        self.cast_back[form.expr] = form
        return relax.op.astype(form.expr, dtype_of(call))

    def decide(self, call: relax.Call) -> Constant | None:
        """A comparison of values with float forms whose intervals decide it for every element
        (the ONNX importer's ``ids < 0`` fix-up of computed position ids): that constant."""
        name = call_op_name(call)
        shape = static_shape(call.ty)
        if name not in _COMPARE or shape is None:
            return None
        a, b = (self.form(arg) for arg in call.args)
        if a is None or b is None:
            return None
        if name in ("relax.greater", "relax.greater_equal"):
            a, b = b, a
            name = name.replace("greater", "less")
        if name == "relax.less":
            answer = True if a.hi < b.lo else False if a.lo >= b.hi else None
        elif name == "relax.less_equal":
            answer = True if a.hi <= b.lo else False if a.lo > b.hi else None
        else:
            disjoint, same = a.hi < b.lo or b.hi < a.lo, a.lo == a.hi == b.lo == b.hi
            equal = False if disjoint else True if same else None
            answer = None if equal is None else equal == (name == "relax.equal")
        return None if answer is None else relax.const(np.full(shape, answer), "bool")

    def form(self, expr: relax.Expr) -> FloatForm | None:
        """The float form of an integer or bool value, or None."""
        if expr not in self.forms:
            self.forms[expr] = self._form(expr)
        return self.forms[expr]

    def _form(self, expr: relax.Expr) -> FloatForm | None:
        dtype = dtype_of(expr)
        if dtype != "bool" and not is_integer_dtype(dtype):
            return None
        if isinstance(expr, Constant):
            values = expr.value.numpy()
            if values.size == 0 or _magnitude(values) > _EXACT:
                return None
            values = values.astype("int64")
            return FloatForm(
                relax.const(values.astype("float32")), int(values.min()), int(values.max())
            )
        value = self.value_of(expr)
        if not isinstance(value, relax.Call):
            return None
        form = self._op_form(value)
        if form is None or not _fits(dtype, form.lo, form.hi):
            return None
        return form

    def _op_form(self, call: relax.Call) -> FloatForm | None:
        name = call_op_name(call)
        if name in _COMPARE:
            return self._compare(call)
        if name == "relax.logical_not":
            operand = self.form(call.args[0])
            if operand is None or (operand.lo, operand.hi) != (0, 1):
                return None
            return FloatForm(self.emit(relax.op.subtract(relax.const(1.0), operand.expr)), 0, 1)
        if name == "relax.astype":
            source = call.args[0]
            if source in self.cast_back:
                return self.cast_back[source]
            return self.form(source)  # the caller checks the interval fits
        if name in _ARITHMETIC:
            return self._arithmetic(call)
        if name == "relax.cumsum":
            return self._cumsum(call)
        if name in _MOVEMENT:
            moved = self.form(call.args[0])
            if moved is None:
                return None
            expr = self.emit(relax.Call(call.op, [moved.expr, *call.args[1:]], call.attrs))
            return FloatForm(expr, moved.lo, moved.hi)
        return None

    def _compare(self, call: relax.Call) -> FloatForm | None:
        a, b = call.args
        forms = [self._comparable(a, b), self._comparable(b, a)]
        if forms[0] is None or forms[1] is None:
            return None
        mask = self.emit(_COMPARE[call_op_name(call)](*forms))
        return FloatForm(self.emit(relax.op.where(mask, relax.const(1.0), relax.const(0.0))), 0, 1)

    def _comparable(self, operand: relax.Expr, other: relax.Expr) -> relax.Expr | None:
        """float32 of ``operand`` in a comparison with ``other``: its float form, or its plain
        float conversion when ``other`` is a constant below 2**24 (the order is kept)."""
        form = self.form(operand)
        if form is not None:
            return form.expr
        if not is_integer_dtype(dtype_of(operand)) or not isinstance(other, Constant):
            return None
        # Strictly below 2**24: 2**24 + 1 rounds to 2**24 itself.
        if _magnitude(other.value.numpy()) >= _EXACT:
            return None
        return self.emit(relax.op.astype(operand, "float32"))

    def _arithmetic(self, call: relax.Call) -> FloatForm | None:
        a, b = (self.form(arg) for arg in call.args)
        if a is None or b is None:
            return None
        name = call_op_name(call)
        if name == "relax.add":
            lo, hi = a.lo + b.lo, a.hi + b.hi
        elif name == "relax.subtract":
            lo, hi = a.lo - b.hi, a.hi - b.lo
        else:
            products = [x * y for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
            lo, hi = min(products), max(products)
        if not -_EXACT <= lo <= hi <= _EXACT:
            return None
        return FloatForm(self.emit(_ARITHMETIC[name](a.expr, b.expr)), lo, hi)

    def _cumsum(self, call: relax.Call) -> FloatForm | None:
        shape = static_shape(call.args[0].ty)
        if call.attrs.axis is None or shape is None or not shape:
            return None
        axis = int(call.attrs.axis) % len(shape)
        n = shape[axis]
        operand = self.form(call.args[0])
        if operand is None or not 0 < n <= _MAX_CUMSUM:
            return None
        lo, hi = n * min(operand.lo, 0), n * max(operand.hi, 0)
        if not -_EXACT <= lo <= hi <= _EXACT:
            return None
        # triangle[i, j] = 1 where input i counts towards output j.
        exclusive = bool(call.attrs.exclusive) if call.attrs.exclusive is not None else False
        triangle = np.triu(np.ones((n, n), "float32"), k=1 if exclusive else 0)
        last = len(shape) - 1
        order = [d for d in range(len(shape)) if d != axis] + [axis]
        x = operand.expr if axis == last else self.emit(relax.op.permute_dims(operand.expr, order))
        summed = self.emit(relax.op.matmul(x, relax.const(triangle)))
        if axis != last:
            summed = self.emit(relax.op.permute_dims(summed, list(np.argsort(order))))
        return FloatForm(summed, lo, hi)
