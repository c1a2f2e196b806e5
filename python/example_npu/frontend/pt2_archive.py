"""Untrusted torch.export archives: what a ``.pt2`` holds is checked before torch reads any of it.

``torch.export.load`` runs code stored in the file in several ways: it unpickles weights and
constants saved with ``use_pickle``, ``custom_obj_*`` / ``opaque_obj_*`` constants, legacy
``.pt`` weight files and the example inputs (retrying with the unrestricted unpickler when the
restricted one fails); it loads AOTInductor shared libraries; it evaluates the graph's
symbolic-shape expressions with ``sympy.sympify`` (Python ``eval``); and re-tracing the graph
calls every node's target, which the file names as a dotted path under ``torch``.

``checked_archive`` reads only the zip directory and the JSON entries (never a pickle), refuses
an archive that needs any of the above, and returns the archive without its example inputs (the
importer never uses them), for ``torch.export.load`` to read from memory.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .reader_common import ModelFileError

TRUST_HINT = (
    "pass --trust-model-file (load_model(..., trust_model_file=True)) only for a file you trust"
)

# Entries torch.export.save writes that torch reads without unpickling (relative to the archive's
# root folder). Example inputs are a pickle: they are replaced by an empty entry.
_SAFE_ENTRIES = re.compile(
    r"archive_format|archive_version|byteorder|\.data/version|\.data/serialization_id"
    r"|models/[\w.-]+\.json|extra/.+"
    r"|data/weights/[\w.-]+_weights_config\.json|data/weights/weight_\d+"
    r"|data/constants/[\w.-]+_constants_config\.json|data/constants/tensor_\d+"
    r"|data/sample_inputs/[\w.-]+\.pt"
)
_EXAMPLE_INPUTS = re.compile(r"data/sample_inputs/[\w.-]+\.pt")
_PAYLOAD_PATH = {"weights": re.compile(r"weight_\d+"), "constants": re.compile(r"tensor_\d+")}

# Node targets the deserializer resolves by attribute lookup and re-tracing calls: registered
# operators (whose overloads are C++ kernels), Python's arithmetic operators and math functions.
_SAFE_TARGET = re.compile(
    r"torch\.ops\.(aten|prims|higher_order|quantized_decomposed)\.[A-Za-z]\w*(\.[A-Za-z]\w*)?"
    r"|torch\._?sym_[a-z]\w*|math\.[a-z]\w*"
    r"|_operator\.(getitem|add|sub|mul|truediv|floordiv|mod|pow|neg|pos|abs|eq|ne|lt|le|gt|ge"
    r"|and_|or_|xor|not_|invert|lshift|rshift|matmul|truth|index)"
)
# Symbolic-shape expressions as torch.export writes them (sympy's srepr: Symbol('s0',
# integer=True), Add(...), FloorDiv(...)): sympy.sympify evaluates them with Python's eval, so
# every token must be a name, a quoted symbol name, a number or an operator; with no attribute
# access, subscripts or dunder names, such a text can only build sympy expressions.
_EXPRESSION_TOKEN = re.compile(
    r"\s+|[A-Za-z][A-Za-z0-9_]*|'[A-Za-z]\w*'|\d+(\.\d+)?|[-+*/%(),=<>!&|~]"
)


def _refuse(path: Path, what: str) -> ModelFileError:
    return ModelFileError(
        f"refusing to read {path.name}: {what}, which can run code stored in the file; {TRUST_HINT}"
    )


def _entry_risk(name: str) -> str:
    if name.startswith("data/aotinductor/"):
        return f"it holds AOTInductor compiled code ({name})"
    if "custom_obj_" in name or "opaque_obj_" in name:
        return f"it holds pickled Python objects ({name})"
    if name.endswith((".pt", ".pkl", ".pickle", ".bin")) or "serialized_" in name:
        return f"it holds pickled data ({name})"
    return f"it holds an entry torch.export.save does not write ({name})"


def _entries(path: Path, archive: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    """The archive's entries by their name under its one root folder (torch's layout)."""
    infos = archive.infolist()
    if not infos:
        raise ModelFileError(f"{path} is not a torch.export archive: the zip file is empty")
    root = infos[0].filename.split("/", 1)[0] + "/"
    entries: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        if not info.filename.startswith(root) or info.filename[len(root) :] in entries:
            raise ModelFileError(
                f"{path} is not a torch.export archive: {info.filename} is outside its root "
                "folder or repeated"
            )
        entries[info.filename[len(root) :]] = info
    return entries


def _read_json(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Any:
    try:
        return json.loads(archive.read(info))
    except (ValueError, RecursionError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ModelFileError(f"{path}: {info.filename} is not valid JSON: {message}") from None


def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) pair of a JSON document, without recursion (depth is the file's)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
            yield from item.items()
        elif isinstance(item, list):
            stack.extend(item)


def _is_safe_expression(text: str) -> bool:
    position = 0
    while position < len(text):
        token = _EXPRESSION_TOKEN.match(text, position)
        if token is None or "__" in token.group():
            return False
        position = token.end()
    return True


def _check_program(path: Path, name: str, program: Any) -> None:
    if not isinstance(program, dict):
        raise ModelFileError(f"{path} is not a torch.export archive: {name} is not an object")
    if program.get("guards_code"):
        raise _refuse(path, f"{name} carries Python guard code")
    for key, value in _walk(program):
        if key == "target" and isinstance(value, str) and not _SAFE_TARGET.fullmatch(value):
            raise _refuse(path, f"a node of {name} calls {value[:80]!r}, not a PyTorch operator")
        if key == "expr_str" and not (isinstance(value, str) and _is_safe_expression(value)):
            raise _refuse(
                path, f"a shape expression of {name} is Python code ({str(value)[:80]!r})"
            )


def _check_payloads(
    path: Path, kind: str, config: Any, entries: dict[str, zipfile.ZipInfo]
) -> None:
    """Every weight / constant is raw tensor bytes in the archive, not a pickle."""
    items = config.get("config") if isinstance(config, dict) else None
    if not isinstance(items, dict):
        raise ModelFileError(f"{path} is not a torch.export archive: bad {kind} config")
    for fqn, payload in items.items():
        if not isinstance(payload, dict):
            raise ModelFileError(f"{path} is not a torch.export archive: bad entry for {fqn!r}")
        path_name = str(payload.get("path_name"))
        if payload.get("use_pickle") is not False or not _PAYLOAD_PATH[kind].fullmatch(path_name):
            raise _refuse(path, f"its {kind} {fqn!r} are stored as a pickle ({path_name})")
        record = entries.get(f"data/{kind}/{path_name}")
        if record is None:
            raise ModelFileError(f"{path}: the {kind} entry {path_name} is missing")
        sizes = (payload.get("tensor_meta") or {}).get("sizes", [])
        numel = 1
        for size in sizes:
            numel *= size.get("as_int", 1) if isinstance(size, dict) else 1
        if record.file_size == 0 and numel != 0:
            # torch would allocate zeros of the declared size, bounded by nothing in the file
            raise ModelFileError(f"{path}: {fqn!r} declares {numel} elements but stores none")


def checked_archive(path: Path) -> io.BytesIO:
    """The archive at ``path`` without its example inputs, once nothing in it can run code;
    raises ``ModelFileError`` (one line, naming the entry) otherwise."""
    try:
        return _checked_copy(path)
    except ModelFileError:
        raise
    # A damaged zip file: its directory, its data, an entry name that is not UTF-8 or a
    # compression method zipfile does not know.
    except (
        zipfile.BadZipFile,
        OSError,
        EOFError,
        zlib.error,
        ValueError,
        NotImplementedError,
    ) as error:
        raise ModelFileError(f"{path} is not a torch.export archive: {error}") from None


def _checked_copy(path: Path) -> io.BytesIO:
    with zipfile.ZipFile(path) as archive:
        entries = _entries(path, archive)
        unpacked = sum(info.file_size for info in entries.values())
        if unpacked > 16 * path.stat().st_size + 2**20:  # torch stores entries uncompressed
            raise ModelFileError(
                f"{path}: its entries unpack to {unpacked} bytes, far more than the file holds"
            )
        for name in entries:
            if not _SAFE_ENTRIES.fullmatch(name):
                raise _refuse(path, _entry_risk(name))
        if "archive_format" not in entries:
            raise ModelFileError(f"{path} is not a torch.export archive (no archive_format)")
        for name, info in entries.items():
            kind = name.split("/")[1] if name.endswith("_config.json") else None
            if name.startswith("models/"):
                _check_program(path, name, _read_json(path, archive, info))
            elif kind is not None:
                _check_payloads(path, kind, _read_json(path, archive, info), entries)
        copy = io.BytesIO()
        with zipfile.ZipFile(copy, "w", zipfile.ZIP_STORED) as out:
            for name, info in entries.items():
                out.writestr(
                    info.filename, b"" if _EXAMPLE_INPUTS.fullmatch(name) else archive.read(info)
                )
    copy.seek(0)
    return copy
