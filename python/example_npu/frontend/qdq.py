"""canonicalize_qdq: puts QDQ graphs into the one form the integer NPU patterns match.

onnxruntime's quantizer and ``quantize_model`` leave ``dequantize -> float ops -> quantize``
around every quantized op, in several equivalent shapes. Before partitioning, this pass rewrites
them exactly (the rewritten program computes the same integers):

1. **Own dequantize per consumer.** A ``dequantize`` read by several ops (a tensor feeding a conv
   and a residual add) is emitted once per consumer, so each QDQ chain is self-contained.
2. **Quantize moves above shape ops.** ``quantize(reshape(y))`` is ``reshape(quantize(y))``
   (likewise permute_dims, squeeze, expand_dims, flatten, nearest ``resize2d``, reflect /
   replicate / circular ``pad`` and the items of a split): quantize is elementwise with
   per-tensor parameters and each of these outputs one input element.
   ``quantize(dequantize(x))`` with x's own parameters is x, so
   ``dequantize -> reshape -> quantize`` becomes a reshape of the integers.
3. **Elementwise islands become tables.** ``quantize(f(dequantize(x)))`` where f is any chain of
   elementwise float ops of the one 8-bit tensor x and scalar constants (sigmoid, hardswish as
   the ONNX importer spells it, GELU, SiLU with its inner QDQ, leaky ReLU, ...) has 256
   possible inputs: it becomes ``take(table, x, axis=0, mode="wrap")`` with the table evaluated
   here, the way the float ops compute it (float32 arithmetic; transcendental functions rounded
   from float64). For TFLite models an island ends at an inner quantize or table, so each
   TFLite op keeps its own integer kernel, and the ops TFLite defines by a fixed-point kernel
   rather than a float function (LEAKY_RELU, HARD_SWISH) are tabulated with that kernel
   (``semantics="tflite"``, :mod:`.tflite_kernels`).
4. **Constant dequantizes fold.** ``dequantize`` of a constant that no integer op reads as its
   operand (onnxruntime's int32 LayerNorm / InstanceNorm bias, an int8 LayerNorm scale) becomes
   the float constant TVM computes for it (:func:`.constant_fold.fold`), and so do the shape ops
   that then read only constants: nothing of it is left to run on the CPU. Kept are the weights
   and int32 biases of matmul / conv / conv2d_transpose (directly or behind one reshape) and the
   8- / 16-bit operands of the other integer chains (add, multiply, concat, pooling, ...).
5. **Float tails become float tables.** An elementwise float chain of one 8-bit tensor that no
   quantize or elementwise op reads (a model's ``tanh(dequantize(x))`` output, a GELU feeding a
   float op) is ``take(table, x, axis=0, mode="wrap")`` with a 256-entry float32 table computed
   by TVM's own build of that chain: bit for bit what TVM's CPU build of the model gives.
6. **Long concatenations nest.** ``quantize(concat(dequantize(x_1), ..., dequantize(x_n)))``
   with more inputs than one qnn.concat takes becomes a concat of quantized groups: each group's
   result already lies on the output's quantization grid, so re-quantizing it changes nothing.

``partition_for_npu`` runs it first; users of the specification's FuseOpsByPattern flow can call
it themselves. Everything else is left as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import Constant

from ..relax_types import bindings_of, constant_value, dtype_of, is_call, shape_of
from .constant_fold import evaluate_on_grid, fold, foldable
from .float_functions import BINARY as _BINARY
from .float_functions import UNARY as _UNARY
from .float_functions import f32 as _f32
from .tflite_kernels import kernel_table

# Concatenations of 2 to this many quantized inputs are one qnn.concat each (the partition's
# quantized patterns match them); longer ones are nested (exactly: the inner results are already
# on the output's quantization grid).
MAX_CONCAT_INPUTS = 4


_SHAPE_OPS = frozenset(
    {"relax.reshape", "relax.permute_dims", "relax.squeeze", "relax.expand_dims", "relax.flatten"}
)
_TABLE_DTYPES = {"int8": -128, "uint8": 0}

# The integer chains' producers: their weight and int32 bias stay dequantize of a constant.
_PRODUCERS = frozenset({"relax.matmul", "relax.nn.conv2d", "relax.nn.conv2d_transpose"})
# Ops whose 8- / 16-bit dequantized operands an integer pattern (or rule 2) may read; a constant
# dequantize read by anything else folds.
_QDQ_READERS = (
    _PRODUCERS
    | _SHAPE_OPS
    | {
        "relax.add",
        "relax.multiply",
        "relax.concat",
        "relax.quantize",
        "relax.nn.relu",
        "relax.clip",
        "relax.nn.max_pool2d",
        "relax.nn.avg_pool2d",
        "relax.mean",
        "relax.nn.softmax",
    }
)
_QDQ_DTYPES = frozenset({"int8", "uint8", "int16"})

# Whose integer semantics the tables follow: "tvm" (TVM's float QDQ functions, islands spanning
# inner quantizes) or "tflite" (each TFLite op its own table, with TFLite's integer kernels).
TABLE_SEMANTICS = ("tvm", "tflite")


def _scalar_params(call: relax.Call) -> tuple[float, int] | None:
    """(scale, zero point) of a quantize / dequantize with scalar constant parameters."""
    scale, zero_point = constant_value(call.args[1]), constant_value(call.args[2])
    if scale is None or zero_point is None or scale.size != 1 or zero_point.size != 1:
        return None
    return float(scale.reshape(-1)[0]), int(zero_point.reshape(-1)[0])


def quantize_values(values: np.ndarray, scale: float, zero_point: int, dtype: str) -> np.ndarray:
    """Relax's quantize in float32: clip(round_half_even(x / scale) + zero_point)."""
    info = np.iinfo(dtype)
    rounded = np.rint(_f32(values) / np.float32(scale)) + np.float32(zero_point)
    return np.clip(rounded, info.min, info.max)


