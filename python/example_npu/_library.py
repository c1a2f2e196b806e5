"""Finds the C++ runtime library, which registers the runtime's global functions on dlopen."""

from __future__ import annotations

import json
from pathlib import Path

import tvm_ffi

PACKAGE_DIR = Path(__file__).parent
RUNTIME_GLOBALS = (
    "runtime.ExampleNPUJSONRuntimeCreate",
    "ffi.Module.load_from_bytes.example_npu_json",
)


class RegistrationConflictError(RuntimeError):
    """Another library (e.g. a TVM built with USE_EXAMPLE_NPU_RUNTIME=ON) owns our global names."""


def build_config() -> dict[str, bool]:
    """Which parts CMake built: {"codegen": EXAMPLE_NPU_CODEGEN, "runtime": EXAMPLE_NPU_RUNTIME}."""
    path = PACKAGE_DIR / "build_config.json"
    if not path.exists():
        raise ImportError(
            f"{path} is missing: example_npu must be installed with `pip install .` so CMake "
            "builds its runtime (importing from the source tree does not work)"
        )
    return json.loads(path.read_text())


def load_runtime_library() -> tvm_ffi.Module:
    """dlopens the runtime. The caller checks first that none of RUNTIME_GLOBALS is taken:
    registering a global name twice is a hard error inside the library's static initialiser,
    which would abort the process."""
    path = PACKAGE_DIR / "lib" / "libexample_npu.so"
    if not path.exists():
        raise ImportError(f"example_npu runtime library not found at {path}")
    return tvm_ffi.load_module(str(path))
