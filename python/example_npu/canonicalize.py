"""Canonicalization before partitioning: frontend idioms become the Relax ops the patterns match.

Every rewrite here is exact: the rewritten ``main`` computes bit for bit what TVM's CPU build of
the original computes, including NaN and infinities.

* ``call_tir`` of a PrimFunc that is structurally equal (``tvm_ffi.structural_equal``) to TVM's own
  legalization of ``relax.maximum`` / ``relax.minimum`` for the same argument types becomes that
  op. This is how the ONNX importer lowers ``Clip`` (``topi.maximum`` then ``topi.minimum``).
  The pair is *not* turned into ``relax.clip``: TVM's ``clip`` maps NaN to the upper bound, the
  ONNX lowering ``min(max(x, lo), hi)`` to the lower bound, so they are equal only on non-NaN
  inputs. The NPU runs maximum / minimum with TVM's NaN behaviour instead.
* ``shape_of`` of a tensor with a static shape becomes that shape, and calls whose arguments are
  all constants and whose result is a scalar, or an integer / boolean tensor of at most
  :data:`FOLD_MAX_ELEMENTS` elements, are evaluated with TVM (``FoldConstant`` on that one
  call): the ONNX importer's index arithmetic (``where(less(i, 0), i + n, i)``) and ``Clip``
  bounds (``where(isnan(c), -inf, c)``). Float tensors (weights) are left as they are.
  ``quantize`` / ``dequantize`` are never folded: they are what the quantized patterns match.
* ``broadcast_to`` onto the operand's own shape is the operand itself.
* Bindings nobody reads (``zeros_like`` left behind by ``torch.export``) are removed.

Then, on the result, the QDQ rewrites of :func:`example_npu.qdq_canonical.canonicalize_qdq`
(own dequantize per consumer, quantize above shape ops, elementwise islands as tables, long
concatenations nested). They come second because they read the ops the first stage produces
(an ONNX ``Clip`` between dequantize and quantize is a ``maximum`` / ``minimum`` only then).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import tvm
import tvm_ffi
from tvm import relax
from tvm.ir.expr import Constant
from tvm.relax.expr_functor import PyExprMutator, mutator

from .checks import static_shape
from .qdq_canonical import canonicalize_qdq

FOLD_MAX_ELEMENTS = 64
# Ops whose constant operands are the contract with a pattern (the quantized chains).
_NEVER_FOLD = frozenset({"relax.quantize", "relax.dequantize"})
_ELEMENTWISE_PRIMFUNCS = ("maximum", "minimum")


@lru_cache(maxsize=256)
def _legalized(op_name: str, arg_types: tuple[tuple[tuple[int, ...], str], ...]):
    """TVM's legalization of ``relax.<op_name>`` applied to tensors of ``arg_types``."""
    params = [
        relax.Var(f"a{i}", relax.TensorType(shape, dtype))
        for i, (shape, dtype) in enumerate(arg_types)
    ]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(getattr(relax.op, op_name)(*params))
        bb.emit_func_output(out)
    legal = relax.transform.LegalizeOps()(bb.get())
    funcs = [func for gv, func in legal.functions.items() if gv.name_hint != "main"]
    return funcs[0] if len(funcs) == 1 else None


def _constant_or_shape(expr: relax.Expr) -> bool:
    if isinstance(expr, Constant):
        return True
    if isinstance(expr, relax.ShapeExpr):
        return all(isinstance(value, tvm.tirx.IntImm) for value in expr.values)
    return not isinstance(expr, (relax.Var, relax.Call, relax.Tuple))  # attributes, prim values


def _is_index_arithmetic(call: relax.Call) -> bool:
    """A small scalar or integer / boolean result: bounds and index computations, not weights
    (a transposed weight stays a permute_dims the patterns see)."""
    shape = static_shape(call.ty)
    if shape is None or int(np.prod(shape)) > FOLD_MAX_ELEMENTS:
        return False
    dtype = str(call.ty.dtype)
    return len(shape) == 0 or dtype == "bool" or dtype.startswith(("int", "uint"))


# Folded calls by structural hash: models repeat the same constant arithmetic many times.
_FOLDED: dict[int, list[tuple[relax.Call, Constant]]] = {}


