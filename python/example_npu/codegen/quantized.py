"""Codegen of quantized composites: a QDQ chain or island becomes one integer NPU node.

``dequantize(x_q) -> conv2d / conv2d_transpose / matmul (+ bias) (+ relu / clip) -> quantize`` with
a constant int8 weight under ``dequantize`` is what ONNX QDQ models and ``quantize_model`` produce;
so are the islands ``dequantize -> glue op -> quantize`` (partition/quantized_patterns.py) and the
lookup tables that ``canonicalize_qdq`` makes. The pattern checks guarantee the shape of each; here
its scales, zero points, bias and table are read from the constants and written as attributes of a
``qnn.*`` node whose inputs are the integer tensors (src/kernels/quantize.h and quantized_ops.h
give the integer arithmetic the runtime performs).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tvm import relax

from ..partition.checks.quantized import mean_pool_layout
from .attrs import CodegenError, attrs_to_dict, tensor_type

QNN_COMPOSITE_PREFIX = "example_npu.qnn_"

_FLOAT_ATTRS_DROPPED = ("out_dtype",)


def _calls_by_op(func: relax.Function) -> dict[str, list[relax.Call]]:
    calls: dict[str, list[relax.Call]] = {}
    for block in func.body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, relax.Call) and hasattr(value.op, "name"):
                calls.setdefault(value.op.name.removeprefix("relax."), []).append(value)
    return calls


# An attribute value the NPU reads from a call argument at run time, {"arg": <input node id>}:
# FuseOpsByPattern(bind_constants=False) passes the quantization constants as arguments
# (src/graph/runtime_params.h binds them).
RuntimeParam = dict


def _values(builder: Any, expr: Any, env: dict[Any, Any]) -> np.ndarray | RuntimeParam:
    constant = builder.constant_of(expr, env)
    if constant is not None:
        return constant.value.numpy()
    return {"arg": builder.eval_tensor(expr, env, "")}


def _floats(builder: Any, expr: Any, env: dict[Any, Any]) -> list[float] | RuntimeParam:
    values = _values(builder, expr, env)
    return values if isinstance(values, dict) else [float(v) for v in values.reshape(-1)]


def _ints(builder: Any, expr: Any, env: dict[Any, Any]) -> list[int] | RuntimeParam:
    values = _values(builder, expr, env)
    return values if isinstance(values, dict) else [int(v) for v in values.reshape(-1)]


def _scalar(builder: Any, expr: Any, env: dict[Any, Any]) -> float | RuntimeParam:
    values = _floats(builder, expr, env)
    return values if isinstance(values, dict) else values[0]


def _scalar_int(builder: Any, expr: Any, env: dict[Any, Any]) -> int | RuntimeParam:
    values = _ints(builder, expr, env)
    return values if isinstance(values, dict) else values[0]


def _clamp(calls: dict[str, list[relax.Call]]) -> dict[str, float]:
    """The real bounds of a fused relu / clip before the output quantize."""
    if "nn.relu" in calls:
        return {"min_value": 0.0}
    if "clip" in calls:
        low, high = (float(arg.value) for arg in calls["clip"][0].args[1:])
        return {"min_value": low, "max_value": high}
    return {}


def _quant_params(builder: Any, call: relax.Call, env: dict[Any, Any], prefix: str) -> dict:
    return {
        f"{prefix}_scale": _scalar(builder, call.args[1], env),
        f"{prefix}_zero_point": _scalar_int(builder, call.args[2], env),
    }


def quantization_attrs(builder: Any, call: relax.Call, env: dict[Any, Any]) -> dict:
    """scale / zero_point of a standalone quantize or dequantize (constants or call arguments)."""
    params = _quant_params(builder, call, env, "x")
    return {"scale": params["x_scale"], "zero_point": params["x_zero_point"]}


def lower_qnn_composite(
    builder: Any, func: relax.Function, env: dict[Any, Any], composite: str
) -> int:
    """Emits the qnn node for a quantized composite and returns its node id."""
    name = composite.removeprefix(QNN_COMPOSITE_PREFIX)
    if name.startswith("integer_matmul"):
        return _lower_integer_matmul(builder, func, env, composite)
    if not name.startswith(("conv2d", "matmul", "dense")):
        return _lower_island(builder, func, env, composite, name)

    calls = _calls_by_op(func)
    conv_op = next((op for op in ("nn.conv2d", "nn.conv2d_transpose") if op in calls), None)
    producer_call = calls[conv_op or "matmul"][0]
    x_dq = _binding_value(func, producer_call.args[0])
    weight_arg = producer_call.args[1]
    if "permute_dims" in calls:
        weight_arg = _binding_value(func, weight_arg).args[0]
    w_dq = _binding_value(func, weight_arg)
    quantize = calls["quantize"][0]
    conv = producer_call if conv_op is not None else None
    producer = producer_call
    attrs: dict[str, Any] = {}
    if conv is not None:
        attrs = {
            k: v for k, v in attrs_to_dict(conv.attrs).items() if k not in _FLOAT_ATTRS_DROPPED
        }
    attrs.update(
        **_quant_params(builder, x_dq, env, "input"),
        weight_scales=_floats(builder, w_dq.args[1], env),
        **_quant_params(builder, quantize, env, "output"),
        **_clamp(calls),
    )
    if "add" in calls:
        add = calls["add"][0]
        bias_expr = next(a for a in add.args if not _is_bound_to(func, a, producer))
        bias_expr = _unwrap_reshape(func, bias_expr)
        bias_dq = _binding_value(func, bias_expr) if isinstance(bias_expr, relax.Var) else None
        if isinstance(bias_dq, relax.Call):  # onnxruntime's dequantize(int32 constant)
            attrs["int32_bias"] = _ints(builder, bias_dq.args[0], env)
            attrs["int32_bias_scales"] = _floats(builder, bias_dq.args[1], env)
        else:
            attrs["bias"] = _floats(builder, bias_expr, env)
    activation_input = builder.eval_tensor(x_dq.args[0], env, composite)
    weight_input = builder.eval_tensor(w_dq.args[0], env, composite)
    if "permute_dims" in calls:  # the Linear form: the int8 weight is read transposed
        axes = calls["permute_dims"][0].attrs.axes
        weight_shape, weight_dtype = tensor_type(w_dq.args[0].ty, "weight")
        weight_input = builder.add_node(
            {
                "op": "permute_dims",
                "name": f"weight_t_{weight_input}",
                "inputs": [weight_input],
                "shape": weight_shape[::-1],
                "dtype": weight_dtype,
                "attrs": {"axes": None if axes is None else [int(a) for a in axes]},
                "composite": composite,
            }
        )
    shape, dtype = tensor_type(quantize.ty, "quantized result")
    op = conv_op.removeprefix("nn.") if conv_op is not None else "matmul"
    return builder.add_node(
        {
            "op": f"qnn.{op}",
            "name": f"q{op}_{len(builder.nodes)}",
            "inputs": [activation_input, weight_input],
            "shape": shape,
            "dtype": dtype,
            "attrs": attrs,
            "composite": composite,
        }
    )


def _lower_integer_matmul(
    builder: Any, func: relax.Function, env: dict[Any, Any], composite: str
) -> int:
    """MatMulInteger and its float32 cast (partition/checks/integer_matmul.py): a qnn.matmul
    with a float32 result, the exact integer sum, its zero point a constant or an input node."""
    calls = _calls_by_op(func)
    matmul = calls["matmul"][0]
    lhs = _binding_value(func, matmul.args[0])
    attrs: dict[str, Any] = {"input_zero_point": 0}
    if lhs.op.name == "relax.subtract":
        widened = lhs.args[1]
        cast = _binding_value(func, widened) if isinstance(widened, relax.Var) else None
        if cast is None or builder.constant_of(cast.args[0], env) is not None:
            # A folded int32 constant (a call argument under bind_constants=False), or the cast of
            # a constant: a number, bound once.
            zero_point = widened if cast is None else cast.args[0]
            attrs["input_zero_point"] = _scalar_int(builder, zero_point, env)
        else:
            # Computed per call (DynamicQuantizeLinear): the NPU reads it from that input.
            node = builder.eval_tensor(cast.args[0], env, composite)
            if builder.nodes[node]["op"] != "input":
                raise CodegenError(
                    f"{composite}: the zero point must arrive as an argument of the NPU function"
                )
            attrs = {"input_zero_point_node": node}
        lhs = _binding_value(func, lhs.args[0])
    weight = _binding_value(func, matmul.args[1]).args[0]
    result = next(call for call in calls["astype"] if _is_bound_to(func, func.body.body, call))
    inputs = [
        builder.eval_tensor(lhs.args[0], env, composite),
        builder.eval_tensor(weight, env, composite),
    ]
    return _node(builder, "qnn.matmul", inputs, result, attrs, composite)


def _binding_value(func: relax.Function, var: relax.Var) -> Any:
    for block in func.body.blocks:
        for binding in block.bindings:
            if binding.var.same_as(var):
                return binding.value
    return None


def _is_bound_to(func: relax.Function, var: relax.Var, call: relax.Call) -> bool:
    value = _binding_value(func, var)
    return value is not None and value.same_as(call)


def _unwrap_reshape(func: relax.Function, expr: Any) -> Any:
    """The constant under a ``reshape(bias, shape)`` binding, or expr itself."""
    if isinstance(expr, relax.Var):
        value = _binding_value(func, expr)
        if isinstance(value, relax.Call) and value.op.name == "relax.reshape":
            return value.args[0]
    return expr


def _node(
    builder: Any, op: str, inputs: list[int], result: Any, attrs: dict, composite: str
) -> int:

    shape, dtype = tensor_type(result.ty, f"{op} result")
    return builder.add_node(
        {
            "op": op,
            "name": f"{op.split('.')[-1]}_{len(builder.nodes)}",
            "inputs": inputs,
            "shape": shape,
            "dtype": dtype,
            "attrs": attrs,
            "composite": composite,
        }
    )


def _lookup_table(builder: Any, take: relax.Call, env: dict[Any, Any]) -> dict:
    """The table as take indexes it (x mod 256) and the input dtype's minimum; its entries are
    integers, or float32 values for a float table."""
    offset = -128 if str(take.args[1].ty.dtype) == "int8" else 0
    values = _floats if str(take.ty.dtype) == "float32" else _ints
    return {"table": values(builder, take.args[0], env), "index_offset": offset}


def _lower_island(
    builder: Any, func: relax.Function, env: dict[Any, Any], composite: str, name: str
) -> int:
    """quantize(glue op(dequantize(...))) islands and lookup tables (quantized_patterns.py)."""

    calls = _calls_by_op(func)
    if name == "lut":
        take = calls["take"][0]
        inputs = [builder.eval_tensor(take.args[1], env, composite)]
        return _node(builder, "qnn.lut", inputs, take, _lookup_table(builder, take, env), composite)
    quantize = calls["quantize"][0]
    attrs = {**_quant_params(builder, quantize, env, "output"), **_clamp(calls)}
    # The composite name without its activation / input-count suffix.
    op_name = next(
        (
            prefix
            for prefix in ("requantize", "add", "multiply", "concat")
            if name.startswith(prefix)
        ),
        name,
    )
    glue = None
    if name.startswith("requantize"):
        (dequantized,) = calls["dequantize"]
        attrs.update(_quant_params(builder, dequantized, env, "input"))
        operands = [dequantized]
    else:
        glue = next(
            calls[op][0] for op in calls if op not in ("dequantize", "quantize", "nn.relu", "clip")
        )
        fields = glue.args[0].fields if name.startswith("concat") else glue.args
        fields = [f for f in fields if isinstance(f, relax.Var)]
        operands = [_binding_value(func, field) for field in fields]
    if op_name in ("add", "multiply"):
        attrs.update(_quant_params(builder, operands[0], env, "lhs"))
        attrs.update(_quant_params(builder, operands[1], env, "rhs"))
    elif op_name == "activation_matmul":  # b, a run-time int8 tensor, is the matmul's weight
        op_name = "matmul"
        attrs.update(_quant_params(builder, operands[0], env, "input"))
        attrs["weight_scales"] = _floats(builder, operands[1].args[1], env)
        attrs["weight_zero_point"] = _scalar_int(builder, operands[1].args[2], env)
    elif op_name == "concat":
        attrs["axis"] = int(glue.attrs.axis)
        attrs["input_scales"] = [_scalar(builder, d.args[1], env) for d in operands]
        attrs["input_zero_points"] = [_scalar_int(builder, d.args[2], env) for d in operands]
    elif glue is not None:
        attrs.update(_quant_params(builder, operands[0], env, "input"))
        if name == "softmax":
            attrs["axis"] = int(glue.attrs.axis)
        elif name in ("max_pool2d", "avg_pool2d"):
            attrs.update({k: v for k, v in attrs_to_dict(glue.attrs).items() if k != "out_layout"})
    inputs = [builder.eval_tensor(d.args[0], env, composite) for d in operands]
    if name == "mean":
        return _lower_mean(
            builder, glue, quantize, inputs, attrs, composite, mean_pool_layout(glue)
        )
    return _node(builder, f"qnn.{op_name}", inputs, quantize, attrs, composite)


def _lower_mean(builder, mean, quantize, inputs, attrs, composite, layout) -> int:
    """Global average pooling: an average pool whose window is the whole plane (+ a reshape
    view when the mean drops the reduced axes)."""
    in_shape = [int(d) for d in mean.args[0].ty.shape]
    plane = in_shape[2:4] if layout == "NCHW" else in_shape[1:3]
    attrs.update(
        tflite_kernel="MEAN",  # TFLite's MEAN rescales the sum (read with rounding="tflite")
        pool_size=plane,
        strides=[1, 1],
        dilation=[1, 1],
        padding=[0, 0, 0, 0],
        ceil_mode=False,
        count_include_pad=False,
        layout=layout,
    )
    pooled_shape = list(in_shape)
    for axis in (2, 3) if layout == "NCHW" else (1, 2):
        pooled_shape[axis] = 1
    dtype = str(quantize.ty.dtype)
    pooled = builder.add_node(
        {
            "op": "qnn.avg_pool2d",
            "name": f"avg_pool2d_{len(builder.nodes)}",
            "inputs": inputs,
            "shape": pooled_shape,
            "dtype": dtype,
            "attrs": attrs,
            "composite": composite,
        }
    )
    if bool(mean.attrs.keepdims):
        return pooled
    return _node(builder, "reshape", [pooled], quantize, {}, composite)
