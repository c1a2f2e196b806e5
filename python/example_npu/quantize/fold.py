"""Folding inference BatchNorm into the convolution before it, as exporters do for ONNX.

``batch_norm(conv2d(x, W) [+ b], gamma, beta, mean, var)[0]`` with constant parameters becomes
``conv2d(x, W * k) + (b - mean) * k + beta`` with ``k = gamma / sqrt(var + epsilon)`` per output
channel. Quantizing the folded convolution (one weight scale per output channel, one bias) is
what onnxruntime quantizes, and no float batch_norm is left between quantized layers.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from ..relax_types import constant_value

_CONV2D = tvm.ir.Op.get("relax.nn.conv2d")
_BATCH_NORM = tvm.ir.Op.get("relax.nn.batch_norm")
_ADD = tvm.ir.Op.get("relax.add")
_RESHAPE = tvm.ir.Op.get("relax.reshape")


@mutator
class _BatchNormFolder(PyExprMutator):
    def _value(self, var):
        return self.lookup_binding(var) if isinstance(var, relax.Var) else None

    def _conv_and_bias(self, data) -> tuple[relax.Call, np.ndarray | None] | None:
        """The conv2d (constant OIHW weight) and constant bias producing data. A conv whose
        result is also read elsewhere stays for that reader (it is computed twice)."""
        value = self._value(data)
        bias = None
        if isinstance(value, relax.Call) and value.op.same_as(_ADD):
            conv_var, other = value.args
            reshape = self._value(other)
            if isinstance(reshape, relax.Call) and reshape.op.same_as(_RESHAPE):
                other = reshape.args[0]
            bias = constant_value(other)
            if bias is None:
                return None
            value = self._value(conv_var)
        if not isinstance(value, relax.Call) or not value.op.same_as(_CONV2D):
            return None
        if constant_value(value.args[1]) is None or str(value.attrs.kernel_layout) not in ("OIHW",):
            return None
        return value, bias

    def visit_tuple_getitem_(self, op: relax.TupleGetItem) -> relax.Expr:
        new = super().visit_tuple_getitem_(op)
        norm = self._value(new.tuple_value)
        if new.index != 0 or not isinstance(norm, relax.Call) or not norm.op.same_as(_BATCH_NORM):
            return new
        params = [constant_value(arg) for arg in norm.args[1:]]
        found = self._conv_and_bias(norm.args[0])
        attrs = norm.attrs
        if found is None or any(p is None for p in params) or bool(attrs.training):
            return new
        conv, bias = found
        layout = str(conv.attrs.data_layout)
        if int(attrs.axis) % 4 != layout.index("C"):
            return new
        gamma, beta, mean, var = (p.astype("float64") for p in params)
        gamma = gamma if bool(attrs.scale) else np.ones_like(gamma)
        beta = beta if bool(attrs.center) else np.zeros_like(beta)
        k = gamma / np.sqrt(var + float(attrs.epsilon))
        weight = constant_value(conv.args[1]).astype("float64") * k.reshape(-1, 1, 1, 1)
        bias = np.zeros_like(mean) if bias is None else bias.astype("float64").reshape(-1)
        folded_bias = (bias - mean) * k + beta
        folded = self.builder_.emit(
            relax.Call(conv.op, [conv.args[0], relax.const(weight.astype("float32"))], conv.attrs)
        )
        shape = [1, 1, 1, 1]
        shape[layout.index("C")] = folded_bias.size
        bias_const = relax.const(folded_bias.astype("float32").reshape(shape))
        return relax.op.add(folded, bias_const)


def fold_batch_norm(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every foldable inference batch_norm of ``main`` folded into its conv2d."""
    func = mod["main"]
    folder = _BatchNormFolder(mod)
    new_mod = tvm.IRModule(dict(mod.functions.items()), attrs=mod.attrs)
    new_mod["main"] = folder.visit_expr(func)
    return relax.transform.DeadCodeElimination(["main"])(new_mod)
