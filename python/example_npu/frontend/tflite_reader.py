"""TFLite flatbuffers (``.tflite``) -> Relax through TVM's TFLite frontend.

The file is parsed by the ``tflite`` package (flatbuffer accessors only: nothing in the file is
executed, and only the file itself is read). Gaps of TVM 0.27's importer are closed here, by a
subclass of its operator converter, so the imported program computes what TFLite computes:

* ``FULLY_CONNECTED`` with ``keep_num_dims=False`` flattens its input to 2-D, so its output is
  ``(rows, units)``; TVM's converter keeps the input's rank (``(1, 1, 1, 12)`` for ``(1, 12)``).
* An open batch dimension (Keras' default, ``shape_signature`` -1) makes the converter emit
  ``SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE`` to rebuild ``(batch, -1)``, and TVM refuses
  ``SHAPE`` of a quantized tensor. Here the batch is set to 1 unless ``--input`` gives it (as
  Arm's Vela does); ``SHAPE`` becomes that static shape, a constant, and a ``RESHAPE`` whose
  target is computed from it (Keras' ``Dense`` on a 3-D tensor: ``SHAPE -> GATHER ->
  REDUCE_PROD -> PACK``) takes the value TVM computes for that target; a target that still
  depends on run-time values takes the output's declared signature, its one open dimension
  inferred.
* Other open dimensions (height, width) take the sizes ``--input`` gives: TVM's converters
  read a tensor's shape from the file, whose open dimensions hold placeholders (1), so the
  converter here answers with the shape of the tensor's Relax value (SAME padding, reshapes).
* Quantized ops whose lowering already copies the integers as TFLite does are let through
  (``_MOVES_INTEGERS``); ``GATHER``'s constant indices are checked at import, its run-time
  indices into int8 rows by the NPU's row gather at run time (see ``convert_gather``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tvm import relax

from ..relax_types import static_shape
from .canonicalize import ROUNDING_ATTR
from .constant_fold import evaluate
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
# RESIZE_NEAREST_NEIGHBOR and the data movement ops (SQUEEZE and EXPAND_DIMS as reshapes,
# DEPTH_TO_SPACE and SPACE_TO_DEPTH as a
# reshape -> transpose -> reshape, REVERSE_V2 as flips) copy integers, as TFLite's int8 kernels do
# (each output reinterpreted with its own quantization by whatever reads it; PACK's converter
# checks that the parameters agree, as TFLite's kernel requires).
_MOVES_INTEGERS = frozenset(
    {
        "SHAPE",
        "PAD",
        "PADV2",
        "RESIZE_NEAREST_NEIGHBOR",
        "TRANSPOSE",
        "TILE",
        "SLICE",
        "STRIDED_SLICE",
        "SPLIT",
        "SPLIT_V",
        "PACK",
        "UNPACK",
        "GATHER",
        "DEPTH_TO_SPACE",
        "SPACE_TO_DEPTH",
        "REVERSE_V2",
        "SQUEEZE",
        "EXPAND_DIMS",
    }
)


def _converter_class() -> type:
    """TVM's TFLite operator converter with the corrections of the module docstring."""
    from tflite.FullyConnectedOptions import FullyConnectedOptions
    from tvm.relax.frontend.tflite.tflite_frontend import OperatorConverter

    class StaticShapeConverter(OperatorConverter):
        _SUPPORTED_QUANTIZED_OPS = OperatorConverter._SUPPORTED_QUANTIZED_OPS | _MOVES_INTEGERS

        def get_tensor_shape(self, tensor_wrapper: Any) -> np.ndarray:
            """The shape of the tensor's Relax value where it has one, else the file's.

            TVM's converters read the file's ``shape``, whose open dimensions (-1 in the
            signature) hold placeholders (1): with the given sizes, a SAME padding computed
            from them is silently wrong and a reshape or DEPTH_TO_SPACE built from them fails.
            """
            if self.has_expr(tensor_wrapper.tensor_idx):
                value = self.get_expr(tensor_wrapper.tensor_idx)
                shape = static_shape(self.bb.normalize(value).ty)
                if shape is not None and len(shape) == tensor_wrapper.tensor.ShapeLength():
                    return np.array(shape, "int32")
            return super().get_tensor_shape(tensor_wrapper)

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

        def convert_gather(self, op: Any) -> relax.Expr:
            """TFLite's GATHER with its indices checked: TVM's converter lowers it to
            ``take(mode="fast")``, which reads out of bounds for a bad index, its check of
            constant indices lets ``index == dim`` through (and loops over every output
            element), and it ignores ``batch_dims``. Constant indices are checked here,
            run-time ones into int8 rows by the NPU (``_gather_rows``)."""
            from tflite.GatherOptions import GatherOptions

            data, indices = self.get_input_tensors(op)
            options = GatherOptions()
            table = op.BuiltinOptions()
            options.Init(table.Bytes, table.Pos)
            name = _tensor_name(self.get_output_tensors(op)[0])
            if options.BatchDims() != 0:
                raise ModelFileError(f"GATHER {name!r}: batch_dims is not supported")
            run_time = self.has_expr(indices.tensor_idx)
            if run_time and not data.qnn_params:
                return super().convert_gather(op)
            data_expr = self.get_tensor_expr(data)
            dims = static_shape(self.bb.normalize(data_expr).ty) or []
            axis = options.Axis() + len(dims) if options.Axis() < 0 else options.Axis()
            if run_time:
                return self._gather_rows(data_expr, dims, indices, axis, name)
            values = np.asarray(self.get_tensor_value(indices))
            if not 0 <= axis < len(dims) or np.any((values < 0) | (values >= dims[axis])):
                raise ModelFileError(f"GATHER {name!r}: axis or indices out of bounds")
            indices_expr = relax.const(values, str(values.dtype))
            return relax.op.take(data_expr, indices_expr, axis, mode="fast")

        def _gather_rows(
            self, data: relax.Expr, dims: list[int], indices: Any, axis: int, name: str
        ) -> relax.Expr:
            """GATHER of int8 rows (axis 0) by run-time indices: a ``take`` the NPU runs as its
            row gather, which checks every id against the rows (a ValueError at run time where
            TFLite's kernel fails). The ids go in as they are, so the negative-id fix-up
            Keras' Embedding puts before them joins the gather's pattern. Only what the row
            gather's check takes is emitted (a take left on the CPU would read out of bounds
            for a bad id)."""
            ids = self.get_expr(indices.tensor_idx)
            ids_dtype = self.bb.normalize(ids).ty.dtype
            if axis != 0 or ids_dtype not in ("int32", "int64") or not dims or 0 in dims:
                raise ModelFileError(
                    f"GATHER {name!r}: run-time indices into a quantized tensor gather rows of "
                    f"axis 0 by int32 / int64 ids only (axis {axis}, {ids_dtype} ids)"
                )
            return relax.op.take(data, ids, axis=0, mode="fast")

        def _axes_operand(self, op: Any, kind: str) -> tuple[relax.Expr, int, list[int], str]:
            """(data, its rank, the constant axes, the output's name) of an op whose second
            input names axes; run-time axes are a ModelFileError."""
            data, axes = self.get_input_tensors(op)
            name = _tensor_name(self.get_output_tensors(op)[0])
            if self.has_expr(axes.tensor_idx):
                raise ModelFileError(f"{kind} {name!r}: run-time axes are not supported")
            data_expr = self.get_tensor_expr(data)
            rank = len(static_shape(self.bb.normalize(data_expr).ty) or [])
            values = [int(a) for a in np.asarray(self.get_tensor_value(axes)).reshape(-1)]
            return data_expr, rank, values, name

        def convert_reverse_v2(self, op: Any) -> relax.Expr:
            """REVERSE_V2 over each of its (constant) axes in turn; TVM's converter takes one
            axis only, TFLite's kernel any contiguous run of them."""
            data, rank, values, name = self._axes_operand(op, "REVERSE_V2")
            normalized = sorted({a + rank if a < 0 else a for a in values})
            if not normalized or any(not 0 <= a < rank for a in normalized):
                raise ModelFileError(f"REVERSE_V2 {name!r}: axes {values} out of bounds")
            for axis in normalized:
                data = relax.op.flip(data, axis)
            return data

        def convert_expand_dims(self, op: Any) -> relax.Expr:
            """EXPAND_DIMS at its (constant) axis: TVM 0.27's converter calls Relax's
            ``expand_dims`` with an argument too many and fails on every model."""
            data, rank, values, name = self._axes_operand(op, "EXPAND_DIMS")
            if len(values) != 1 or not -rank - 1 <= values[0] <= rank:
                raise ModelFileError(f"EXPAND_DIMS {name!r}: axis {values} out of bounds")
            return relax.op.expand_dims(data, values[0])

        def convert_shape(self, op: Any) -> relax.Expr:
            from tflite.ShapeOptions import ShapeOptions
            from tflite.TensorType import TensorType

            (tensor,) = self.get_input_tensors(op)
            shape = static_shape(self.bb.normalize(self.get_tensor_expr(tensor)).ty)
            if shape is None:
                return super().convert_shape(op)
            options = ShapeOptions()
            table = op.BuiltinOptions()
            options.Init(table.Bytes, table.Pos)
            dtype = "int32" if options.OutType() == TensorType.INT32 else "int64"
            return relax.const(np.array(shape, dtype), dtype)

        def convert_reshape(self, op: Any) -> relax.Expr:
            tensors = self.get_input_tensors(op)
            if len(tensors) != 2 or not self.has_expr(tensors[1].tensor_idx):
                return super().convert_reshape(op)
            data = self.get_tensor_expr(tensors[0])
            target = self._from_constants(self.get_expr(tensors[1].tensor_idx))
            value = None if target is None else evaluate(target)
            if value is not None:  # computed from constants (static shapes) alone
                return relax.op.reshape(data, [int(d) for d in value.value.numpy()])
            # The target shape is computed at run time: use the declared output signature.
            (output,) = self.get_output_tensors(op)
            dims = [int(d) for d in _signature(output.tensor)]
            if dims.count(-1) > 1:
                raise ModelFileError(
                    f"RESHAPE to {_tensor_name(output)!r} has more than one open dimension"
                )
            return relax.op.reshape(data, dims)

        def _from_constants(self, expr: relax.Expr) -> relax.Expr | None:
            """``expr`` with the converter's bound variables replaced by their values, or
            None when it reads a model input (a run-time value)."""
            if isinstance(expr, relax.Var):
                value = self.bb.lookup_binding(expr)
                return None if value is None else self._from_constants(value)
            if isinstance(expr, relax.Tuple):
                fields = [self._from_constants(field) for field in expr.fields]
                return None if any(f is None for f in fields) else relax.Tuple(fields)
            if isinstance(expr, relax.TupleGetItem):
                whole = self._from_constants(expr.tuple_value)
                return None if whole is None else relax.TupleGetItem(whole, expr.index)
            if isinstance(expr, relax.Call):
                args = [self._from_constants(arg) for arg in expr.args]
                if any(arg is None for arg in args):
                    return None
                return relax.Call(expr.op, args, expr.attrs, expr.ty_args)
            return expr

    return StaticShapeConverter


def _tensor_name(tensor: Any) -> str:
    """The name of a converter's TensorWrapper, as the file spells it."""
    return tensor.tensor.Name().decode(errors="replace")


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
