"""Constant folding for the NPU: what a model computes from constants alone is computed once.

Transformer exporters compute masks, position ids, bias gathers and rotary tables from
constants (``arange``, ``full``, buffers) at a fixed sequence length. Left in the graph, each of
those ops runs on the CPU and cuts the NPU region in two. Here every call whose arguments are
all constants is replaced by its value, computed by TVM itself (``FoldConstant``, or TVM's CPU
build for calls FoldConstant leaves, such as ``arange``), so the folded module computes bit for
bit what TVM's build of the original computes. Limits:

* results of more than :data:`FOLD_MAX_ELEMENTS` elements stay as calls (they would bloat the
  module; nothing in a transformer's masks comes near it), unless no larger than a constant
  operand already in the module (a weight norm's ``v * v`` on the way to its small norm, and
  the normalized weight itself, replace the weight they are computed from);
* ``quantize`` / ``dequantize`` stay (their constant operands are what the quantized patterns
  match) and so does a 2-D ``permute_dims`` of a float constant (a Linear weight's transpose
  is part of the dense pattern).

TVM's LLVM code generator cannot compile arithmetic on ``bool`` (``cumsum``, ``cumprod``,
``add``, ``multiply``: ``Check failed: (t.MatchesCode(kDLFloat))`` in ``CreateAdd``; ``max`` /
``min``: no identity element for ``bool``; comparisons: a float compare of ``i1`` values), yet
its PyTorch importer emits a ``bool`` ``cumsum`` in the causal masks of decoder-only models.
:func:`legalize_bool_arithmetic` rewrites such a call into the same op on ``int32`` followed by
``astype(bool)`` (non-zero is true): the saturating boolean sum / product / extremum the call's
``bool`` type declares, which TVM computes the same way for the ``bool`` ``sum`` it can build
(comparisons need no cast back). Run-time ones then build; constant ones fold.

Identities that would split an NPU region without computing anything are removed:
``nn.pad`` with zero widths, ``astype`` to the same dtype, ``reshape`` to the same shape,
``permute_dims`` that keeps the axis order, and ``where`` whose constant condition is all true
(or all false) and whose selected operand already has the result's shape and dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm import relax
from tvm.ir.expr import Constant

from ..relax_types import static_shape

# Largest folded result (elements): 4 Mi, 16 MiB of float32.
FOLD_MAX_ELEMENTS = 1 << 22
# Ops whose constant operands are the contract with a pattern (the quantized chains).
_NEVER_FOLD = frozenset({"relax.quantize", "relax.dequantize"})
# Ops whose bool form TVM's LLVM build rejects; on int32 they are what the bool type declares.
_BOOL_ARITHMETIC = frozenset(
    {"relax.cumsum", "relax.cumprod", "relax.add", "relax.multiply", "relax.max", "relax.min"}
)
# Comparisons of bool tensors: TVM's LLVM build emits a float compare of i1 values (fcmp).
_BOOL_COMPARISONS = frozenset(
    {
        "relax.equal",
        "relax.not_equal",
        "relax.less",
        "relax.less_equal",
        "relax.greater",
        "relax.greater_equal",
    }
)


def _is_bool(expr: relax.Expr) -> bool:
    return isinstance(expr.ty, relax.TensorType) and str(expr.ty.dtype) == "bool"


def legalize_bool_arithmetic(call: relax.Call) -> relax.Expr | None:
    """``op`` on bool tensors as ``astype(op(astype(x, int32)), bool)`` (a comparison without
    the final cast); None if ``call`` is not such a call."""
    name = call.op.name
    if name not in _BOOL_ARITHMETIC | _BOOL_COMPARISONS or not _is_bool(call):
        return None
    tensors = [arg for arg in call.args if isinstance(arg.ty, relax.TensorType)]
    if not tensors or not all(_is_bool(arg) for arg in tensors):
        return None
    if call.op.name in ("relax.cumsum", "relax.cumprod") and call.attrs.dtype is not None:
        if str(call.attrs.dtype) not in ("bool", ""):
            return None  # an explicit accumulation dtype is already not bool
    args = [
        relax.op.astype(arg, "int32") if isinstance(arg.ty, relax.TensorType) else arg
        for arg in call.args
    ]
    attrs = call.attrs
    if call.op.name in ("relax.cumsum", "relax.cumprod"):
        scan = getattr(relax.op, call.op.name.removeprefix("relax."))
        integer = scan(args[0], axis=attrs.axis, dtype="int32", exclusive=attrs.exclusive)
    elif call.op.name in ("relax.max", "relax.min"):
        reduce = getattr(relax.op, call.op.name.removeprefix("relax."))
        integer = reduce(args[0], axis=attrs.axis, keepdims=attrs.keepdims)
    else:
        integer = relax.Call(call.op, args, attrs)
    return integer if name in _BOOL_COMPARISONS else relax.op.astype(integer, "bool")


def _all_constant(call: relax.Call) -> bool:
    def constant(expr: relax.Expr) -> bool:
        if isinstance(expr, Constant):
            return True
        if isinstance(expr, relax.ShapeExpr):
            return all(isinstance(value, tvm.tirx.IntImm) for value in expr.values)
        if isinstance(expr, relax.Tuple):  # concat's operands, strided_slice's bounds
            return all(constant(field) for field in expr.fields)
        return not isinstance(expr, (relax.Var, relax.Call))  # attributes, prim values

    return all(constant(arg) for arg in call.args)


def foldable(call: relax.Call) -> bool:
    """All arguments constant, a result of known size within the limit, not a kept op."""
    name = call.op.name
    if name in _NEVER_FOLD or not _all_constant(call):
        return False
    if not isinstance(call.ty, relax.TensorType):
        return False
    shape = static_shape(call.ty)
    if shape is None or int(np.prod(shape)) > max(FOLD_MAX_ELEMENTS, _largest_operand(call)):
        return False
    return not _is_weight_transpose(call)


def _largest_operand(call: relax.Call) -> int:
    """Elements of the call's largest tensor constant operand (0 when it has none)."""
    shapes = [static_shape(arg.ty) for arg in call.args if isinstance(arg, Constant)]
    sizes = [int(np.prod(shape)) for shape in shapes if shape is not None]
    return max(sizes, default=0)


