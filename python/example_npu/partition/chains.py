"""Producer chains of the pattern table: conv2d / matmul / dense [+ bias] [+ activation].

The float rows are built here; the quantized chains (quantized_rows.py) share the producer and
bias part (producer_epilogue).
"""

from __future__ import annotations

from collections.abc import Callable

from tvm.relax.dpl.pattern import DFPattern, is_op, wildcard

from .checks import compute
from .row import CallCheck, PatternBuilder, PatternRow

_PRODUCER_OPS = {
    "conv2d": "relax.nn.conv2d",
    "conv2d_transpose": "relax.nn.conv2d_transpose",
    "matmul": "relax.matmul",
    "dense": "relax.matmul",
}
_PRODUCER_CHECKS = {
    "conv2d": compute.check_conv,
    "matmul": compute.check_matmul,
    "dense": compute.check_matmul,
}
_ACTIVATIONS = {
    "relu": ("relax.nn.relu", 0, compute.check_elementwise),
    "relu6": ("relax.clip", 2, compute.check_relu6),
    "gelu": ("relax.nn.gelu", 0, compute.check_elementwise),
}


def producer_epilogue(
    producer: str,
    data: DFPattern,
    weight: DFPattern,
    bias: bool,
    activation: str | None,
    bias_pattern: Callable[[], DFPattern],
    annotations: dict[str, DFPattern],
) -> DFPattern:
    """producer(data, weight) [+ bias_pattern() in either order, maybe reshaped] [+ activation];
    fills the producer / transpose / bias / bias_term / add / activation annotations."""
    rhs = weight
    if producer == "dense":
        rhs = annotations["transpose"] = is_op("relax.permute_dims")(weight)
    root = annotations["producer"] = is_op(_PRODUCER_OPS[producer])(data, rhs)
    if bias:
        bias_value = bias_pattern()
        # The reshape alternative first, so a reshaped bias joins the composite.
        bias_term = is_op("relax.reshape")(bias_value, wildcard()) | bias_value
        annotations["bias"] = bias_value
        annotations["bias_term"] = bias_term
        add = is_op("relax.add")
        root = annotations["add"] = add(root, bias_term) | add(bias_term, root)
    if activation is not None:
        op, extra_args, _ = _ACTIVATIONS[activation]
        extra = [wildcard() for _ in range(extra_args)]  # distinct: clip's bounds differ
        root = annotations["activation"] = is_op(op)(root, *extra)
    return root


def _chain(producer: str, bias: bool, activation: str | None) -> PatternBuilder:
    """producer [+ bias add, either operand order, bias optionally reshaped] [+ activation].

    These are the shapes real models are made of (PyTorch's importer emits conv2d followed by
    add(reshape(bias)) and Linear as matmul(x, permute_dims(w)) + add(bias)); matching the whole
    chain lets the NPU apply bias and activation to the accumulator tile before it leaves L1.
    """

    def build() -> tuple[DFPattern, dict[str, DFPattern]]:
        data, weight = wildcard(), wildcard()
        annotations: dict[str, DFPattern] = {"input": data, "weight": weight}
        root = producer_epilogue(producer, data, weight, bias, activation, wildcard, annotations)
        annotations["root"] = root
        return root, annotations

    return build


def chain_row(producer: str, bias: bool, activation: str | None) -> PatternRow:
    name = producer + ("_bias" if bias else "") + (f"_{activation}" if activation else "")
    call_checks: list[tuple[str, CallCheck]] = [("producer", _PRODUCER_CHECKS[producer])]
    if producer == "dense":
        call_checks.append(("transpose", compute.check_elementwise))
    if bias:
        call_checks.append(("add", compute.check_elementwise))
    if activation is not None:
        call_checks.append(("activation", _ACTIVATIONS[activation][2]))
    if bias or activation:
        name += "_fused"
    region_check = compute.check_bias_keeps_shape if bias else None
    return PatternRow(
        name, _chain(producer, bias, activation), tuple(call_checks), region_check=region_check
    )
