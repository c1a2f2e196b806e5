"""Frontend stage: model files -> Relax, then canonicalization into the forms the patterns match.

``model_file.py`` reads ONNX, torch.export and TFLite files with TVM's frontends;
``canonicalize.py`` rewrites frontend idioms exactly (``canonicalize``); ``qdq.py`` does the same
for quantized (QDQ) graphs (``canonicalize_qdq``); ``torch_export.py`` imports torch.export
programs with the fix decoder models with a key / value cache need (``from_exported_program``);
``builtin_models.py`` holds the embedded demo models.
"""

from .canonicalize import canonicalize
from .model_file import LoadedModel, ModelFileError, load_model
from .qdq import canonicalize_qdq
from .torch_export import from_exported_program

__all__ = [
    "LoadedModel",
    "ModelFileError",
    "canonicalize",
    "canonicalize_qdq",
    "from_exported_program",
    "load_model",
]
