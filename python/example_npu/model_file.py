"""Model files -> Relax: ONNX (``.onnx``) and torch.export archives (``.pt2``).

``load_model(path, input_shapes)`` reads the file with its own library (onnx / PyTorch),
imports it with TVM's frontend (weights bound as constants), and returns a module whose ``main``
has static input shapes: dimensions the file leaves open (an ONNX ``dim_param``, a
``torch.export.Dim``) must be given in ``input_shapes``, keyed by the model's own input names.
Every problem with the file or the shapes is a ``ModelFileError`` with a one-line message.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tvm
from tvm import relax

from .checks import tensor_dtype, tensor_shape

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


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME:1x3x224x224`` (or ``NAME:1,3,224,224``) -> (NAME, shape). The name may itself
    contain ':' (``input:0``); the shape is what follows the last one."""
    name, colon, dims = text.rpartition(":")
    if not colon or not name or not dims:
        raise ModelFileError(f"--input {text!r}: expected NAME:SHAPE, e.g. x:1x3x224x224")
    parts = dims.replace(",", "x").split("x")
    if not all(part.isdigit() and int(part) > 0 for part in parts):
        raise ModelFileError(
            f"--input {text!r}: the shape must be positive integers separated by 'x', "
            "e.g. x:1x3x224x224"
        )
    return name, tuple(int(part) for part in parts)


def load_model(
    path: str | Path, input_shapes: Mapping[str, Sequence[int]] | None = None
) -> LoadedModel:
    """Reads ``path`` (by its suffix) and imports it into Relax with static input shapes."""
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"model file not found: {path}")
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        raise ModelFileError(
            f"{path}: unknown model format {path.suffix or '(no suffix)'!r}; expected one of "
            f"{', '.join(sorted(_READERS))}"
        )
    return reader(path, dict(input_shapes or {}))


def _require(module: str, what: str, install: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        message = f"reading {what} needs {module}, which is missing: {install}"
        raise ModelFileError(message) from error


def _resolve_shapes(
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


def _read_onnx(path: Path, given: dict[str, Sequence[int]]) -> LoadedModel:
    onnx = _require("onnx", ".onnx files", "pip install 'example-npu[onnx]'")
    from tvm.relax.frontend.onnx import from_onnx

    try:
        model = onnx.load(str(path))
    except Exception as error:  # protobuf's DecodeError and friends
        raise ModelFileError(f"{path} is not a valid ONNX model: {_first_line(error)}") from error
    weights = {tensor.name for tensor in model.graph.initializer}
    declared: dict[str, Dims] = {}
    for value in model.graph.input:
        if value.name in weights:
            continue
        tensor_type = value.type.tensor_type
        if not tensor_type.HasField("shape"):
            raise ModelFileError(f"input {value.name!r} of {path.name} has no declared rank")
        declared[value.name] = [dim.dim_value or None for dim in tensor_type.shape.dim]
    shapes = _resolve_shapes(path, declared, given)
    try:
        mod = from_onnx(model, shape_dict={k: list(v) for k, v in shapes.items()})
    except Exception as error:
        raise ModelFileError(
            f"TVM's ONNX importer cannot convert {path.name}: {_first_line(error)}"
        ) from error
    outputs = [value.name for value in model.graph.output]
    return _loaded(path, mod, list(declared), outputs)


@contextmanager
def _quiet_torch() -> Iterator[None]:
    """Hides torch's FutureWarning about its own deprecated tree specs, which unpickling and
    deep-copying a loaded archive print; it is nothing the user can act on."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def _read_exported_program(path: Path, given: dict[str, Sequence[int]]) -> LoadedModel:
    torch = _require(
        "torch",
        ".pt2 files (torch.export archives)",
        "install PyTorch (CPU build: pip install torch --index-url "
        "https://download.pytorch.org/whl/cpu)",
    )
    from tvm.relax.frontend.torch import from_exported_program

    try:
        with _quiet_torch():
            program = torch.export.load(str(path))
    except Exception as error:
        raise ModelFileError(
            f"{path} is not a torch.export archive (torch.export.save): {_first_line(error)}"
        ) from error
    names = list(program.graph_signature.user_inputs)
    placeholders = {node.name: node for node in program.graph.nodes if node.op == "placeholder"}
    declared: dict[str, Dims] = {}
    for name in names:
        value = placeholders[name].meta.get("val")
        if not hasattr(value, "shape"):
            raise ModelFileError(f"input {name!r} of {path.name} is not a tensor")
        declared[name] = [dim if isinstance(dim, int) else None for dim in value.shape]
    shapes = _resolve_shapes(path, declared, given)
    try:
        with _quiet_torch():
            mod = from_exported_program(program)
    except Exception as error:
        raise ModelFileError(
            f"TVM's PyTorch importer cannot convert {path.name}: {_first_line(error)}"
        ) from error
    # torch.export.Dim dimensions arrive as symbolic variables; bind them to the given sizes.
    _check_input_count(path, mod, names)
    bindings: dict[tvm.tirx.Var, int] = {}
    for param, name in zip(mod["main"].params, names, strict=True):
        for dim, size in zip(param.ty.shape, shapes[name], strict=True):
            if isinstance(dim, tvm.tirx.Var):
                if bindings.setdefault(dim, size) != size:
                    raise ModelFileError(
                        f"--input {name}: dimension {dim} of {path.name} is shared with "
                        f"another input and was given two sizes ({bindings[dim]} and {size})"
                    )
    if bindings:
        mod = relax.transform.BindSymbolicVars(bindings)(mod)
    outputs = list(program.graph_signature.user_outputs)
    return _loaded(path, mod, names, outputs)


def _check_input_count(path: Path, mod: tvm.IRModule, names: list[str]) -> None:
    count = len(mod["main"].params)
    if count != len(names):
        raise ModelFileError(
            f"{path.name}: the imported model takes {count} inputs, the file names "
            f"{len(names)} ({', '.join(names)})"
        )


def _loaded(path: Path, mod: tvm.IRModule, names: list[str], outputs: list[str]) -> LoadedModel:
    _check_input_count(path, mod, names)
    inputs = []
    for name, param in zip(names, mod["main"].params, strict=True):
        shape = tensor_shape(param)
        if shape is None:
            raise ModelFileError(f"input {name!r} of {path.name} still has a dynamic shape")
        inputs.append(ModelInput(name, tuple(shape), tensor_dtype(param)))
    return LoadedModel(path, mod, inputs, outputs)


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


_READERS: dict[str, Callable[[Path, dict[str, Sequence[int]]], LoadedModel]] = {
    ".onnx": _read_onnx,
    ".pt2": _read_exported_program,
}
