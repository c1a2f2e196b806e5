"""TFLite flatbuffers (``.tflite``) -> Relax through TVM's TFLite frontend.

The file is parsed by the ``tflite`` package (flatbuffer accessors only: nothing in the file is
executed, and only the file itself is read). Two gaps of TVM 0.27's importer are closed here, by
a subclass of its operator converter, so the imported program computes what TFLite computes:

* ``FULLY_CONNECTED`` with ``keep_num_dims=False`` flattens its input to 2-D, so its output is
  ``(rows, units)``; TVM's converter keeps the input's rank (``(1, 1, 1, 12)`` for ``(1, 12)``).
* An open batch dimension (Keras' default, ``shape_signature`` -1) makes the converter emit
  ``SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE`` to rebuild ``(batch, -1)``, and TVM refuses
  ``SHAPE`` of a quantized tensor. Here the batch is set to 1 unless ``--input`` gives it (as
  Arm's Vela does); ``SHAPE`` only reads that static shape, and a ``RESHAPE`` whose target is
  computed at run time takes the output's declared signature, its one open dimension inferred.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tvm import relax

from .canonicalize import ROUNDING_ATTR
from .reader_common import (
    Dims,
    LoadedModel,
    ModelFileError,
    first_line,
    loaded_model,
    require_module,
    resolve_shapes,
)

# The flatbuffer file identifier of TFLite models (bytes 4..8).
_IDENTIFIER = b"TFL3"


# Quantized ops TVM's converter refuses although its lowering is already TFLite's: SHAPE reads a
# tensor's (static) shape, never its values; PAD fills with the input's zero point (TFLite
# requires the output's quantization to be the input's, and the converter checks it);
# RESIZE_NEAREST_NEIGHBOR copies integers, as TFLite's int8 kernel does.
_MOVES_INTEGERS = frozenset({"SHAPE", "PAD", "PADV2", "RESIZE_NEAREST_NEIGHBOR"})


def _converter_class() -> type:
    """TVM's TFLite operator converter with the two corrections of the module docstring."""
    from tflite.FullyConnectedOptions import FullyConnectedOptions
    from tvm.relax.frontend.tflite.tflite_frontend import OperatorConverter

    class StaticShapeConverter(OperatorConverter):
        _SUPPORTED_QUANTIZED_OPS = OperatorConverter._SUPPORTED_QUANTIZED_OPS | _MOVES_INTEGERS

        def convert_fully_connected(self, op: Any) -> relax.Expr:
            out = super().convert_fully_connected(op)
            options = FullyConnectedOptions()
            table = op.BuiltinOptions()
            options.Init(table.Bytes, table.Pos)
            if options.KeepNumDims():
                return out
            data, weight = self.get_input_tensors(op)[:2]
            units, depth = (int(d) for d in self.get_tensor_shape(weight))
            shape = [int(d) for d in self._infer_shape(self.get_tensor_expr(data))]
            if len(shape) == 2:
                return out
            return relax.op.reshape(out, [math.prod(shape) // depth, units])

        def convert_reshape(self, op: Any) -> relax.Expr:
            tensors = self.get_input_tensors(op)
            if len(tensors) != 2 or not self.has_expr(tensors[1].tensor_idx):
                return super().convert_reshape(op)
            # The target shape is computed at run time: use the declared output signature.
            (output,) = self.get_output_tensors(op)
            dims = [int(d) for d in _signature(output.tensor)]
            if dims.count(-1) > 1:
                raise ModelFileError(
                    f"RESHAPE to {output.tensor.Name().decode(errors='replace')!r} has more "
                    "than one open dimension"
                )
            return relax.op.reshape(self.get_tensor_expr(tensors[0]), dims)

    return StaticShapeConverter


def _signature(tensor: Any) -> list[int]:
    """A tensor's declared dimensions, -1 where open (shape_signature when the file has one)."""
    if tensor.ShapeSignatureLength() > 0:
        return [int(d) for d in tensor.ShapeSignatureAsNumpy()]
    return [int(d) for d in tensor.ShapeAsNumpy()] if tensor.ShapeLength() > 0 else []


def _declared_inputs(model: Any) -> tuple[dict[str, Dims], list[str]]:
    """The first subgraph's inputs (name -> dims, None where open) and output names."""
    if model.SubgraphsLength() < 1:
        raise ValueError("the model has no subgraph")
    graph = model.Subgraphs(0)
    declared: dict[str, Dims] = {}
    for i in range(graph.InputsLength()):
        tensor = graph.Tensors(graph.Inputs(i))
        dims = _signature(tensor)
        declared[tensor.Name().decode()] = [None if d < 0 else d for d in dims]
    outputs = [
        graph.Tensors(graph.Outputs(i)).Name().decode() for i in range(graph.OutputsLength())
    ]
    return declared, outputs


def _batch_one(declared: dict[str, Dims], given: dict[str, Sequence[int]]) -> dict:
    """``given`` plus batch 1 for inputs not given whose only open dimension is the batch."""
    shapes = dict(given)
    for name, dims in declared.items():
        if name not in shapes and dims and dims[0] is None and None not in dims[1:]:
            shapes[name] = [1, *dims[1:]]
    return shapes


def read_tflite(
    path: Path, given: dict[str, Sequence[int]], trust_model_file: bool = False
) -> LoadedModel:
    """A flatbuffer holds no code, so ``trust_model_file`` changes nothing here."""
    tflite = require_module("tflite", ".tflite files", "pip install 'example-npu[tflite]'")
    from tvm.relax.frontend.tflite import from_tflite

    data = path.read_bytes()
    if len(data) < 8 or data[4:8] != _IDENTIFIER:
        raise ModelFileError(f"{path} is not a TFLite model (no {_IDENTIFIER.decode()} identifier)")
    try:
        model = tflite.Model.GetRootAsModel(data, 0)
        declared, outputs = _declared_inputs(model)
    except Exception as error:  # a corrupt flatbuffer: struct.error, IndexError, ...
        raise ModelFileError(f"{path} is not a valid TFLite model: {first_line(error)}") from error
    shapes = resolve_shapes(path, declared, _batch_one(declared, given))
    try:
        mod = from_tflite(
            model,
            shape_dict={name: list(shape) for name, shape in shapes.items()},
            op_converter=_converter_class(),
        )
    except Exception as error:
        raise ModelFileError(
            f"TVM's TFLite importer cannot convert {path.name}: {first_line(error)}"
        ) from error
    mod = relax.transform.DeadCodeElimination(["main"])(mod)
    # The model's answer is what TFLite's integer kernels compute: the NPU follows them.
    mod = mod.with_attr(ROUNDING_ATTR, "tflite")
    return loaded_model(path, mod, list(declared), outputs)