def _picks_elements(value: Any) -> bool:
    """A shape op, nearest resampling or a mirroring / replicating / wrapping pad: each output
    element is one input element, so an elementwise quantize moves above it exactly."""
    if is_call(value, *_SHAPE_OPS):
        return True
    if is_call(value, "relax.image.resize2d"):
        return str(value.attrs.method) == "nearest_neighbor"
    if is_call(value, "relax.nn.pad"):
        return str(value.attrs.pad_mode) in ("reflect", "replicate", "circular")
    return False


class _Island:
    """Evaluates an elementwise float expression of one 8-bit tensor on all its 256 values."""

    def __init__(self, lookup: Callable[[relax.Var], Any], one_op: bool = False):
        self.lookup = lookup
        self.one_op = one_op  # an inner quantize or table ends the island
        self.source: relax.Var | None = None
        self.grid: np.ndarray | None = None  # the 256 inputs, in take's index order
        self.memo: dict[Any, np.ndarray] = {}

    def evaluate(self, expr: Any) -> np.ndarray | None:
        if expr in self.memo:
            return self.memo[expr]
        result = self._evaluate(expr)
        if result is not None:
            self.memo[expr] = result
        return result

    def _evaluate(self, expr: Any) -> np.ndarray | None:
        if isinstance(expr, relax.Var):
            value = self.lookup(expr)
            return None if value is None else self.evaluate(value)
        constant = constant_value(expr)
        if constant is not None:
            return _f32(constant.reshape(-1)[0]) if constant.size == 1 else None
        if not isinstance(expr, relax.Call) or not isinstance(expr.op, tvm.ir.Op):
            return None
        name = expr.op.name
        if name == "relax.dequantize":
            return self._dequantize(expr)
        if name == "relax.take":
            return self._lookup(expr)
        if (
            name not in _UNARY
            and name not in _BINARY
            and name not in ("relax.clip", "relax.quantize", "relax.nn.leakyrelu")
        ):
            return None  # not elementwise: the island ends here (its args are never visited)
        args = [self.evaluate(arg) for arg in expr.args]
        if any(arg is None for arg in args):
            return None
        if name == "relax.quantize":
            params = _scalar_params(expr)
            return None if params is None else quantize_values(args[0], *params, dtype_of(expr))
        if name == "relax.clip":
            return np.clip(args[0], args[1], args[2])
        if name == "relax.nn.leakyrelu":  # TVM: x > 0 ? x : x * alpha, in float32
            return np.where(args[0] > 0, args[0], args[0] * np.float32(expr.attrs.alpha))
        if name in _UNARY:
            return _UNARY[name](args[0])
        return _f32(_BINARY[name](args[0], args[1]))

    def _is_source(self, data: Any) -> bool:
        """Whether data is the island's one 8-bit input (the first one seen becomes it)."""
        if not isinstance(data, relax.Var) or dtype_of(data) not in _TABLE_DTYPES:
            return False
        if self.source is None:
            self.source = data
            grid = np.arange(256)
            if dtype_of(data) == "int8":
                grid = np.where(grid >= 128, grid - 256, grid)  # take's wrap order
            self.grid = grid
        return data.same_as(self.source)  # a second tensor: not a function of one input

    def _dequantize(self, call: relax.Call) -> np.ndarray | None:
        """Of integers computed from the input (an inner quantize or table), else of the input."""
        params = _scalar_params(call)
        if params is None:
            return None
        data = call.args[0]
        value = self.lookup(data) if isinstance(data, relax.Var) else None
        integers = None
        if is_call(value, "relax.take", "relax.quantize") and not self.one_op:
            saved = (self.source, self.grid, dict(self.memo))
            integers = self.evaluate(value)
            if integers is None:  # not a function of one input: data itself is the input
                self.source, self.grid, self.memo = saved
        if integers is None and self._is_source(data):
            integers = self.grid
        if integers is None:
            return None
        scale, zero_point = params
        return np.float32(scale) * _f32(integers - zero_point)

    def _lookup(self, call: relax.Call) -> np.ndarray | None:
        """An inner table of the same input (an activation tabulated already)."""
        table = constant_value(call.args[0])
        if table is None or table.shape != (256,) or not self._is_source(call.args[1]):
            return None
        return _f32(table)


