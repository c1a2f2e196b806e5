"""Finding the quantizable layers of ``main`` and rewriting them into QDQ form.

A layer is a producer with a constant float32 weight, optionally followed by a constant bias add
and an activation, each intermediate used only by the next op::

    y = nn.conv2d(x, W) | matmul(x, W) | matmul(x, permute_dims(W))     # W constant
    y = add(y, b) | add(b, y)          # b constant or reshape(constant); keeps y's shape
    y = nn.relu(y) | clip(y, 0, 6)

It is rewritten into the form the NPU's quantized patterns match::

    x_dq = dequantize(x_q, s_x, zp_x, axis=-1)                # per layer; x_q shared
    w_dq = dequantize(W_q, s_w, zp_w, axis=<output channel>)  # W_q an int8 constant
    y    = nn.conv2d(x_dq, w_dq, <same attrs>)                # or matmul(x_dq, w_dq),
                                                              # or matmul(x_dq, permute_dims(w_dq))
    y    = add(y, b)                                          # float bias, reshaped to a constant
    y    = nn.relu(y) | clip(y, 0, 6)
    y_q  = quantize(y, s_y, zp_y, axis=-1)

``x_q`` is the quantize of the previous layer, or a quantize of a float tensor (a model input,
the output of an op that is not quantized) emitted once before its first quantized use.
Everything else runs in float on ``dequantize(y_q)``, and the function returns floats.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import tvm
import tvm_ffi
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from .scheme import QuantParams, weight_params

_CONV2D = tvm.ir.Op.get("relax.nn.conv2d")
_MATMUL = tvm.ir.Op.get("relax.matmul")
_ADD = tvm.ir.Op.get("relax.add")
_RESHAPE = tvm.ir.Op.get("relax.reshape")
_PERMUTE = tvm.ir.Op.get("relax.permute_dims")
_RELU = tvm.ir.Op.get("relax.nn.relu")
_CLIP = tvm.ir.Op.get("relax.clip")


@dataclass
class Layer:
    """One quantizable layer: its float pieces, as found in ``main``."""

    kind: str  # "conv2d", "matmul" (weight [..., K, N]) or "dense" (Linear: permute_dims(W))
    producer: relax.Call
    producer_var: relax.Var
    data: relax.Var  # the float input activation
    weight: np.ndarray  # as stored (before any permute_dims)
    weight_axis: int  # output-channel axis of the weight as stored
    permute_axes: list[int] | None  # the Linear form's permute_dims axes
    bias: np.ndarray | None
    activation: relax.Call | None
    output: relax.Var  # the last var of the chain
    # Bindings the rewrite replaces: the chain, and weight/bias helpers used only by it.
    replaced: set[relax.Var] = field(default_factory=set)


def _is_constant(expr) -> bool:
    return isinstance(expr, tvm.ir.expr.Constant)


def _const_value(expr) -> np.ndarray:
    return expr.value.numpy()


def _tensor_dtype(expr) -> str | None:
    ty = expr.ty
    return str(ty.dtype) if isinstance(ty, relax.TensorType) else None


def _shape_ints(shape_expr) -> list[int] | None:
    if not isinstance(shape_expr, relax.ShapeExpr):
        return None
    try:
        return [int(d) for d in shape_expr.values]
    except TypeError:
        return None


class _Uses:
    """Def-use facts about ``main``: each var's binding, its consumers and its block."""

    def __init__(self, func: relax.Function):
        self.value: dict[relax.Var, relax.Expr] = {}
        self.block: dict[relax.Var, int] = {}
        self.users: dict[relax.Var, list[relax.Var | None]] = defaultdict(list)
        self.dataflow = [isinstance(block, relax.DataflowBlock) for block in func.body.blocks]
        for index, block in enumerate(func.body.blocks):
            for binding in block.bindings:
                self.block[binding.var] = index
                if isinstance(binding, relax.VarBinding):
                    self.value[binding.var] = binding.value
                for var in relax.analysis.free_vars(binding.value):
                    self.users[var].append(binding.var)
        for var in relax.analysis.free_vars(func.body.body):
            self.users[var].append(None)  # the function's result

    def single_user(self, var: relax.Var) -> relax.Var | None:
        users = self.users.get(var, [])
        return users[0] if len(users) == 1 else None

    def call(self, var: relax.Var | None, op: tvm.ir.Op) -> relax.Call | None:
        value = self.value.get(var) if var is not None else None
        if isinstance(value, relax.Call) and value.op.same_as(op):
            return value
        return None


