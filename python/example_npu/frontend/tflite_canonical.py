"""Rewrites of TVM's TFLite lowering into the forms the integer NPU patterns match.

TVM's TFLite importer (``tvm.relax.frontend.tflite``) spells TFLite's int8 kernels in QDQ form,
but in shapes the patterns do not take. The first four rewrites are exact (the rewritten program
computes bit for bit what TVM's CPU build of the original computes) and run on every module:

* **Depthwise weights.** ``conv2d(x, reshape(dequantize(W)), kernel_layout="HWOI")`` (TFLite's
  ``[1, H, W, C]`` depthwise filter) becomes ``conv2d(x, dequantize(W'), kernel_layout="HWIO")``
  with W' the same integers transposed to HWIO, provided every weight keeps its channel's scale
  (checked element by element on the channel indices).
* **Constant weights behind shape ops.** ``dequantize(permute_dims(W))`` or
  ``dequantize(reshape(W))`` of an integer constant W (``FULLY_CONNECTED``'s ``[units, depth]``
  filter) is ``dequantize`` of the permuted / reshaped constant.
* **Fused activations.** ``clip(quantize(y), lo, hi)`` on the integers (TFLite's RELU / RELU6 /
  RELU_N1_TO_1 fused into the op before) is dropped when ``[lo, hi]`` covers the dtype, and
  otherwise becomes ``quantize(clip(y, (lo - zp) * s, (hi - zp) * s))``: quantize is monotone and
  the real bounds land exactly on the steps lo and hi, so both clamp the same integers.

* **Integer max pooling.** ``max_pool2d`` of integers (TVM's lowering of ``MAX_POOL_2D`` after
  a ``PAD``, which reads the integers directly) becomes ``quantize(max_pool2d(dequantize(x)))``
  with scale 1 and zero point 0: the maximum of integers is one of them.

Two rewrites give TFLite's meaning, so they run only for TFLite models (``rounding="tflite"``):

* **Integer average pooling.** TVM lowers ``AVERAGE_POOL_2D`` as
  ``astype(int32) -> avg_pool2d -> astype(int8)``, which truncates where TFLite rounds. It
  becomes the QDQ island ``quantize(avg_pool2d(dequantize(x)))`` (scale 1, zero point 0: the
  kernel averages the raw integers), which the NPU runs as TFLite's kernel does.
* **Integer bilinear resizing.** TVM lowers int8 ``RESIZE_BILINEAR`` as
  ``quantize(resize2d(dequantize(x)))`` in float; TFLite's kernel interpolates the raw integers
  with 10-bit fixed-point coordinates and weights and one rounding, and its output keeps the
  input's quantization. With equal parameters it becomes ``resize2d`` of the int8 tensor, which
  the NPU computes with TFLite's kernel under TFLite rounding (codegen's ``rounding``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tvm
from tvm import relax

from ..relax_types import constant_value, dtype_of, is_call, shape_of

_INT_DTYPES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}


def _scalar(expr: Any) -> float | None:
    value = constant_value(expr)
    return None if value is None or value.size != 1 else float(value.reshape(-1)[0])


@relax.expr_functor.mutator
class _TfliteCanonicalizer(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule, tflite_semantics: bool):
        super().__init__(mod)
        self.tflite_semantics = tflite_semantics

    def _value(self, expr: Any) -> Any:
        return self.lookup_binding(expr) if isinstance(expr, relax.Var) else expr

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        call = super().visit_call_(call)
        if not isinstance(call.op, tvm.ir.Op):
            return call
        name = call.op.name
        rewritten = None
        if name == "relax.nn.conv2d" and call.attrs.kernel_layout == "HWOI":
            rewritten = self._depthwise(call)
        elif name == "relax.dequantize":
            rewritten = self._constant_weight(call)
        elif name == "relax.astype" and self.tflite_semantics:
            rewritten = self._average_pool(call)
        elif name == "relax.quantize" and self.tflite_semantics:
            rewritten = self._integer_bilinear(call)
        elif name == "relax.clip":
            rewritten = self._activation(call)
        elif name == "relax.nn.max_pool2d":
            rewritten = self._max_pool(call)
        return call if rewritten is None else rewritten

    def _depthwise(self, conv: relax.Call) -> relax.Expr | None:
        reshape = self._value(conv.args[1])
        if not is_call(reshape, "relax.reshape"):
            return None
        dequantize = self._value(reshape.args[0])
        if not is_call(dequantize, "relax.dequantize"):
            return None
        weights = constant_value(dequantize.args[0])
        scale = constant_value(dequantize.args[1])
        if weights is None or scale is None:
            return None
        hwoi = shape_of(reshape)
        if hwoi is None:
            return None
        axis = int(dequantize.attrs.axis) % weights.ndim
        # Which scale each weight uses, carried through the reshape and transpose.
        channel = np.broadcast_to(
            np.arange(weights.shape[axis]).reshape(
                [-1 if i == axis else 1 for i in range(weights.ndim)]
            ),
            weights.shape,
        )
        channel = channel.reshape(hwoi).transpose(0, 1, 3, 2)
        if scale.size != 1 and not np.array_equal(
            channel, np.broadcast_to(np.arange(hwoi[2]), channel.shape)
        ):
            return None
        hwio = relax.const(np.ascontiguousarray(weights.reshape(hwoi).transpose(0, 1, 3, 2)))
        weight = self.builder_.emit(
            relax.op.dequantize(hwio, dequantize.args[1], dequantize.args[2], axis=3)
        )
        attrs = conv.attrs
        return relax.op.nn.conv2d(
            conv.args[0],
            weight,
            strides=attrs.strides,
            padding=attrs.padding,
            dilation=attrs.dilation,
            groups=int(attrs.groups),
            data_layout=attrs.data_layout,
            kernel_layout="HWIO",
            out_layout=attrs.out_layout,
            out_dtype=attrs.out_dtype,
        )

    def _constant_weight(self, dequantize: relax.Call) -> relax.Expr | None:
        inner = self._value(dequantize.args[0])
        if is_call(inner, "relax.permute_dims"):
            weights = constant_value(inner.args[0])
            if weights is None:
                return None
            axes = [int(a) for a in inner.attrs.axes] if inner.attrs.axes is not None else None
            folded = np.transpose(weights, axes)
        elif is_call(inner, "relax.reshape"):
            weights, shape = constant_value(inner.args[0]), shape_of(inner)
            if weights is None or shape is None:
                return None
            folded = weights.reshape(shape)
        else:
            return None
        return relax.Call(
            dequantize.op,
            [relax.const(np.ascontiguousarray(folded)), *dequantize.args[1:]],
            dequantize.attrs,
        )

    def _activation(self, clip: relax.Call) -> relax.Expr | None:
        quantize = self._value(clip.args[0])
        dtype = dtype_of(clip)
        if not is_call(quantize, "relax.quantize") or dtype not in _INT_DTYPES:
            return None
        scale, zero_point = _scalar(quantize.args[1]), _scalar(quantize.args[2])
        if scale is None or zero_point is None:
            return None
        low, high = (float(bound.value) for bound in clip.args[1:])
        lowest, highest = _INT_DTYPES[dtype]
        if low <= lowest and high >= highest:
            return clip.args[0]  # the clamp quantize already applies
        real_low = (max(low, lowest) - zero_point) * scale
        real_high = (min(high, highest) - zero_point) * scale
        clipped = self.builder_.emit(relax.op.clip(quantize.args[0], real_low, real_high))
        return relax.Call(quantize.op, [clipped, *quantize.args[1:]], quantize.attrs)

    def _max_pool(self, pool: relax.Call) -> relax.Expr | None:
        """max_pool2d(x) of integers -> quantize(max_pool2d(dequantize(x))), scale 1 and zero
        point 0: the maximum of integers is one of them, whatever pads the window."""
        dtype = dtype_of(pool)
        if dtype not in _INT_DTYPES:
            return None
        scale = relax.const(np.float32(1.0))
        zero_point = relax.const(np.int32(0))
        real = self.builder_.emit(relax.op.dequantize(pool.args[0], scale, zero_point))
        pooled = self.builder_.emit(relax.Call(pool.op, [real], pool.attrs))
        return relax.op.quantize(pooled, scale, zero_point, out_dtype=dtype)

    def _average_pool(self, narrow: relax.Call) -> relax.Expr | None:
        """astype(avg_pool2d(astype(x, int32)), x.dtype) -> quantize(avg_pool2d(dequantize(x)))
        with scale 1 and zero point 0: TFLite's AVERAGE_POOL_2D averages the raw integers, so
        any quantization shared by input and output is the same kernel."""
        pool = self._value(narrow.args[0])
        if dtype_of(narrow) not in _INT_DTYPES or not is_call(pool, "relax.nn.avg_pool2d"):
            return None
        wide = self._value(pool.args[0])
        if not is_call(wide, "relax.astype") or dtype_of(wide.args[0]) != dtype_of(narrow):
            return None
        scale = relax.const(np.float32(1.0))
        zero_point = relax.const(np.int32(0))
        real = self.builder_.emit(relax.op.dequantize(wide.args[0], scale, zero_point))
        attrs = pool.attrs
        pooled = self.builder_.emit(
            relax.op.nn.avg_pool2d(
                real,
                pool_size=attrs.pool_size,
                strides=attrs.strides,
                padding=attrs.padding,
                dilation=attrs.dilation,
                ceil_mode=bool(attrs.ceil_mode),
                count_include_pad=bool(attrs.count_include_pad),
                layout=attrs.layout,
                out_layout=attrs.out_layout,
            )
        )
        return relax.op.quantize(pooled, scale, zero_point, out_dtype=dtype_of(narrow))

    def _integer_bilinear(self, quantize: relax.Call) -> relax.Expr | None:
        """quantize(resize2d(dequantize(x), linear)) with x's own int8 parameters ->
        resize2d(x): TFLite's int8 RESIZE_BILINEAR reads and writes the raw integers."""
        resize = self._value(quantize.args[0])
        if not is_call(resize, "relax.image.resize2d") or str(resize.attrs.method) != "linear":
            return None
        dequantize = self._value(resize.args[0])
        if not is_call(dequantize, "relax.dequantize"):
            return None
        data = dequantize.args[0]
        same = all(
            _scalar(a) is not None and _scalar(a) == _scalar(b)
            for a, b in zip(dequantize.args[1:], quantize.args[1:], strict=True)
        )
        if not same or dtype_of(data) != "int8" or dtype_of(quantize) != "int8":
            return None
        a = resize.attrs
        return relax.op.image.resize2d(
            data,
            resize.args[1],
            roi=[float(v) for v in a.roi],
            layout=str(a.layout),
            method="linear",
            coordinate_transformation_mode=str(a.coordinate_transformation_mode),
            rounding_method=str(a.rounding_method),
        )


def canonicalize_tflite(mod: tvm.IRModule, tflite_semantics: bool = False) -> tvm.IRModule:
    """Applies the module docstring's rewrites to every Relax function of ``mod`` (the average
    pooling one only with ``tflite_semantics``), then removes what they left unused."""
    mutator = _TfliteCanonicalizer(mod, tflite_semantics)
    for gvar, func in mod.functions.items():
        if isinstance(func, relax.Function):
            mutator.builder_.update_func(gvar, mutator.visit_expr(func))
    entries = [
        gvar.name_hint for gvar, func in mod.functions.items() if isinstance(func, relax.Function)
    ]
    return relax.transform.DeadCodeElimination(entries)(mutator.builder_.get())
