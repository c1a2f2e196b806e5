"""ONNX files (``.onnx``) -> Relax through TVM's ONNX frontend.

An ONNX file holds no code, and ``onnx.load`` refuses external data outside the model's folder
(``..``, absolute paths, symbolic links), so ``trust_model_file`` changes nothing here."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

from .reader_common import (
    Dims,
    LoadedModel,
    ModelFileError,
    first_line,
    loaded_model,
    require_module,
    resolve_shapes,
)


def read_onnx(
    path: Path, given: dict[str, Sequence[int]], trust_model_file: bool = False
) -> LoadedModel:
    onnx = require_module("onnx", ".onnx files", "pip install 'example-npu[onnx]'")
    from tvm.relax.frontend.onnx import from_onnx

    try:
        model = onnx.load(str(path))
    except Exception as error:  # protobuf's DecodeError and friends
        raise ModelFileError(f"{path} is not a valid ONNX model: {first_line(error)}") from error
    weights = {tensor.name for tensor in model.graph.initializer}
    declared: dict[str, Dims] = {}
    for value in model.graph.input:
        if value.name in weights:
            continue
        tensor_type = value.type.tensor_type
        if not tensor_type.HasField("shape"):
            raise ModelFileError(f"input {value.name!r} of {path.name} has no declared rank")
        declared[value.name] = [dim.dim_value or None for dim in tensor_type.shape.dim]
    shapes = resolve_shapes(path, declared, given)
    # TVM's importer reports onnx's checker findings as Python warnings; they are kept out of
    # the user's terminal and the first one explains a failure that follows.
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            mod = from_onnx(model, shape_dict={k: list(v) for k, v in shapes.items()})
        except Exception as error:
            checker = f" (onnx checker: {first_line(seen[0].message)})" if seen else ""
            raise ModelFileError(
                f"TVM's ONNX importer cannot convert {path.name}: {first_line(error)}{checker}"
            ) from error
    outputs = [value.name for value in model.graph.output]
    return loaded_model(path, mod, list(declared), outputs)
