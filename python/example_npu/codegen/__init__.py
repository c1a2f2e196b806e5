"""Codegen stage: partitioned Relax functions -> NPU graph JSON -> C++ runtime modules.

``graph.py`` flattens a function into the graph format of ``src/graph/graph.h`` and is the
``relax.ext.example_npu`` entry point; ``glue.py`` and ``quantized.py`` lower the glue-op and
quantized composites into their NPU nodes; ``attrs.py`` reads Relax types and attributes.
"""

from .attrs import CodegenError
from .graph import create_runtime_module, example_npu_codegen, serialize_function

__all__ = ["CodegenError", "create_runtime_module", "example_npu_codegen", "serialize_function"]