def _fold(call: relax.Call) -> Constant | None:
    """The constant TVM's FoldConstant computes for ``call`` (all of whose args are constant)."""
    key = tvm_ffi.structural_hash(call)
    for seen, value in _FOLDED.get(key, []):
        if tvm_ffi.structural_equal(seen, call):
            return value
    bb = relax.BlockBuilder()
    with bb.function("main", []):
        with bb.dataflow():
            out = bb.emit_output(call)
        bb.emit_func_output(out)
    body = relax.transform.FoldConstant()(bb.get())["main"].body
    result = body.body
    for block in body.blocks:
        for binding in block.bindings:
            if binding.var.same_as(result):
                result = binding.value
    if not isinstance(result, Constant):
        return None
    _FOLDED.setdefault(key, []).append((call, result))
    return result


@mutator
class _Canonicalizer(PyExprMutator):
    def __init__(self, mod: tvm.IRModule) -> None:
        super().__init__(mod)
        self.mod = mod
        # Variables bound to constants (or static shapes): their uses see the value, so folds
        # chain within one pass (isnan(c) -> where(...) -> maximum(x, bound)).
        self.known: dict[relax.Var, relax.Expr] = {}

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:  # noqa: D102
        value = self.visit_expr(binding.value)
        if isinstance(value, (Constant, relax.ShapeExpr)):
            self.known[binding.var] = value
        self.builder_.emit_normalized(relax.VarBinding(binding.var, value))

    def visit_var_(self, var: relax.Var) -> relax.Expr:  # noqa: D102
        return self.known.get(var, var)

    def visit_dataflow_var_(self, var: relax.DataflowVar) -> relax.Expr:  # noqa: D102
        return self.known.get(var, var)

    def visit_call_(self, call: relax.Call) -> relax.Expr:  # noqa: D102 (visitor protocol)
        call = super().visit_call_(call)
        if not isinstance(call.op, tvm.ir.Op):
            return call
        name = call.op.name
        if name == "relax.call_tir":
            return self._elementwise_call_tir(call)
        if name == "relax.shape_of":
            shape = static_shape(call.args[0].ty)
            return relax.ShapeExpr(shape) if shape is not None else call
        if name == "relax.broadcast_to":
            if static_shape(call.args[0].ty) == static_shape(call.ty) is not None:
                return call.args[0]
        if name not in _NEVER_FOLD and all(_constant_or_shape(arg) for arg in call.args):
            if _is_index_arithmetic(call):
                folded = _fold(call)
                if folded is not None:
                    return folded
        return call

    def _elementwise_call_tir(self, call: relax.Call) -> relax.Expr:
        callee, args = call.args[0], call.args[1]
        prim_func = self.mod.functions.get(callee) if isinstance(callee, tvm.ir.GlobalVar) else None
        if not isinstance(args, relax.Tuple) or not isinstance(prim_func, tvm.tirx.PrimFunc):
            return call
        arg_types = []
        for arg in args.fields:
            shape = static_shape(arg.ty)
            if shape is None:
                return call
            arg_types.append((tuple(shape), str(arg.ty.dtype)))
        for op_name in _ELEMENTWISE_PRIMFUNCS:
            reference = _legalized(op_name, tuple(arg_types))
            if reference is None:
                continue
            if tvm_ffi.structural_equal(prim_func, reference, map_free_vars=True):
                replaced = self.builder_.normalize(getattr(relax.op, op_name)(*args.fields))
                if static_shape(replaced.ty) == static_shape(call.ty):
                    return replaced
        return call


def canonicalize(mod: tvm.IRModule) -> tvm.IRModule:
    """Returns ``mod`` with ``main`` canonicalized (see the module docstring)."""
    mod = relax.transform.Normalize()(mod)
    main = _Canonicalizer(mod).visit_expr(mod["main"])
    mod = mod.clone() if hasattr(mod, "clone") else tvm.IRModule(mod.functions, attrs=mod.attrs)
    mod[mod.get_global_var("main")] = main
    mod = relax.transform.Normalize()(mod)
    # canonicalize_qdq starts with CanonicalizeBindings and ends with dead-code elimination.
    return canonicalize_qdq(mod)
