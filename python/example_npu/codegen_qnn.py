"""Codegen of quantized composites: a QDQ chain becomes one integer NPU node.

``dequantize(x_q) -> conv2d / matmul (+ bias) (+ relu / relu6) -> quantize`` with a constant
int8 weight under ``dequantize`` is what ONNX QDQ models and ``quantize_model`` produce. The
pattern checks guarantee the shape of the chain; here its scales, zero points and bias are read
from the constants and written as attributes of a ``qnn.conv2d`` / ``qnn.matmul`` node whose
inputs are the int8/int16 activation and the int8 weight (src/kernels/quantize.h gives the
integer arithmetic the runtime performs).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tvm import relax

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


def _scalar(builder: Any, expr: Any, env: dict[Any, Any]) -> float:
    return float(_values(builder, expr, env).reshape(-1)[0])


def _values(builder: Any, expr: Any, env: dict[Any, Any]) -> np.ndarray:
    constant = builder.constant_of(expr, env)
    if constant is None:
        raise ValueError(f"{builder.symbol}: quantization parameter is not a constant")
    return constant.value.numpy()


def lower_qnn_composite(
    builder: Any, func: relax.Function, env: dict[Any, Any], composite: str
) -> int:
    """Emits the qnn node for a quantized composite and returns its node id."""
    from .codegen import _attrs_to_dict, _tensor_type  # imported here: codegen imports us

    calls = _calls_by_op(func)
    x_dq, w_dq = sorted(
        calls["dequantize"], key=lambda c: builder.constant_of(c.args[0], env) is not None
    )
    quantize = calls["quantize"][0]
    conv = calls.get("nn.conv2d", [None])[0]
    producer = conv if conv is not None else calls["matmul"][0]
    weight_scales = _values(builder, w_dq.args[1], env).astype("float64").reshape(-1)
    attrs: dict[str, Any] = {}
    if conv is not None:
        attrs = {
            k: v for k, v in _attrs_to_dict(conv.attrs).items() if k not in _FLOAT_ATTRS_DROPPED
        }
    attrs.update(
        input_scale=_scalar(builder, x_dq.args[1], env),
        input_zero_point=int(_scalar(builder, x_dq.args[2], env)),
        weight_scales=[float(s) for s in weight_scales],
        output_scale=_scalar(builder, quantize.args[1], env),
        output_zero_point=int(_scalar(builder, quantize.args[2], env)),
        activation="relu" if "nn.relu" in calls else "relu6" if "clip" in calls else "none",
    )
    if "add" in calls:
        add = calls["add"][0]
        bias_expr = next(a for a in add.args if not _is_bound_to(func, a, producer))
        bias_expr = _unwrap_reshape(func, bias_expr)
        attrs["bias"] = [float(b) for b in _values(builder, bias_expr, env).reshape(-1)]
    activation_input = builder.eval_tensor(x_dq.args[0], env, composite)
    weight_input = builder.eval_tensor(w_dq.args[0], env, composite)
    if "permute_dims" in calls:  # the Linear form: the int8 weight is read transposed
        axes = calls["permute_dims"][0].attrs.axes
        weight_shape, weight_dtype = _tensor_type(w_dq.args[0].ty, "weight")
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
    shape, dtype = _tensor_type(quantize.ty, "quantized result")
    return builder.add_node(
        {
            "op": "qnn.conv2d" if conv is not None else "qnn.matmul",
            "name": f"q{'conv2d' if conv is not None else 'matmul'}_{len(builder.nodes)}",
            "inputs": [activation_input, weight_input],
            "shape": shape,
            "dtype": dtype,
            "attrs": attrs,
            "composite": composite,
        }
    )


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
