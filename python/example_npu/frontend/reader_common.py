"""What every model-file reader shares: the loaded model, its one-line error, input shapes."""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tvm
from tvm import relax

from ..relax_types import tensor_dtype, tensor_shape

# The most elements one tensor of an imported model may hold: a Tile or ConstantOfShape to more
# would only fail later, as an allocation of tens of gigabytes (std::bad_alloc).
MAX_TENSOR_ELEMENTS = 2**31 - 1

# A declared dimension: an int, or None where the file leaves it open.
Dims = list[int | None]


class ModelFileError(ValueError):
    """A model file that cannot be read or given static shapes; the message is one line."""


@dataclass(frozen=True)
class ModelInput:
    name: str  # as the model file names it
    shape: tuple[int, ...]
    dtype: str


@dataclass
class LoadedModel:
    path: Path
    mod: tvm.IRModule
    inputs: list[ModelInput]
    output_names: list[str]


def require_module(module: str, what: str, install: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        message = f"reading {what} needs {module}, which is missing: {install}"
        raise ModelFileError(message) from error


def resolve_shapes(
    path: Path, declared: dict[str, Dims], given: dict[str, Sequence[int]]
) -> dict[str, tuple[int, ...]]:
    """Checks ``given`` against the file's declared shapes; returns every input's static shape."""
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise ModelFileError(
            f"--input {unknown[0]!r}: {path.name} has no input of that name "
            f"(its inputs: {', '.join(declared)})"
        )
    shapes: dict[str, tuple[int, ...]] = {}
    for name, dims in declared.items():
        if name not in given:
            if any(dim is None for dim in dims):
                open_dims = "x".join("?" if dim is None else str(dim) for dim in dims)
                raise ModelFileError(
                    f"input {name!r} of {path.name} has open dimensions ({open_dims}): give its "
                    f"shape with --input {name}:{open_dims.replace('?', 'N')}"
                )
            shapes[name] = tuple(int(dim) for dim in dims)  # type: ignore[arg-type]
            continue
        shape = tuple(given[name])
        fits = len(shape) == len(dims) and all(
            d is None or d == s for d, s in zip(dims, shape, strict=True)
        )
        if not fits:
            declared_text = "x".join("?" if dim is None else str(dim) for dim in dims)
            raise ModelFileError(
                f"--input {name}:{'x'.join(map(str, shape))} does not fit the shape "
                f"{declared_text} that {path.name} declares for {name!r}"
            )
        shapes[name] = shape
    return shapes


def check_input_count(path: Path, mod: tvm.IRModule, names: list[str]) -> None:
    count = len(mod["main"].params)
    if count != len(names):
        raise ModelFileError(
            f"{path.name}: the imported model takes {count} inputs, the file names "
            f"{len(names)} ({', '.join(names)})"
        )


def check_tensor_sizes(path: Path, mod: tvm.IRModule) -> None:
    """Every tensor of every Relax function (inputs, intermediates) fits MAX_TENSOR_ELEMENTS."""
    for func in mod.functions.values():
        if not isinstance(func, relax.Function):
            continue
        for var in relax.analysis.all_vars(func):
            shape = tensor_shape(var)
            if shape is not None and math.prod(shape) > MAX_TENSOR_ELEMENTS:
                raise ModelFileError(
                    f"{path.name}: {var.name} would hold {math.prod(shape)} elements "
                    f"({'x'.join(map(str, shape))}); a tensor holds at most 2^31 - 1"
                )


def loaded_model(
    path: Path, mod: tvm.IRModule, names: list[str], outputs: list[str]
) -> LoadedModel:
    check_input_count(path, mod, names)
    check_tensor_sizes(path, mod)
    inputs = []
    for name, param in zip(names, mod["main"].params, strict=True):
        shape = tensor_shape(param)
        if shape is None:
            raise ModelFileError(f"input {name!r} of {path.name} still has a dynamic shape")
        inputs.append(ModelInput(name, tuple(shape), tensor_dtype(param)))
    return LoadedModel(path, mod, inputs, outputs)


def first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