def _weight(uses: _Uses, call: relax.Call):
    """(weight array, output-channel axis, permute axes, helper var) or None."""
    rhs = call.args[1]
    if call.op.same_as(_CONV2D):
        if not _is_constant(rhs) or _tensor_dtype(rhs) != "float32":
            return None
        layout = str(call.attrs.kernel_layout)
        if "O" not in layout:
            return None
        return _const_value(rhs), layout.index("O"), None, None
    if _is_constant(rhs):
        weight = _const_value(rhs)
        if _tensor_dtype(rhs) != "float32" or weight.ndim < 2:
            return None
        return weight, weight.ndim - 1, None, None
    permute = uses.call(rhs, _PERMUTE) if isinstance(rhs, relax.Var) else None
    if permute is None or not _is_constant(permute.args[0]):
        return None
    weight = _const_value(permute.args[0])
    axes = permute.attrs.axes
    axes = [1, 0] if axes is None else [int(a) for a in axes]
    if _tensor_dtype(permute.args[0]) != "float32" or weight.ndim != 2 or axes != [1, 0]:
        return None
    return weight, 0, axes, rhs


def _bias(uses: _Uses, add: relax.Call, chain_var: relax.Var):
    """(bias array, helper var) when ``add`` adds a constant bias to ``chain_var``, else None."""
    lhs, rhs = add.args
    other = rhs if lhs.same_as(chain_var) else lhs if rhs.same_as(chain_var) else None
    if other is None or other.same_as(chain_var) or _tensor_dtype(other) != "float32":
        return None
    if _is_constant(other):
        return _const_value(other), None
    reshape = uses.call(other, _RESHAPE) if isinstance(other, relax.Var) else None
    if reshape is None or not _is_constant(reshape.args[0]):
        return None
    shape = _shape_ints(reshape.args[1])
    if shape is None:
        return None
    return _const_value(reshape.args[0]).reshape(shape), other


def _is_relu6(call: relax.Call) -> bool:
    bounds = [getattr(arg, "value", None) for arg in call.args[1:]]
    return bounds in ([0, 6], [0.0, 6.0])


def find_layers(func: relax.Function) -> list[Layer]:
    """The quantizable layers of ``func`` in program order."""
    uses = _Uses(func)
    layers = []
    for block in func.body.blocks:
        for binding in block.bindings:
            call = binding.value
            if not isinstance(binding, relax.VarBinding) or not isinstance(call, relax.Call):
                continue
            if not (call.op.same_as(_CONV2D) or call.op.same_as(_MATMUL)):
                continue
            data = call.args[0]
            if not isinstance(data, relax.Var) or _tensor_dtype(data) != "float32":
                continue
            if _tensor_dtype(call) != "float32":
                continue
            found = _weight(uses, call)
            if found is None:
                continue
            weight, axis, permute_axes, weight_helper = found
            kind = "conv2d" if call.op.same_as(_CONV2D) else "dense" if permute_axes else "matmul"
            layer = Layer(
                kind, call, binding.var, data, weight, axis, permute_axes, None, None, binding.var
            )
            layer.replaced.add(binding.var)
            if weight_helper is not None and len(uses.users[weight_helper]) == 1:
                layer.replaced.add(weight_helper)
            block_index = uses.block[binding.var]

            def next_call(var, op, block_index=block_index):
                user = uses.single_user(var)
                if user is None or uses.block.get(user) != block_index:
                    return None, None
                return user, uses.call(user, op)

            user, add = next_call(layer.output, _ADD)
            bias = _bias(uses, add, layer.output) if add is not None else None
            if bias is not None and tvm_ffi.structural_equal(add.ty, call.ty):
                layer.bias, bias_helper = bias
                layer.output = user
                layer.replaced.add(user)
                if bias_helper is not None and len(uses.users[bias_helper]) == 1:
                    layer.replaced.add(bias_helper)
            user, relu = next_call(layer.output, _RELU)
            if relu is None:
                user, relu = next_call(layer.output, _CLIP)
                relu = relu if relu is not None and _is_relu6(relu) else None
            if relu is not None:
                layer.activation = relu
                layer.output = user
                layer.replaced.add(user)
            layers.append(layer)
    return layers


