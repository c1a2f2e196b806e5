"""torch.export archives (``.pt2``) -> Relax through TVM's PyTorch frontend.

The archive is untrusted: ``checked_archive`` refuses one whose reading would run code stored in
it, unless the caller trusts the file (``trust_model_file``)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import tvm
from tvm import relax

from .pt2_archive import checked_archive
from .reader_common import (
    Dims,
    LoadedModel,
    ModelFileError,
    check_input_count,
    first_line,
    loaded_model,
    require_module,
    resolve_shapes,
)
from .torch_export import from_exported_program


@contextmanager
def _quiet_torch() -> Iterator[None]:
    """Hides torch's FutureWarning about its own deprecated tree specs, which unpickling and
    deep-copying a loaded archive print; it is nothing the user can act on."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def read_exported_program(
    path: Path, given: dict[str, Sequence[int]], trust_model_file: bool = False
) -> LoadedModel:
    torch = require_module(
        "torch",
        ".pt2 files (torch.export archives)",
        "install PyTorch (CPU build: pip install torch --index-url "
        "https://download.pytorch.org/whl/cpu)",
    )
    source = str(path) if trust_model_file else checked_archive(path)
    try:
        with _quiet_torch():
            program = torch.export.load(source)
    except Exception as error:
        raise ModelFileError(
            f"{path} is not a torch.export archive (torch.export.save): {first_line(error)}"
        ) from error
    names = list(program.graph_signature.user_inputs)
    placeholders = {node.name: node for node in program.graph.nodes if node.op == "placeholder"}
    declared: dict[str, Dims] = {}
    for name in names:
        value = placeholders[name].meta.get("val")
        if not hasattr(value, "shape"):
            raise ModelFileError(f"input {name!r} of {path.name} is not a tensor")
        declared[name] = [dim if isinstance(dim, int) else None for dim in value.shape]
    shapes = resolve_shapes(path, declared, given)
    try:
        with _quiet_torch():
            mod = from_exported_program(program)
    except Exception as error:
        raise ModelFileError(
            f"TVM's PyTorch importer cannot convert {path.name}: {first_line(error)}"
        ) from error
    # torch.export.Dim dimensions arrive as symbolic variables; bind them to the given sizes.
    check_input_count(path, mod, names)
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
    return loaded_model(path, mod, names, outputs)