_ELEMENTWISE = frozenset(_UNARY) | frozenset(_BINARY) | {"relax.clip", "relax.nn.leakyrelu"}


def float_chain_ends(func: relax.Function) -> set[relax.Call]:
    """The elementwise float calls that no quantize or elementwise op reads (rule 5)."""
    bindings = bindings_of(func)
    read = {
        arg
        for value in bindings.values()
        if is_call(value, "relax.quantize", *_ELEMENTWISE)
        for arg in value.args
        if isinstance(arg, relax.Var)
    }
    return {
        value
        for var, value in bindings.items()
        if is_call(value, *_ELEMENTWISE) and dtype_of(value) == "float32" and var not in read
    }


def _constant_dequantize(value: Any) -> bool:
    return is_call(value, "relax.dequantize") and isinstance(value.args[0], Constant)


def kept_dequantizes(func: relax.Function) -> set[relax.Var]:
    """The variables bound to a ``dequantize`` of a constant that an integer pattern reads: a
    producer's weight or (maybe reshaped) bias, an 8- / 16-bit operand of another chain."""
    bindings = bindings_of(func)

    def constant_dequantize(arg: Any) -> relax.Var | None:
        return arg if _constant_dequantize(bindings.get(arg)) else None

    kept: set[relax.Var] = set()
    for value in bindings.values():
        if not isinstance(value, relax.Call) or not isinstance(value.op, tvm.ir.Op):
            continue
        if value.op.name == "relax.add":
            lhs, rhs = value.args
            for arg, other in ((lhs, rhs), (rhs, lhs)):
                if is_call(bindings.get(other), *_PRODUCERS):
                    reshaped = bindings.get(arg)
                    inner = reshaped.args[0] if is_call(reshaped, "relax.reshape") else arg
                    kept.add(constant_dequantize(inner))
        if value.op.name in _QDQ_READERS:
            for arg in value.args:
                fields = arg.fields if isinstance(arg, relax.Tuple) else [arg]
                for field in fields:
                    var = constant_dequantize(field)
                    if var is not None and dtype_of(bindings[var].args[0]) in _QDQ_DTYPES:
                        kept.add(var)
    kept.discard(None)
    return kept