def _const(array: np.ndarray) -> relax.Expr:
    return relax.const(np.array(array, order="C"))  # (ascontiguousarray makes 0-d 1-d)


def _dequantize(bb: relax.BlockBuilder, data, params: QuantParams, name: str):
    expr = relax.op.dequantize(
        data,
        _const(params.scale),
        _const(params.zero_point),
        axis=params.axis,
        out_dtype="float32",
    )
    return bb.emit(expr, name)


def _quantize(bb: relax.BlockBuilder, data, params: QuantParams, name: str):
    expr = relax.op.quantize(
        data, _const(params.scale), _const(params.zero_point), axis=-1, out_dtype=params.dtype
    )
    return bb.emit(expr, name)


def _int32_bias(bb, layer: Layer, x: QuantParams, w: QuantParams, name: str) -> relax.Expr:
    """The bias as onnxruntime stores it: int32 under a dequantize whose scale is the
    accumulator's (x scale * w scale, as float32), reshaped to the bias's broadcast shape. A bias
    that is not one value per output channel stays float32."""
    channels = layer.weight.shape[layer.weight_axis]
    if layer.bias.size != channels:
        return _const(layer.bias.astype("float32"))
    scale = (np.float32(x.scale) * np.broadcast_to(w.scale, (channels,))).astype("float32")
    info = np.iinfo("int32")
    values = np.clip(np.rint(layer.bias.reshape(-1) / scale.astype("float64")), info.min, info.max)
    params = QuantParams("int32", scale, np.zeros(channels, "int32"), 0)
    bias = _dequantize(bb, _const(values.astype("int32")), params, name)
    if layer.bias.ndim == 1:
        return bias
    return bb.emit(relax.op.reshape(bias, layer.bias.shape), f"{name}_r")