def _is_weight_transpose(call: relax.Call) -> bool:
    """A 2-D transpose of a float constant: a Linear weight (the dense pattern's transpose)."""
    dtype = str(call.ty.dtype)
    return (
        call.op.name == "relax.permute_dims"
        and dtype.startswith(("float", "bfloat"))
        and len(static_shape(call.ty)) == 2
    )


# Folded calls by structural hash: models repeat the same constant arithmetic many times.
_FOLDED: dict[int, list[tuple[relax.Call, Constant]]] = {}

# What TVM raises when it cannot build or evaluate a call: the call is then left as it is.
_TVM_FAILURES = (RuntimeError, ValueError, TypeError)


def fold(call: relax.Call) -> Constant | None:
    """The constant TVM computes for ``call`` (all of whose args are constant), or None."""
    key = tvm_ffi.structural_hash(call)
    for seen, value in _FOLDED.get(key, []):
        if tvm_ffi.structural_equal(seen, call):
            return value
    result = evaluate(call)
    if result is not None:
        _FOLDED.setdefault(key, []).append((call, result))
    return result


def evaluate(expr: relax.Expr) -> Constant | None:
    """``expr`` (constants only) by TVM's FoldConstant or, for what it leaves (``arange`` has no
    tensor arguments), by TVM's CPU build; None if TVM cannot."""
    bb = relax.BlockBuilder()
    with bb.function("main", []):
        with bb.dataflow():
            out = bb.emit_output(expr)
        bb.emit_func_output(out)
    mod = bb.get()
    try:
        body = relax.transform.FoldConstant()(mod)["main"].body
        result = body.body
        for block in body.blocks:
            for binding in block.bindings:
                if binding.var.same_as(result):
                    result = binding.value
        if isinstance(result, Constant):
            return result
        if static_shape(out.ty) is None:
            return None
        vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
        return relax.const(vm["main"]().numpy(), str(out.ty.dtype))
    except _TVM_FAILURES:
        return None


def _same_type(a: relax.Expr, b: relax.Expr) -> bool:
    shape = static_shape(a.ty)
    return shape is not None and shape == static_shape(b.ty) and str(a.ty.dtype) == str(b.ty.dtype)


def _constant_where(call: relax.Call) -> relax.Expr | None:
    condition = call.args[0]
    if not isinstance(condition, Constant):
        return None
    values = condition.value.numpy()
    if values.all():
        picked = call.args[1]
    elif not values.any():
        picked = call.args[2]
    else:
        return None
    return picked if _same_type(picked, call) else None


def identity_operand(call: relax.Call) -> relax.Expr | None:
    """The operand a call returns unchanged (an identity the exporters leave), or None."""
    name = call.op.name
    if name == "relax.where":
        return _constant_where(call)
    if name not in ("relax.nn.pad", "relax.astype", "relax.reshape", "relax.permute_dims"):
        return None
    data = call.args[0]
    if not _same_type(data, call):
        return None
    if name == "relax.nn.pad":
        widths = [int(w) for w in call.attrs.pad_width]
        return data if not any(widths) else None
    if name == "relax.permute_dims":
        rank = len(static_shape(data.ty))
        # No axes means all of them reversed: an identity only up to rank 1, even when the
        # shape is square (so the types agree).
        axes = list(reversed(range(rank))) if call.attrs.axes is None else call.attrs.axes
        if [int(a) % rank for a in axes] != list(range(rank)):
            return None
    return data


def evaluate_on_grid(
    expr: relax.Expr, source: relax.Var, grid: np.ndarray, lookup: Callable[[Any], Any]
) -> np.ndarray | None:
    """expr, a function of source alone, on each value of grid, by TVM's CPU build of the same
    ops (so the values are bit for bit what TVM's build of the model computes)."""
    # The source's rank (attributes such as dequantize's axis refer to it), its values on the
    # last axis.
    shape = (1,) * (max(1, len(static_shape(source.ty) or ())) - 1) + (grid.size,)
    param = relax.Var("x", relax.TensorType(shape, str(source.ty.dtype)))
    memo: dict[Any, Any] = {}

    def rebuild(node: Any) -> Any:
        if isinstance(node, relax.Var):
            if node.same_as(source):
                return param
            if node not in memo:
                value = lookup(node)
                memo[node] = None if value is None else rebuild(value)
            return memo[node]
        if isinstance(node, relax.Call):
            args = [rebuild(arg) for arg in node.args]
            if any(arg is None for arg in args):
                return None
            return relax.Call(node.op, args, node.attrs, node.ty_args)
        return node  # constants, prim values, shapes

    rebuilt = rebuild(expr)
    if rebuilt is None:
        return None
    bb = relax.BlockBuilder()
    with bb.function("main", [param]):
        with bb.dataflow():
            out = bb.emit_output(rebuilt)
        bb.emit_func_output(out)
    try:
        vm = relax.VirtualMachine(tvm.compile(bb.get(), target="llvm"), tvm.cpu())
        grid = grid.astype(str(source.ty.dtype)).reshape(shape)
        values = vm["main"](tvm.runtime.tensor(grid)).numpy()
    except (RuntimeError, ValueError, TypeError):
        return None
    return values.reshape(-1) if values.size == grid.size and values.dtype == np.float32 else None
