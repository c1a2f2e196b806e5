"""Canonicalization before partitioning: frontend idioms become the Relax ops the patterns match.

Every rewrite here is exact: the rewritten ``main`` computes bit for bit what TVM's CPU build of
the original computes, including NaN and infinities.

* ``call_tir`` of a PrimFunc that is structurally equal (``tvm_ffi.structural_equal``) to TVM's own
  legalization of ``relax.maximum`` / ``relax.minimum`` for the same argument types becomes that
  op. This is how the ONNX importer lowers ``Clip`` (``topi.maximum`` then ``topi.minimum``).
  A ``call_tir`` equal to TVM's legalization of a zero-width ``nn.pad`` (the ONNX importer's
  ``Pad`` to whole windows in Swin) is its input. Its reflect / edge / wrap ``Pad``
  (``topi.nn.mirror_pad`` / ``replicate_pad`` / ``circular_pad``) is that ``nn.pad``
  (:mod:`.tir_pad`).
  The pair is *not* turned into ``relax.clip``: TVM's ``clip`` maps NaN to the upper bound, the
  ONNX lowering ``min(max(x, lo), hi)`` to the lower bound, so they are equal only on non-NaN
  inputs. The NPU runs maximum / minimum with TVM's NaN behaviour instead.
* ``shape_of`` of a tensor with a static shape becomes that shape, and calls whose arguments are
  all constants are evaluated with TVM (:mod:`example_npu.frontend.constant_fold`: masks,
  position ids, bias gathers, rotary tables, the ONNX importer's index arithmetic, ``Clip``
  bounds), ``bool`` arithmetic TVM cannot build is legalized through ``int32``, and identities
  (zero-width ``pad``, ``where`` with a constant all-true condition, ...) disappear.
  ``isnan`` of a value that cannot be NaN (an integer cast to float, a ``dequantize`` of integers
  with a finite constant scale: the ONNX exporter's softmax guard in a QDQ model) is all false.
* ``dynamic_strided_slice`` whose begin / end / strides are constants (the legacy ONNX
  exporter's ``chunk``: bounds computed from ``Shape``, folded above) becomes the
  ``strided_slice`` that picks the same elements, which TVM's own build checks axis by axis
  before the rewrite. Its result, and every value computed from it, gets its static shape back
  (without it TVM cannot even build the module: ``concat`` of unknown shapes).
* ``broadcast_to`` onto the operand's own shape is the operand itself; ``flip`` along a static
  axis is the ``take`` of that axis's indices in reverse order (TFLite's ``REVERSE_V2``,
  ``torch.flip``).
* Run-time attention masks become float arithmetic (:mod:`.masks`): ``bool`` chains from a
  tokenizer's ``attention_mask`` as 0.0 / 1.0 floats, ``where`` of constants as exact products
  and sums, integer casts before data movement, ``index_tensor`` / ``gather_nd`` with constant
  indices as a ``take``; last, after every fold, a constant ``bool`` condition of a float32
  ``where`` is ``float(c) > 0.5``, which the NPU's select reads.
* Run-time integer index arithmetic cast to int32 / int64 (RoBERTa's position ids from the token
  ids: a comparison, ``cumsum``, products and sums) becomes the same arithmetic on exact float32
  whole numbers, cast back at the end (:mod:`.index_arith`). ``gather_elements`` from a constant
  whose elements are all equal (RoBERTa's all-zero token-type buffer) is that value everywhere.
* ``topk`` with k = 1 (torch.export's ``max(dim)``) is ``max`` / ``min`` with ``keepdims`` for
  its values and ``argmax`` / ``argmin`` for its indices: the first extreme element, as TVM's
  sort picks it. The one exception to bit-exactness: on NaN, TVM's sort-based ``topk`` and its
  reductions each pick by their own comparison order (neither propagates NaN like PyTorch).
  A ``squeeze`` of exactly the axis an ``argmax`` / ``argmin`` kept is that reduction without
  ``keepdims`` (the NPU moves no ``int64`` data).
* ``take`` with run-time indices in mode "fast" (what the ONNX, TFLite and PyTorch importers
  emit) takes mode "clip": the same element for every valid index, and a read inside the table
  instead of TVM's read out of bounds (a crash or garbage) for a bad one, whoever runs it.
  Model inputs are untrusted; the NPU's gather raises a ValueError for such an index.
* Bindings nobody reads (``zeros_like`` left behind by ``torch.export``) are removed.

Then TVM's TFLite lowering takes the integer NPU forms (:mod:`.tflite_canonical`: depthwise
weights, weights behind shape ops, fused activation clips, and for TFLite models integer average
pooling). Then, on the result, the QDQ rewrites of :func:`example_npu.frontend.qdq.canonicalize_qdq`
(own dequantize per consumer, quantize above shape ops, elementwise islands as tables, long
concatenations nested). They come second because they read the ops the first stage produces
(an ONNX ``Clip`` between dequantize and quantize is a ``maximum`` / ``minimum`` only then).
Last, the folded int32 weights of ``MatMulInteger`` that hold int8 values are ``astype`` of an
int8 constant (:mod:`.integer_matmul`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import tvm
import tvm_ffi
from tvm import relax
from tvm.ir.expr import Constant
from tvm.relax.expr_functor import PyExprMutator, mutator

from ..relax_types import static_shape
from .constant_fold import fold, foldable, identity_operand, legalize_bool_arithmetic
from .index_arith import IndexArithmetic
from .integer_matmul import int8_integer_weights
from .masks import MaskRewriter, constant_conditions_as_comparisons, gather_as_take
from .qdq import canonicalize_qdq
from .tflite_canonical import canonicalize_tflite
from .tir_pad import pad_of_call_tir

# The module attribute naming the integer arithmetic of its quantized ops, and its values.
ROUNDING_ATTR = "example_npu.rounding"
ROUNDINGS = ("tvm", "tflite")

_ELEMENTWISE_PRIMFUNCS = ("maximum", "minimum")


@lru_cache(maxsize=256)
def _legalized(op_name: str, arg_types: tuple[tuple[tuple[int, ...], str], ...]):
    """TVM's legalization of ``relax.<op_name>`` applied to tensors of ``arg_types``
    (``zero_pad``: ``nn.pad`` with zero widths, the ONNX importer's lowering of such a ``Pad``)."""
    params = [
        relax.Var(f"a{i}", relax.TensorType(shape, dtype))
        for i, (shape, dtype) in enumerate(arg_types)
    ]
    if op_name == "zero_pad":
        call = relax.op.nn.pad(params[0], [0] * (2 * len(arg_types[0][0])))
    else:
        call = getattr(relax.op, op_name)(*params)
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(call)
        bb.emit_func_output(out)
    legal = relax.transform.LegalizeOps()(bb.get())
    funcs = [func for gv, func in legal.functions.items() if gv.name_hint != "main"]
    return funcs[0] if len(funcs) == 1 else None


# What TVM raises when it cannot build a slice: the call is then left as it is.
_TVM_FAILURES = (RuntimeError, ValueError, TypeError)


@lru_cache(maxsize=1024)
def _picked(op_name: str, extent: int, begin: int, end: int, stride: int) -> tuple[int, ...] | None:
    """The indices of ``arange(extent)`` a one-axis slice picks in TVM's CPU build (None if
    TVM cannot build the slice, as with stride 0)."""
    if stride == 0:
        return None
    indices = relax.const(np.arange(extent), "int64")
    try:
        if op_name == "dynamic_strided_slice":
            bounds = [relax.const(np.array([v]), "int64") for v in (begin, end, stride)]
            call = relax.op.dynamic_strided_slice(indices, *bounds)
        else:
            call = relax.op.strided_slice(indices, [0], [begin], [end], [stride])
        bb = relax.BlockBuilder()
        with bb.function("main", []):
            with bb.dataflow():
                out = bb.emit_output(call)
            bb.emit_func_output(out)
        # FoldConstant leaves results of unknown shape alone, so this one is built and run.
        vm = relax.VirtualMachine(tvm.compile(bb.get(), target="llvm"), tvm.cpu())
        return tuple(int(v) for v in vm["main"]().numpy())
    except _TVM_FAILURES:
        return None


def _static_slice(call: relax.Call) -> relax.Expr | None:
    """``strided_slice`` picking what a ``dynamic_strided_slice`` with constant bounds picks."""
    shape = static_shape(call.args[0].ty)
    bounds = [arg.value.numpy() if isinstance(arg, Constant) else None for arg in call.args[1:]]
    if shape is None or any(b is None or b.shape != (len(shape),) for b in bounds):
        return None
    begin, end, strides = ([int(v) for v in b] for b in bounds)
    static = []
    for axis, extent in enumerate(shape):
        picked = _picked("dynamic_strided_slice", extent, begin[axis], end[axis], strides[axis])
        if picked is None:
            return None
        step = strides[axis]
        start, stop = 0, 0  # an empty axis
        if picked:
            # Past the last picked index, written so strided_slice cannot read it as "from end".
            start, stop = picked[0], picked[-1] + (1 if step > 0 else -1)
            stop = stop if stop >= 0 else -extent - 1
        if _picked("strided_slice", extent, start, stop, step) != picked:
            return None
        static.append((start, stop, step))
    axes = list(range(len(shape)))
    starts, stops, steps = ([s[k] for s in static] for k in range(3))
    return relax.op.strided_slice(call.args[0], axes, starts, stops, steps)


def _flip_as_take(call: relax.Call) -> relax.Expr | None:
    """``flip`` along a static axis as the ``take`` of that axis's indices in reverse order
    (the elements it moves, as a DMA gather of rows moves them)."""
    shape = static_shape(call.args[0].ty)
    if shape is None:
        return None
    axis = int(call.attrs.axis) % len(shape)
    reverse = relax.const(np.arange(shape[axis] - 1, -1, -1, dtype="int64"), "int64")
    return relax.op.take(call.args[0], reverse, axis=axis)


def _top1(expr: relax.Expr) -> bool:
    """``topk`` with k = 1 of a static tensor with int64 indices: a max / min reduction and its
    argmax / argmin (torch.export's ``max(dim)``)."""
    return (
        isinstance(expr, relax.Call)
        and isinstance(expr.op, tvm.ir.Op)
        and expr.op.name == "relax.topk"
        and int(expr.attrs.k) == 1
        and str(expr.attrs.dtype) == "int64"
        and static_shape(expr.args[0].ty) is not None
    )


def _arg_reduction_kept(expr: relax.Expr) -> bool:
    return (
        isinstance(expr, relax.Call)
        and isinstance(expr.op, tvm.ir.Op)
        and expr.op.name in ("relax.argmax", "relax.argmin")
        and expr.attrs.axis is not None
        and bool(expr.attrs.keepdims)
        and static_shape(expr.ty) is not None
    )


def _reduce_top1(top1: relax.Call, output: str) -> relax.Expr:
    """The ``values`` or ``indices`` of a k = 1 ``topk`` as the reduction that computes them."""
    x, axis, largest = top1.args[0], int(top1.attrs.axis), bool(top1.attrs.largest)
    if output == "values":
        return (relax.op.max if largest else relax.op.min)(x, axis=[axis], keepdims=True)
    return (relax.op.argmax if largest else relax.op.argmin)(x, axis=axis, keepdims=True)


def _uniform_gather(call: relax.Call) -> Constant | None:
    """``gather_elements`` from a constant whose elements are all one value: that value in the
    indices' shape (None otherwise). Any valid index picks it; TVM reads out of bounds for an
    invalid one."""
    data, indices = call.args
    shape = static_shape(indices.ty)
    if not isinstance(data, Constant) or shape is None:
        return None
    values = data.value.numpy()
    if values.size == 0 or not (values == values.flat[0]).all():
        return None  # NaN never equals itself: left as it is
    return relax.const(np.full(shape, values.flat[0], values.dtype), str(values.dtype))


@mutator
class _Canonicalizer(PyExprMutator):
    def __init__(self, mod: tvm.IRModule) -> None:
        super().__init__(mod)
        self.mod = mod
        # Variables bound to constants (or static shapes): their uses see the value, so folds
        # chain within one pass (isnan(c) -> where(...) -> maximum(x, bound)).
        self.known: dict[relax.Var, relax.Expr] = {}
        # Variables bound to a k = 1 ``topk`` returning values and indices (torch's max(dim)).
        self.top1: dict[relax.Var, relax.Call] = {}
        # Variables bound to argmax / argmin with keepdims (int64 data movement stays on the CPU,
        # so squeezing the kept axis is folded into the reduction).
        self.kept_arg_reductions: dict[relax.Var, relax.Call] = {}
        # Run-time masks are rewritten along their chains of (canonicalized) bindings.
        self.masks = MaskRewriter(self.builder_.emit, self.builder_.lookup_binding)
        self.indices = IndexArithmetic(self.builder_.emit, self.builder_.lookup_binding)

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:  # noqa: D102
        value = self.visit_expr(binding.value)
        if isinstance(value, (Constant, relax.ShapeExpr)):
            self.known[binding.var] = value
        if _top1(value) and str(value.attrs.ret_type) == "both":
            self.top1[binding.var] = value
        if _arg_reduction_kept(value):
            self.kept_arg_reductions[binding.var] = value
        var = binding.var
        if not tvm_ffi.structural_equal(var.ty, value.ty):
            # A rewrite made the type more precise (a static shape): later uses see the new var.
            var = self.with_type(var, value.ty)
            self.set_var_remap(binding.var, var)
        self.builder_.emit_normalized(relax.VarBinding(var, value))

    def visit_var_(self, var: relax.Var) -> relax.Expr:  # noqa: D102
        return self._use(var)

    def visit_dataflow_var_(self, var: relax.DataflowVar) -> relax.Expr:  # noqa: D102
        return self._use(var)

    def visit_tuple_getitem_(self, item: relax.TupleGetItem) -> relax.Expr:  # noqa: D102
        tuple_value = item.tuple_value
        if isinstance(tuple_value, relax.Var) and tuple_value in self.top1:
            top1 = self.top1[tuple_value]
            return self.builder_.normalize(_reduce_top1(top1, ("values", "indices")[item.index]))
        return super().visit_tuple_getitem_(item)

    def _arg_reduction_unkept(self, squeeze: relax.Call) -> relax.Expr | None:
        """argmax / argmin without keepdims for a squeeze of exactly the axis it kept."""
        reduced = self.kept_arg_reductions.get(squeeze.args[0])
        if reduced is None or squeeze.attrs.axis is None:
            return None
        rank = len(static_shape(reduced.ty))
        axis = int(reduced.attrs.axis) % rank
        if [int(a) % rank for a in squeeze.attrs.axis] != [axis]:
            return None
        return self.builder_.normalize(
            getattr(relax.op, reduced.op.name[len("relax.") :])(
                reduced.args[0], axis=axis, keepdims=False
            )
        )

    def _use(self, var: relax.Var) -> relax.Expr:
        """A use of ``var``: its known value, the var that replaced it, or itself."""
        if var in self.known:
            return self.known[var]
        remapped = self.get_var_remap(var)
        return var if remapped is None else remapped

    def visit_call_(self, call: relax.Call) -> relax.Expr:  # noqa: D102 (visitor protocol)
        call = super().visit_call_(call)
        if not isinstance(call.op, tvm.ir.Op):
            return call
        name = call.op.name
        if name == "relax.call_tir":
            return self._elementwise_call_tir(call)
        if _top1(call) and str(call.attrs.ret_type) != "both":
            return self.builder_.normalize(_reduce_top1(call, str(call.attrs.ret_type)))
        if name == "relax.squeeze":
            unsqueezed = self._arg_reduction_unkept(call)
            if unsqueezed is not None:
                return unsqueezed
        if name == "relax.isnan" and self._never_nan(call.args[0]):
            return relax.const(np.zeros(static_shape(call.ty), "bool"))
        if name == "relax.shape_of":
            shape = static_shape(call.args[0].ty)
            return relax.ShapeExpr(shape) if shape is not None else call
        if name == "relax.broadcast_to":
            if static_shape(call.args[0].ty) == static_shape(call.ty) is not None:
                return call.args[0]
        if name == "relax.dynamic_strided_slice":
            static = _static_slice(call)
            if static is not None:
                return self.builder_.normalize(static)
        if name == "relax.flip":
            flipped = _flip_as_take(call)
            if flipped is not None:
                return self.builder_.normalize(flipped)
        if name == "relax.take" and str(call.attrs.mode) == "fast":
            if not isinstance(call.args[1], Constant):
                return self.builder_.normalize(
                    relax.op.take(*call.args, axis=call.attrs.axis, mode="clip")
                )
        if name in ("relax.index_tensor", "relax.gather_nd"):
            gather = gather_as_take(call)
            if gather is not None:
                return self.builder_.normalize(gather)
        if name == "relax.gather_elements":
            uniform = _uniform_gather(call)
            if uniform is not None:
                return uniform
        mask = self.masks.rewrite(call)
        if mask is not None:
            return self.builder_.normalize(mask)
        index = self.indices.rewrite(call)
        if index is not None:
            return self.builder_.normalize(index)
        decided = self.indices.decide(call)
        if decided is not None:
            return decided
        legal = legalize_bool_arithmetic(call)
        if foldable(call):
            folded = fold(call if legal is None else legal)
            if folded is not None:
                return folded
        if legal is not None:
            return self.builder_.normalize(legal)
        identity = identity_operand(call) if isinstance(call.op, tvm.ir.Op) else None
        return call if identity is None else identity

    def _never_nan(self, value: relax.Expr) -> bool:
        """True when ``value`` (an operand of this pass's output) holds no NaN whatever the
        inputs: integers converted to float, or dequantized with a finite constant scale."""
        if isinstance(value, relax.Var):
            value = self.builder_.lookup_binding(value)
        if not isinstance(value, relax.Call) or not isinstance(value.op, tvm.ir.Op):
            return False
        if static_shape(value.ty) is None or not str(value.args[0].ty.dtype).startswith(
            ("int", "uint", "bool")
        ):
            return False
        if value.op.name == "relax.astype":
            return True
        if value.op.name == "relax.dequantize":
            scale = value.args[1]
            return isinstance(scale, Constant) and bool(np.isfinite(scale.value.numpy()).all())
        return False

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
        if len(arg_types) == 1 and static_shape(call.ty) == list(arg_types[0][0]):
            # A zero-width ONNX Pad: TVM's own copy of its input, the input itself.
            reference = _legalized("zero_pad", tuple(arg_types))
            if reference is not None and str(call.ty.dtype) == arg_types[0][1]:
                if tvm_ffi.structural_equal(prim_func, reference, map_free_vars=True):
                    return args.fields[0]
        if len(arg_types) == 1 and str(call.ty.dtype) == arg_types[0][1]:
            pad = pad_of_call_tir(prim_func, *arg_types[0], static_shape(call.ty) or [])
            if pad is not None:
                mode, widths = pad
                return self.builder_.normalize(
                    relax.op.nn.pad(args.fields[0], widths, pad_mode=mode)
                )
        if len(arg_types) != 2:  # maximum / minimum are binary (ONNX Pad lowers to unary ones)
            return call
        for op_name in _ELEMENTWISE_PRIMFUNCS:
            reference = _legalized(op_name, tuple(arg_types))
            if reference is None:
                continue
            if tvm_ffi.structural_equal(prim_func, reference, map_free_vars=True):
                replaced = self.builder_.normalize(getattr(relax.op, op_name)(*args.fields))
                if static_shape(replaced.ty) == static_shape(call.ty):
                    return replaced
        return call


def model_rounding(mod: tvm.IRModule, rounding: str | None = None) -> str:
    """The integer arithmetic of ``mod``'s quantized ops: ``rounding`` when given, else the
    module's ``example_npu.rounding`` attribute (``load_model`` sets "tflite" for TFLite files),
    else "tvm" (bit-equal to TVM's CPU build)."""
    if rounding is None:
        attrs = mod.attrs
        rounding = (
            str(attrs[ROUNDING_ATTR]) if attrs is not None and ROUNDING_ATTR in attrs else "tvm"
        )
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {', '.join(ROUNDINGS)}, not {rounding!r}")
    return rounding


def canonicalize(mod: tvm.IRModule, rounding: str | None = None) -> tvm.IRModule:
    """Returns ``mod`` with ``main`` canonicalized (see the module docstring); with
    ``rounding="tflite"`` TFLite's integer average pooling too (:mod:`.tflite_canonical`)."""
    mod = relax.transform.Normalize()(mod)
    main = _Canonicalizer(mod).visit_expr(mod["main"])
    mod = mod.clone() if hasattr(mod, "clone") else tvm.IRModule(mod.functions, attrs=mod.attrs)
    mod[mod.get_global_var("main")] = main
    mod = relax.transform.Normalize()(mod)
    tflite = model_rounding(mod, rounding) == "tflite"
    mod = canonicalize_tflite(mod, tflite_semantics=tflite)
    # canonicalize_qdq starts with CanonicalizeBindings and ends with dead-code elimination.
    mod = canonicalize_qdq(mod, semantics="tflite" if tflite else "tvm")
    return int8_integer_weights(constant_conditions_as_comparisons(mod))