@mutator
class _QDQRewriter(PyExprMutator):
    def __init__(
        self,
        mod: tvm.IRModule,
        layers: list[Layer],
        units: list,
        activations: dict[relax.Var, QuantParams],
        per_channel: bool,
        weight_dtype: str,
        float_users: dict[relax.Var, bool],
    ):
        super().__init__(mod)
        self.layers = {layer.output: layer for layer in layers}
        self.units = {unit.output: unit for unit in units}
        self.values = _Uses(mod["main"]).value
        self.replaced = set().union(
            *(layer.replaced for layer in layers), *(unit.replaced for unit in units)
        ) - set(self.layers)
        self.activations = activations
        self.per_channel = per_channel
        self.weight_dtype = weight_dtype
        self.float_users = float_users
        self.quantized: dict[relax.Var, relax.Var] = {}  # original var -> its quantize (in block)

    def _forget_dataflow_vars(self) -> None:
        # A block's dataflow vars are not visible after it: quantize again in the next block.
        self.quantized = {
            var: q for var, q in self.quantized.items() if not isinstance(q, relax.DataflowVar)
        }

    def visit_dataflow_block_(self, block):
        result = super().visit_dataflow_block_(block)
        self._forget_dataflow_vars()
        return result

    def visit_binding_block_(self, block):
        result = super().visit_binding_block_(block)
        self._forget_dataflow_vars()
        return result

    def visit_var_binding_(self, binding):
        var = binding.var
        if var in self.layers:
            self._emit_layer(self.layers[var])
        elif var in self.units:
            self._emit_unit(self.units[var])
        elif var not in self.replaced:
            super().visit_var_binding_(binding)

    def _quantized_input(self, var: relax.Var) -> relax.Var:
        if var not in self.quantized:
            self.quantized[var] = _quantize(
                self.builder_, self.visit_expr(var), self.activations[var], f"{var.name}_q"
            )
        return self.quantized[var]

    def _emit_layer(self, layer: Layer) -> None:
        bb = self.builder_
        name = layer.output.name
        x_params = self.activations[layer.data]
        x = _dequantize(bb, self._quantized_input(layer.data), x_params, f"{name}_x")
        w_params, w_q = weight_params(
            layer.weight, layer.weight_axis, self.per_channel, self.weight_dtype
        )
        w = _dequantize(bb, _const(w_q), w_params, f"{name}_w")
        if layer.permute_axes is not None:
            w = bb.emit(relax.op.permute_dims(w, layer.permute_axes), f"{name}_wt")
        y = bb.emit(relax.Call(layer.producer.op, [x, w], layer.producer.attrs), f"{name}_acc")
        if layer.bias is not None:
            bias = _int32_bias(bb, layer, x_params, w_params, f"{name}_b")
            y = bb.emit(relax.op.add(y, bias), f"{name}_bias")
        if layer.activation is not None:
            act = layer.activation
            y = bb.emit(relax.Call(act.op, [y, *act.args[1:]], act.attrs), f"{name}_act")
        self._emit_output(layer.output, y)

    def _emit_unit(self, unit) -> None:
        """The unit's bindings on dequantized inputs, then its quantized result."""
        bb = self.builder_
        name = unit.output.name
        replacement: dict[relax.Var, relax.Expr] = {}
        for var in unit.inputs:
            params = self.activations[var]
            replacement[var] = _dequantize(bb, self._quantized_input(var), params, f"{name}_in")

        def substitute(expr):
            if isinstance(expr, relax.Var):
                return replacement[expr] if expr in replacement else self.visit_expr(expr)
            if isinstance(expr, relax.Tuple):
                return relax.Tuple([substitute(field) for field in expr.fields])
            return expr

        for var in unit.bindings:
            value = self.values[var]
            call = relax.Call(value.op, [substitute(arg) for arg in value.args], value.attrs)
            replacement[var] = bb.emit(call, f"{var.name}_f")
        self._emit_output(unit.output, replacement[unit.output])

    def _emit_output(self, output: relax.Var, y: relax.Expr) -> None:
        """quantize(y) with output's parameters; output's float readers get its dequantize."""
        bb = self.builder_
        y_params = self.activations[output]
        y_q = _quantize(bb, y, y_params, f"{output.name}_q")
        self.quantized[output] = y_q
        if self.float_users[output]:
            expr = relax.op.dequantize(
                y_q, _const(y_params.scale), _const(y_params.zero_point), -1, "float32"
            )
            if isinstance(output, relax.DataflowVar) or not bb.current_block_is_dataflow():
                y_float = bb.emit(expr, output.name)
            else:
                y_float = bb.emit_output(expr, output.name)
            self.set_var_remap(output, y_float)


def float_users(func: relax.Function, layers: list[Layer], units: list) -> dict[relax.Var, bool]:
    """Whether each layer or unit output must also be dequantized: it is read by an op that is
    not a quantized layer or unit, by the function's result, or by a quantized consumer that
    cannot see its quantize (one in a later block, when the quantize is a dataflow var)."""
    uses = _Uses(func)
    quantized_reads: dict[relax.Var, set[relax.Var]] = defaultdict(set)  # reader -> inputs
    for layer in layers:
        quantized_reads[layer.producer_var].add(layer.data)
    for unit in units:
        for var in unit.bindings:
            quantized_reads[var].update(unit.inputs)
    result = {}
    for out in [layer.output for layer in layers] + [unit.output for unit in units]:
        block = uses.block[out]

        def reads_quantized(reader, out=out, block=block) -> bool:
            return (
                reader is not None
                and out in quantized_reads.get(reader, ())
                and (not uses.dataflow[block] or uses.block[reader] == block)
            )

        result[out] = not all(reads_quantized(r) for r in uses.users.get(out, []))
    return result


def rewrite(
    mod: tvm.IRModule,
    layers: list[Layer],
    units: list,
    activations: dict[relax.Var, QuantParams],
    *,
    per_channel: bool,
    weight_dtype: str,
) -> tvm.IRModule:
    """``mod`` with ``main``'s layers and glue units (units.py) in QDQ form (activation
    parameters per original var)."""
    func = mod["main"]
    users = float_users(func, layers, units)
    rewriter = _QDQRewriter(mod, layers, units, activations, per_channel, weight_dtype, users)
    new_func = rewriter.visit_expr(func)
    new_mod = tvm.IRModule(dict(mod.functions.items()), attrs=mod.attrs)
    new_mod["main"] = new_func
    return new_mod
