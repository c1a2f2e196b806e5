"""example_npu: a computing Example NPU backend for Apache TVM Relax.

Importing the package loads the C++ runtime (``runtime.ExampleNPUJSONRuntimeCreate``,
``ffi.Module.load_from_bytes.example_npu_json``), registers the codegen
``relax.ext.example_npu`` and the ``example_npu.*`` patterns. Import it before
``tvm.runtime.load_module`` on an exported library that contains NPU functions.
"""

from __future__ import annotations

import tvm_ffi

# Upstream's pattern file (shipped in the TVM wheel) registers placeholder-check patterns under
# our names on import. Importing it first makes any later import a no-op, and
# patterns.register() then replaces its rows with ours.
import tvm.relax.backend.contrib.example_npu  # noqa: F401  # isort: skip

from . import patterns
from ._library import RegistrationConflictError, build_config, load_runtime_library
from .checks import Verdict
from .codegen import CodegenError, example_npu_codegen
from .config import InvalidConfigError, NPUConfig
from .partition import partition_for_npu
from .profile import Profile, profile
from .quantize import quantize_model

__version__ = "0.1.0"

BUILD_CONFIG = build_config()
# Mirrors TVM's USE_EXAMPLE_NPU_RUNTIME / USE_EXAMPLE_NPU_CODEGEN: without them only the patterns
# register, and the spec's `has_example_npu` probe reports the backend as absent.
_RUNTIME_LIBRARY = load_runtime_library() if BUILD_CONFIG["runtime"] else None
if BUILD_CONFIG["codegen"] and BUILD_CONFIG["runtime"]:
    if tvm_ffi.get_global_func("relax.ext.example_npu", allow_missing=True) is not None:
        raise RegistrationConflictError("relax.ext.example_npu is already registered elsewhere")
    tvm_ffi.register_global_func("relax.ext.example_npu", example_npu_codegen)
REGISTERED_PATTERNS = patterns.register()

__all__ = [
    "BUILD_CONFIG",
    "CodegenError",
    "InvalidConfigError",
    "NPUConfig",
    "Profile",
    "REGISTERED_PATTERNS",
    "RegistrationConflictError",
    "Verdict",
    "partition_for_npu",
    "profile",
    "quantize_model",
]