@relax.expr_functor.mutator
class _Canonicalizer(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule, semantics: str = "tvm"):
        super().__init__(mod)
        self._splits: dict[tuple, relax.Var] = {}
        self._tflite = semantics == "tflite"
        self.kept: set[relax.Var] = set()  # kept_dequantizes of the function being visited
        self.chain_ends: set[relax.Call] = set()  # its float_chain_ends

    def _binding(self, expr: Any) -> Any:
        """The value bound to a variable (through var-to-var aliases), else None."""
        value = self.lookup_binding(expr) if isinstance(expr, relax.Var) else None
        while isinstance(value, relax.Var) and self.lookup_binding(value) is not None:
            value = self.lookup_binding(value)
        return value

    def _emit(self, expr: relax.Expr) -> relax.Expr:
        """A binding for expr, unless it already is a variable."""
        return expr if isinstance(expr, relax.Var) else self.builder_.emit(expr)

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        chain_end = call in self.chain_ends
        call = super().visit_call_(call)
        if not isinstance(call.op, tvm.ir.Op):
            return call
        if chain_end:
            table = self._float_table(call)
            if table is not None:
                return table
        if call.op.name == "relax.quantize":
            params = _scalar_params(call)
            if params is not None:
                return self._quantize(call.args[0], params, dtype_of(call), call)
        call = self._own_dequantize(call)
        if foldable(call):  # a shape op of a folded dequantize
            folded = fold(call)
            if folded is not None:
                return folded
        return call

    def _own_dequantize(self, call: relax.Call) -> relax.Call:
        """Re-emits every dequantize this call reads, so no dequantize has two consumers;
        folds a constant one no integer pattern reads (rule 4)."""

        def own(arg: Any) -> Any:
            if isinstance(arg, relax.Tuple):
                return relax.Tuple([own(field) for field in arg.fields])
            value = self._binding(arg)
            if _constant_dequantize(value) and arg not in self.kept:
                folded = fold(value)
                if folded is not None:
                    return folded
            if is_call(value, "relax.dequantize"):
                return self.builder_.emit(relax.Call(value.op, value.args, value.attrs))
            return arg

        args = [own(arg) for arg in call.args]
        if all(new.same_as(old) for new, old in zip(args, call.args, strict=True)):
            return call
        return relax.Call(call.op, args, call.attrs, call.ty_args)

    def _quantize(
        self, data: relax.Expr, params: tuple[float, int], dtype: str, original: relax.Call | None
    ) -> relax.Expr:
        """quantize(data) with scalar params, rewritten by rules 2 and 3 where they apply."""
        value = self._binding(data)
        if _picks_elements(value) and dtype_of(value.args[0]) == "float32":
            inner = self._emit(self._quantize(value.args[0], params, dtype, None))
            return relax.Call(value.op, [inner, *value.args[1:]], value.attrs, value.ty_args)
        if isinstance(value, relax.TupleGetItem):
            split = self._binding(value.tuple_value)
            if is_call(split, "relax.split") and dtype_of(split.args[0]) == "float32":
                key = (split.args[0], params, dtype)
                if key not in self._splits:
                    inner = self._emit(self._quantize(split.args[0], params, dtype, None))
                    self._splits[key] = self.builder_.emit(
                        relax.Call(split.op, [inner], split.attrs, split.ty_args)
                    )
                return relax.TupleGetItem(self._splits[key], value.index)
        if is_call(value, "relax.dequantize"):
            if _scalar_params(value) == params and dtype_of(value.args[0]) == dtype:
                return value.args[0]  # quantize(dequantize(x)) with x's own parameters
        if is_call(value, "relax.concat") and isinstance(value.args[0], relax.Tuple):
            fields = list(value.args[0].fields)
            if len(fields) > MAX_CONCAT_INPUTS:
                return self._nested_concat(fields, value, params, dtype)
        table = self._table(data, params, dtype)
        if table is not None:
            return table
        if original is not None:
            return original
        scale, zero_point = params
        return relax.op.quantize(
            data,
            relax.const(np.float32(scale)),
            relax.const(np.array(zero_point, dtype=dtype)),
            axis=-1,
            out_dtype=dtype,
        )

    def _nested_concat(
        self, fields: list, concat: relax.Call, params: tuple[float, int], dtype: str
    ) -> relax.Expr:
        """quantize(concat(fields)) as a concat of at most MAX_CONCAT_INPUTS quantized groups."""
        scale, zero_point = params
        scale_const = relax.const(np.float32(scale))
        zero_const = relax.const(np.array(zero_point, dtype=dtype))
        groups = []
        for start in range(0, len(fields), MAX_CONCAT_INPUTS):
            chunk = fields[start : start + MAX_CONCAT_INPUTS]
            if len(chunk) == 1:
                groups.append(chunk[0])
                continue
            joined = self.builder_.emit(relax.op.concat(chunk, axis=int(concat.attrs.axis)))
            quantized = self._emit(self._quantize(joined, params, dtype, None))
            groups.append(
                self.builder_.emit(relax.op.dequantize(quantized, scale_const, zero_const))
            )
        joined = self.builder_.emit(relax.op.concat(groups, axis=int(concat.attrs.axis)))
        return self._quantize(joined, params, dtype, None)

    def _table(self, data: relax.Expr, params: tuple[float, int], dtype: str) -> relax.Call | None:
        """take(table, x) when data is a non-trivial elementwise function of one 8-bit x."""
        if dtype not in _TABLE_DTYPES:
            return None
        value = self._binding(data)
        if value is None or is_call(value, "relax.dequantize"):
            return None  # a plain rescale: qnn.requantize, no table needed
        if is_call(value, "relax.nn.relu", "relax.clip") and is_call(
            self._binding(value.args[0]), "relax.dequantize"
        ):
            return None  # a rescale with a clamp: qnn.requantize
        if self._tflite and isinstance(value, relax.Call):
            found = kernel_table(value, self._binding, params, dtype)
            if found is not None:
                source, table = found
                return relax.op.take(relax.const(table), source, axis=0, mode="wrap")
        island = _Island(self._binding, one_op=self._tflite)
        values = island.evaluate(data)
        if values is None or island.source is None or not np.all(np.isfinite(values)):
            return None
        if shape_of(data) != shape_of(island.source):
            return None  # a constant broadcast the result to another shape: not elementwise
        table = quantize_values(np.broadcast_to(values, (256,)), *params, dtype).astype(dtype)
        return relax.op.take(relax.const(table), island.source, axis=0, mode="wrap")

    def _float_table(self, call: relax.Call) -> relax.Call | None:
        """take(table, x) with TVM's float32 values of call, an elementwise chain of one 8-bit x
        (rule 5); None if call is not such a chain."""
        island = _Island(self._binding, one_op=self._tflite)
        if island.evaluate(call) is None or island.source is None:
            return None
        if shape_of(call) != shape_of(island.source):
            return None  # a constant broadcast the result to another shape
        values = evaluate_on_grid(call, island.source, island.grid, self._binding)
        if values is None or not np.all(np.isfinite(values)):
            return None
        return relax.op.take(relax.const(values), island.source, axis=0, mode="wrap")


