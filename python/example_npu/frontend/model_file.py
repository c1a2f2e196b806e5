"""Model files -> Relax: ONNX (``.onnx``), torch.export archives (``.pt2``) and TFLite
flatbuffers (``.tflite``).

``load_model(path, input_shapes)`` reads the file with its own library (onnx / PyTorch / tflite),
imports it with TVM's frontend (weights bound as constants), and returns a module whose ``main``
has static input shapes: dimensions the file leaves open (an ONNX ``dim_param``, a
``torch.export.Dim``) must be given in ``input_shapes``, keyed by the model's own input names,
except a TFLite file's open batch dimension, which is 1 unless given (as Arm's Vela does).
Every problem with the file or the shapes is a ``ModelFileError`` with a one-line message.

Model files are untrusted: a ``.pt2`` whose reading would run code stored in it (pickled weights
or objects, compiled code, Python expressions) is refused unless ``trust_model_file=True``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from .onnx_reader import read_onnx
from .pt2_reader import read_exported_program
from .reader_common import LoadedModel, ModelFileError, ModelInput
from .tflite_reader import read_tflite

__all__ = ["LoadedModel", "ModelFileError", "ModelInput", "load_model", "parse_input_shape"]

Reader = Callable[[Path, dict[str, Sequence[int]], bool], LoadedModel]
# One reader per file suffix; each reads the file with its own library and TVM's frontend.
_READERS: dict[str, Reader] = {
    ".onnx": read_onnx,
    ".pt2": read_exported_program,
    ".tflite": read_tflite,
}


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME:1x3x224x224`` (or ``NAME:1,3,224,224``) -> (NAME, shape). The name may itself
    contain ':' (``input:0``); the shape is what follows the last one."""
    name, colon, dims = text.rpartition(":")
    if not colon or not name or not dims:
        raise ModelFileError(f"--input {text!r}: expected NAME:SHAPE, e.g. x:1x3x224x224")
    parts = dims.replace(",", "x").split("x")
    if not all(part.isascii() and part.isdigit() and int(part) > 0 for part in parts):
        raise ModelFileError(
            f"--input {text!r}: the shape must be positive integers separated by 'x', "
            "e.g. x:1x3x224x224"
        )
    return name, tuple(int(part) for part in parts)


def load_model(
    path: str | Path,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    trust_model_file: bool = False,
) -> LoadedModel:
    """Reads ``path`` (by its suffix) and imports it into Relax with static input shapes.
    ``trust_model_file`` lets a ``.pt2`` that needs unpickling through: only for files you
    trust, since unpickling runs code the file carries."""
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"model file not found: {path}")
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        raise ModelFileError(
            f"{path}: unknown model format {path.suffix or '(no suffix)'!r}; expected one of "
            f"{', '.join(sorted(_READERS))}"
        )
    return reader(path, dict(input_shapes or {}), trust_model_file)
