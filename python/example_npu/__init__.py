"""example_npu: a computing Example NPU backend for Apache TVM Relax.

Installing the package is enough: ``import tvm`` autoloads it through the ``tvm.backends``
entry point, which loads the C++ runtime (``runtime.ExampleNPUJSONRuntimeCreate``,
``ffi.Module.load_from_bytes.example_npu_json``), registers the codegen
``relax.ext.example_npu`` and the ``example_npu.*`` patterns. Importing the package does the
same when autoload is off (``TVM_DEVICE_BACKEND_AUTOLOAD=0``) and is harmless otherwise.
"""

from __future__ import annotations

# First, before any submodule: if this import is what starts `import tvm`, TVM's autoload runs
# registration.register() from scratch (see registration.py), and the call below is a no-op.
import tvm  # noqa: F401  # isort: skip

from ._library import RegistrationConflictError
from .analysis import Profile, SweepResult, config_grid, estimate, profile, sweep
from .codegen import CodegenError, example_npu_codegen
from .config import InvalidConfigError, NPUConfig
from .frontend import ModelFileError, canonicalize, canonicalize_qdq, load_model
from .partition import (
    PartitionError,
    PartitionReport,
    Verdict,
    partition_for_npu,
    partition_with_report,
)
from .quantize import quantize_model
from .registration import register

__version__ = "0.1.0"

_REGISTRATION = register()
BUILD_CONFIG = _REGISTRATION.build_config
REGISTERED_PATTERNS = _REGISTRATION.patterns

__all__ = [
    "BUILD_CONFIG",
    "CodegenError",
    "InvalidConfigError",
    "ModelFileError",
    "NPUConfig",
    "PartitionError",
    "PartitionReport",
    "Profile",
    "REGISTERED_PATTERNS",
    "RegistrationConflictError",
    "SweepResult",
    "Verdict",
    "canonicalize",
    "canonicalize_qdq",
    "config_grid",
    "estimate",
    "example_npu_codegen",
    "load_model",
    "partition_for_npu",
    "partition_with_report",
    "profile",
    "quantize_model",
    "sweep",
]
