"""The quantized units of ``main`` besides the conv / matmul layers: what gets QDQ around it.

onnxruntime's quantizer puts ``dequantize -> op -> quantize`` around the glue ops between its
quantized layers (pooling, mean, concat, softmax, add, mul, shape ops, activations), so a whole
model runs on integers. ``quantize_model`` does the same, with one refinement: a chain of
elementwise ops that depends on one tensor only (hardswish as PyTorch's importer spells it,
x * sigmoid(x), ...) is one unit with one quantize at its end, which canonicalize_qdq then turns
into a single 256-entry table.

A unit is a run of bindings, re-emitted with each float input read through
``dequantize(quantize(input))`` and the result quantized:

- glue ops: max / avg / adaptive avg pooling, mean, concat, softmax;
- shape ops (reshape, permute_dims, flatten, squeeze, expand_dims); like max pooling their result
  keeps the input's quantization parameters, so the integer op is exact;
- add / multiply of two different tensors, with a following relu or clip(0, 6) absorbed;
- elementwise islands: ops of one float tensor and scalar constants, ending where a value leaves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm
from tvm import relax

from .rewrite import Layer, _Uses

_GLUE = ("nn.max_pool2d", "nn.avg_pool2d", "nn.adaptive_avg_pool2d", "mean", "concat", "nn.softmax")
_SHAPE = ("reshape", "permute_dims", "flatten", "squeeze", "expand_dims")
_SHARES_PARAMS = (*_SHAPE, "nn.max_pool2d")
_BINARY_GLUE = ("add", "multiply")
_UNARY = (
    "nn.relu",
    "clip",
    "sigmoid",
    "tanh",
    "exp",
    "negative",
    "erf",
    "nn.gelu",
    "nn.gelu_tanh",
    "nn.silu",
)
_BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum")


@dataclass
class Unit:
    """Bindings re-emitted together between dequantized inputs and one quantized output."""

    output: relax.Var
    bindings: list[relax.Var]  # program order; the output last
    inputs: list[relax.Var]  # float tensors read from outside the unit
    shares_input_params: bool = False
    replaced: set[relax.Var] = field(default_factory=set)


def _op_name(value) -> str:
    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
        return value.op.name.removeprefix("relax.")
    return ""


def _is_float_tensor(expr) -> bool:
    ty = expr.ty
    return isinstance(ty, relax.TensorType) and str(ty.dtype) == "float32"


def _is_scalar_constant(expr) -> bool:
    if not isinstance(expr, tvm.ir.expr.Constant):
        return False
    value = expr.value
    return not hasattr(value, "numpy") or value.numpy().size == 1


def _tensor_args(value: relax.Call) -> list:
    """The tensor operands (tuple fields included); shapes and literals are attributes here."""
    args = []
    for arg in value.args:
        args.extend(arg.fields if isinstance(arg, relax.Tuple) else [arg])
    return [arg for arg in args if isinstance(arg.ty, relax.TensorType)]


def _is_relu_like(value) -> bool:
    name = _op_name(value)
    if name == "nn.relu":
        return True
    bounds = [getattr(arg, "value", None) for arg in value.args[1:]] if name == "clip" else []
    return name == "clip" and bounds in ([0, 6], [0.0, 6.0])


def find_units(func: relax.Function, layers: list[Layer]) -> list[Unit]:
    """The glue units and elementwise islands of ``func`` outside ``layers``, in program order."""
    uses = _Uses(func)
    taken = set().union(*(layer.replaced for layer in layers), {layer.output for layer in layers})
    root: dict[relax.Var, relax.Var] = {}  # island member -> the one tensor it depends on
    units: list[Unit] = []
    for block in func.body.blocks:
        for binding in block.bindings:
            var, value = binding.var, getattr(binding, "value", None)
            name = _op_name(value)
            if var in taken or not name or not _is_float_tensor(var):
                continue
            tensors = [a for a in _tensor_args(value) if not _is_scalar_constant(a)]
            if not all(isinstance(a, relax.Var) and _is_float_tensor(a) for a in tensors):
                continue
            sources = {root.get(a, a) for a in tensors}
            if name in _UNARY + _BINARY and len(sources) == 1:
                (source,) = sources
                if uses.block.get(source) in (None, uses.block[var]):  # a parameter or this block
                    root[var] = source
                    continue
            if name in _GLUE + _SHAPE or (name in _BINARY_GLUE and len(tensors) == 2):
                unit = Unit(var, [var], list(dict.fromkeys(tensors)), name in _SHARES_PARAMS)
                if name in _BINARY_GLUE:
                    _absorb_activation(unit, uses)
                units.append(unit)
                taken.update(unit.bindings)
    units.extend(_islands(uses, root, taken))
    order = {binding.var: i for i, b in enumerate(func.body.blocks) for binding in b.bindings}
    units.sort(key=lambda unit: order[unit.output])
    for unit in units:
        unit.replaced = set(unit.bindings) - {unit.output}
    return units


def _absorb_activation(unit: Unit, uses: _Uses) -> None:
    """add / multiply followed by its only user relu or clip(0, 6): one unit, as qnn_add_relu."""
    user = uses.single_user(unit.output)
    if user is not None and uses.block.get(user) == uses.block[unit.output]:
        if _is_relu_like(uses.value.get(user)):
            unit.bindings.append(user)
            unit.output = user


def _islands(uses: _Uses, root: dict, taken: set) -> list[Unit]:
    """One unit per island whose values leave it through one member only."""
    members: dict[relax.Var, list[relax.Var]] = {}
    for var, source in root.items():
        if var not in taken:
            members.setdefault(source, []).append(var)
    units = []
    for source, island in members.items():
        inside = set(island)
        leaving = [v for v in island if any(u not in inside for u in uses.users.get(v, []))]
        if len(leaving) != 1 or leaving[0] != island[-1]:
            continue  # values leave at several points: the island stays float
        units.append(Unit(island[-1], island, [source]))
        taken.update(island)
    return units
