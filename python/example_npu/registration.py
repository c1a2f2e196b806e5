"""Registers the backend with TVM, once per process: runtime library, codegen, patterns.

Two callers, whichever comes first does the work:

- TVM's autoload: the package declares ``example_npu = "example_npu.registration:register"``
  under the ``tvm.backends`` entry points, and the last statement of ``import tvm`` calls it
  (unless ``TVM_DEVICE_BACKEND_AUTOLOAD=0``). TVM turns an exception raised here into a warning
  ``Failed to autoload tvm backend 'example_npu': <message>``, so every failure below carries a
  message that says what to do.
- ``import example_npu``, which calls it again (a no-op after the first success).

When autoload runs, ``tvm`` is still in the middle of its own import: every submodule is there,
only the autoload call itself remains. That is why this module, and everything it imports, may
import from ``tvm`` at the top. ``example_npu/__init__.py`` imports ``tvm`` before any of its
submodules so that autoload, triggered from inside ``import example_npu``, finds this module
not yet started rather than half executed.
"""

from __future__ import annotations

from dataclasses import dataclass

# Upstream's pattern file (shipped in the TVM wheel) registers placeholder-check patterns under
# our names on import. Importing it first makes any later import a no-op, and
# table.register() then replaces its rows with ours.
import tvm.relax.backend.contrib.example_npu  # noqa: F401
import tvm_ffi

from ._library import (
    RUNTIME_GLOBALS,
    RegistrationConflictError,
    build_config,
    load_runtime_library,
)
from .codegen import example_npu_codegen
from .partition import table

CODEGEN_GLOBAL = "relax.ext.example_npu"


@dataclass(frozen=True)
class Registration:
    """What this process registered."""

    build_config: dict[str, bool]
    runtime_library: tvm_ffi.Module | None
    patterns: list[str]


_registration: Registration | None = None


def register() -> Registration:
    """Registers runtime, codegen and patterns the first time; returns what was registered.

    Mirrors TVM's USE_EXAMPLE_NPU_RUNTIME / USE_EXAMPLE_NPU_CODEGEN: a build without them
    registers only the patterns, and the spec's `has_example_npu` probe reports the backend as
    absent. Our global names are checked before anything is registered, so a conflict leaves
    the process as it was.
    """
    global _registration
    if _registration is None:
        _registration = _register_once()
    return _registration


def _register_once() -> Registration:
    built = build_config()
    with_runtime = built["runtime"]
    with_codegen = built["codegen"] and with_runtime
    names = [*RUNTIME_GLOBALS] if with_runtime else []
    names += [CODEGEN_GLOBAL] if with_codegen else []
    taken = [name for name in names if tvm_ffi.get_global_func(name, allow_missing=True)]
    if taken:
        raise RegistrationConflictError(
            f"example_npu cannot register {taken}: already registered by another library (a TVM "
            "built with USE_EXAMPLE_NPU_RUNTIME/CODEGEN=ON?); uninstall one of the two backends"
        )
    library = load_runtime_library() if with_runtime else None
    if with_codegen:
        tvm_ffi.register_global_func(CODEGEN_GLOBAL, example_npu_codegen)
    return Registration(built, library, table.register())
