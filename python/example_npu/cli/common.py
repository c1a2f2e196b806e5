"""What the model-file commands share: their arguments, the NPU config file, the inputs."""

from __future__ import annotations

import argparse
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import tvm

from ..config import PRESETS, InvalidConfigError, NPUConfig
from ..frontend.model_file import LoadedModel, load_model, parse_input_shape
from ..frontend.reader_common import first_line

CONFIG_HELP = (
    "the NPU: a preset name (" + ", ".join(PRESETS) + ") or a JSON file of NPUConfig fields "
    "to change"
)


class UsageError(Exception):
    """Something the user gave on the command line is wrong; the message is one line."""


def compile_for_cpu(mod: tvm.IRModule, what: str) -> tvm.runtime.Executable:
    """``tvm.compile`` of a partitioned model; TVM refusing the model's CPU part is a user error.

    The NPU functions were already compiled by the partitioning; what fails here is TVM's own
    build of the rest of a model file (an op over an empty tensor, say), so the user gets TVM's
    reason in one line rather than a traceback.
    """
    try:
        return tvm.compile(mod, target="llvm")
    except Exception as error:  # noqa: BLE001 - any TVM failure on the user's model
        raise UsageError(f"TVM cannot compile {what} for the CPU: {first_line(error)}") from None


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model", metavar="MODEL", help="an .onnx file, a torch.export .pt2 file or a .tflite file"
    )
    parser.add_argument("--config", metavar="NPU", help=CONFIG_HELP)
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME:SHAPE",
        help="static shape of a model input, e.g. x:1x3x224x224 (repeat per input); needed "
        "for inputs whose shape the file leaves open (a .tflite file's open batch is 1 unless "
        "given)",
    )
    add_trust_argument(parser)


def add_trust_argument(parser: argparse.ArgumentParser) -> None:
    """The opt-in for .pt2 files whose reading runs code they carry (model files are
    untrusted by default)."""
    parser.add_argument(
        "--trust-model-file",
        action="store_true",
        help="read a .pt2 even if it needs unpickling (pickled weights or objects, compiled "
        "code), which runs code stored in the file: only for files you trust",
    )


def load_config(path: str | None) -> NPUConfig:
    """The NPUConfig --config names: a preset (NPUConfig.preset), or a JSON file of fields
    (fields left out keep their defaults)."""
    if path is None:
        return NPUConfig()
    if path in PRESETS:
        return NPUConfig.preset(path)
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"config file not found and not a preset ({', '.join(PRESETS)}): {file}")
    try:
        data = json.loads(file.read_text())
    except (ValueError, RecursionError) as error:  # also too deep, or a 5,000-digit number
        message = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise UsageError(f"config {file} is not valid JSON: {message}") from error
    if not isinstance(data, dict):
        raise UsageError(f"config {file} must be a JSON object of NPUConfig fields")
    try:
        return NPUConfig.from_json(json.dumps(data))
    except InvalidConfigError as error:
        raise InvalidConfigError(f"config {file}: {error}") from error


def load_model_from_args(args: argparse.Namespace) -> LoadedModel:
    shapes: dict[str, tuple[int, ...]] = {}
    for text in args.input:
        name, shape = parse_input_shape(text)
        if name in shapes:
            raise UsageError(f"--input {name} is given twice")
        shapes[name] = shape
    return load_model(args.model, shapes, trust_model_file=args.trust_model_file)


def random_inputs(model: LoadedModel, seed: int) -> list[np.ndarray]:
    """Standard normal values for float inputs, zeros for integer and bool inputs (so that an
    index input stays in range)."""
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal(spec.shape).astype(spec.dtype)
        if np.issubdtype(np.dtype(spec.dtype), np.floating)
        else np.zeros(spec.shape, spec.dtype)
        for spec in model.inputs
    ]


def read_input_data(path: str, model: LoadedModel) -> list[np.ndarray]:
    """The arrays of an .npz file, keyed by the model's input names (or np.savez's arr_0, ...
    in input order), checked against the input shapes and dtypes."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"input data file not found: {file}")
    try:
        archive = np.load(file, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise UsageError(f"{file} is not an .npz file: {error}") from error
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise UsageError(f"{file} is a single array; give an .npz file (numpy.savez)")
    with archive:
        positional = [f"arr_{i}" for i in range(len(model.inputs))]
        keys = [
            spec.name if spec.name in archive.files else positional[i]
            for i, spec in enumerate(model.inputs)
        ]
        extra = sorted(set(archive.files) - set(keys))
        if extra:
            raise UsageError(
                f"{file}: {extra} name no input of the model (its inputs: "
                f"{', '.join(spec.name for spec in model.inputs)})"
            )
        arrays = []
        for spec, key in zip(model.inputs, keys, strict=True):
            if key not in archive.files:
                raise UsageError(f"{file} has no array for input {spec.name!r}")
            try:  # numpy refuses object arrays (pickles) and oversized headers
                array = archive[key]
            except (OSError, ValueError, EOFError, MemoryError, zipfile.BadZipFile) as error:
                raise UsageError(f"{file}: array {key!r} cannot be read: {error}") from error
            if array.shape != spec.shape or str(array.dtype) != spec.dtype:
                raise UsageError(
                    f"{file}: input {spec.name!r} is {array.dtype}{list(array.shape)}, the model "
                    f"takes {spec.dtype}{list(spec.shape)}"
                )
            arrays.append(array)
    return arrays


def flatten_outputs(value: Any) -> list[np.ndarray]:
    """What a Relax function returned (a tensor or nested tuples of them) as a flat list."""
    if hasattr(value, "numpy"):
        return [value.numpy()]
    return [array for item in value for array in flatten_outputs(item)]


def describe_inputs(model: LoadedModel) -> str:
    return ", ".join(
        f"{spec.name} {spec.dtype}[{'x'.join(map(str, spec.shape))}]" for spec in model.inputs
    )