def canonicalize_qdq(mod: tvm.IRModule, semantics: str = "tvm") -> tvm.IRModule:
    """Rewrites every Relax function of ``mod`` as described in the module docstring, then
    removes the bindings the rewrites left unused. ``semantics="tflite"`` (TFLite models) keeps
    each quantized op its own, so ``x * sigmoid(x)`` stays TFLite's integer MUL of the two int8
    tensors instead of one float table (an island ends at an inner quantize or table), and
    tabulates the ops TFLite defines by their own integer kernel with that kernel
    (:func:`.tflite_kernels.kernel_table`)."""
    if semantics not in TABLE_SEMANTICS:
        raise ValueError(f"semantics must be one of {TABLE_SEMANTICS}, not {semantics!r}")
    mod = relax.transform.CanonicalizeBindings()(mod)  # no var-to-var aliases between ops
    mutator = _Canonicalizer(mod, semantics)
    for gvar, func in mod.functions.items():
        if isinstance(func, relax.Function):
            mutator.kept = kept_dequantizes(func)
            mutator.chain_ends = float_chain_ends(func)
            mutator.builder_.update_func(gvar, mutator.visit_expr(func))
    entries = [
        gvar.name_hint for gvar, func in mod.functions.items() if isinstance(func, relax.Function)
    ]
    return relax.transform.DeadCodeElimination(entries)(mutator.builder_.get())
