"""Dataflow patterns of the quantized glue ops: what an integer NPU op looks like in QDQ form.

onnxruntime's QDQ models and ``quantize_model`` put ``dequantize -> float op -> quantize`` around
every op they quantize. Each builder here matches one such island whose float op the NPU computes
in integer arithmetic; ``canonicalize_qdq`` (frontend/qdq.py) first gives every island its own
``dequantize`` nodes and turns elementwise islands of one 8-bit input into a ``take`` of a
256-entry table. quantized_rows.py turns these builders into rows of the pattern table.
"""

from __future__ import annotations

from tvm.relax.dpl.pattern import DFPattern, is_const, is_op, is_tuple, wildcard

Built = tuple[DFPattern, dict[str, DFPattern]]


def dequantized(name: str, annotations: dict[str, DFPattern]) -> DFPattern:
    """``dequantize(x, const scale, const zero point)``, annotated as ``name`` (x as input_*)."""
    data = wildcard()
    annotations[f"input_{name}"] = data
    annotations[name] = is_op("relax.dequantize")(data, is_const(), is_const())
    return annotations[name]


def _quantized_output(value: DFPattern, activation: str | None, annotations) -> DFPattern:
    """[relu | clip](value), then ``quantize`` with constant parameters, annotated as root."""
    if activation == "relu":
        value = annotations["activation"] = is_op("relax.nn.relu")(value)
    elif activation == "clip":
        value = annotations["activation"] = is_op("relax.clip")(value, wildcard(), wildcard())
    annotations["root"] = is_op("relax.quantize")(value, is_const(), is_const())
    return annotations["root"]


def requantize(activation: str | None):
    """quantize([relu | clip](dequantize(x))): a rescale, clamped by the activation."""

    def build() -> Built:
        annotations: dict[str, DFPattern] = {}
        root = _quantized_output(dequantized("x_dq", annotations), activation, annotations)
        return root, annotations

    return build


def binary(op: str, activation: str | None):
    """quantize([relu | clip](op(dequantize(a), dequantize(b))))."""

    def build() -> Built:
        annotations: dict[str, DFPattern] = {}
        lhs, rhs = dequantized("lhs_dq", annotations), dequantized("rhs_dq", annotations)
        annotations["op"] = is_op(op)(lhs, rhs)
        return _quantized_output(annotations["op"], activation, annotations), annotations

    return build


def unary(op: str):
    """quantize(op(dequantize(x))) for pooling, mean and softmax."""

    def build() -> Built:
        annotations: dict[str, DFPattern] = {}
        annotations["op"] = is_op(op)(dequantized("x_dq", annotations))
        return _quantized_output(annotations["op"], None, annotations), annotations

    return build


def concat(count: int):
    """quantize(concat((dequantize(x_0), ..., dequantize(x_{count-1}))))."""

    def build() -> Built:
        annotations: dict[str, DFPattern] = {}
        fields = [dequantized(f"dq_{i}", annotations) for i in range(count)]
        annotations["op"] = is_op("relax.concat")(is_tuple(fields))
        return _quantized_output(annotations["op"], None, annotations), annotations

    return build


def lookup_table() -> Built:
    """take(const table, x, axis=0): an activation function tabulated for every 8-bit input."""
    data = wildcard()
    root = is_op("relax.take")(is_const(), data)
    return root, {"input": data, "root": root}


def integer_matmul(with_zero_point: bool):
    """astype(matmul(astype(x_q, int32) [- zero point as int32], astype(w_int8_const, int32)),
    float32): onnxruntime's MatMulInteger and the Cast after it, as TVM imports them
    (frontend/integer_matmul.py gives the weight its int8 form)."""

    def build() -> Built:
        x_q = wildcard()
        annotations: dict[str, DFPattern] = {"input": x_q}
        lhs = annotations["x32"] = is_op("relax.astype")(x_q)
        if with_zero_point:
            # Widened at run time, or a constant the canonicalizer folded to int32.
            zero_point = is_op("relax.astype")(wildcard()) | is_const()
            lhs = is_op("relax.subtract")(lhs, zero_point)
            annotations["zero_point"] = zero_point
        weight = annotations["weight"] = is_const()
        annotations["w32"] = is_op("relax.astype")(weight)
        annotations["matmul"] = is_op("relax.matmul")(lhs, annotations["w32"])
        annotations["root"] = is_op("relax.astype")(annotations["matmul"])
        return annotations["root"], annotations

    return build
