"""``example-npu sweep MODEL``: the model estimated over a grid of NPU configurations."""

from __future__ import annotations

import argparse
import time
from dataclasses import fields
from pathlib import Path

import tvm

from ..analysis.sweep import config_grid, sweep
from ..config import NPUConfig
from ..frontend.builtin_models import default_model, resnet18
from .common import (
    CONFIG_HELP,
    UsageError,
    add_trust_argument,
    load_config,
    load_model_from_args,
)

# Built-in models the sweep takes by name instead of a file.
BUILTIN_MODELS = {"default": default_model, "resnet18": resnet18}
# Grid options with a flag of their own: option -> NPUConfig field.
GRID_OPTIONS = {
    "l1_kb": "l1_sram_kb",
    "l2_kb": "l2_cmx_kb",
    "power_mode": "power_mode",
    "dataflow": "dataflow",
    "matrix_dim": "matrix_engine_dim",
    "dram_gbps": "dram_bandwidth_gb_per_s",
}
# NPUConfig's annotations are strings (from __future__ import annotations).
_PARSERS = {"int": int, "float": float, "str": str}
_FIELD_TYPES = {field.name: field.type for field in fields(NPUConfig)}


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "sweep",
        help="estimate a model over a grid of NPU configurations (nothing is executed)",
        description="Partitions, compiles and times MODEL for every combination of the given "
        "values, on local processes or a Dask cluster, and prints the latency/energy Pareto "
        "front and the configurations that failed, with the reason.",
    )
    parser.add_argument(
        "model",
        metavar="MODEL",
        help="an .onnx or torch.export .pt2 file, or a built-in model: "
        + ", ".join(BUILTIN_MODELS),
    )
    parser.add_argument(
        "--config",
        metavar="NPU",
        help="the NPU every configuration starts from: " + CONFIG_HELP,
    )
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME:SHAPE",
        help="static shape of a model input, e.g. x:1x3x224x224 (repeat per input)",
    )
    add_trust_argument(parser)
    for option, field_name in GRID_OPTIONS.items():
        parser.add_argument(
            "--" + option.replace("_", "-"), metavar="V1,V2", help=f"values of {field_name}"
        )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=V1,V2",
        help="values of any other NPUConfig field (repeatable)",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="a Dask scheduler, e.g. tcp://host:8786 (default: local processes)",
    )
    parser.add_argument("--csv", metavar="FILE", help="write every configuration's row as CSV")
    parser.add_argument("--plot", metavar="FILE.png", help="write the Pareto front as a PNG")
    parser.set_defaults(run=run)


def _values(field_name: str, text: str) -> list:
    parse = _PARSERS[_FIELD_TYPES[field_name]]
    try:
        return [parse(item) for item in text.split(",") if item]
    except ValueError:
        raise UsageError(
            f"{field_name}: {text!r} is not a list of {_FIELD_TYPES[field_name]} values"
        ) from None


def grid_values(args: argparse.Namespace) -> dict[str, list]:
    """NPUConfig field -> the values to sweep, from the grid options and --set."""
    grid = {
        field_name: _values(field_name, getattr(args, option))
        for option, field_name in GRID_OPTIONS.items()
        if getattr(args, option)
    }
    for assignment in args.set:
        name, _, text = assignment.partition("=")
        if name not in _FIELD_TYPES or not text:
            raise UsageError(f"--set {assignment}: expected FIELD=V1,V2 with an NPUConfig field")
        grid[name] = _values(name, text)
    return grid


def _model(args: argparse.Namespace) -> tvm.IRModule:
    if args.model not in BUILTIN_MODELS:
        return load_model_from_args(args).mod
    if args.input:
        raise UsageError(f"--input: the built-in model {args.model} has static shapes")
    return BUILTIN_MODELS[args.model]()


def run(args: argparse.Namespace) -> int:
    for path in (args.csv, args.plot):
        if path and not Path(path).parent.is_dir():
            raise UsageError(f"cannot write {path}: directory {Path(path).parent} does not exist")
    configs = config_grid(load_config(args.config), **grid_values(args))
    model = _model(args)
    client = None
    if args.scheduler:
        from distributed import Client

        client = Client(args.scheduler)
    start = time.perf_counter()
    try:
        result = sweep(model, configs, executor=client)
    finally:
        if client is not None:
            client.close()
    where = f"the Dask cluster at {args.scheduler}" if args.scheduler else "this machine"
    print(
        f"{len(result)} configurations in {time.perf_counter() - start:.1f} s on {where}; "
        f"{len(result.failed)} failed"
    )
    varying = result.varying_fields()
    front = result.pareto()
    print(f"\nPareto front (latency_us vs energy_uj), {len(front)} configurations:")
    print(front.table(varying))
    for row in result.failed:
        settings = ", ".join(f"{name}={row[name]}" for name in varying)
        print(f"failed: {settings}: {row['error']}")
    if args.csv:
        result.to_csv(args.csv)
        print(f"wrote {args.csv}")
    if args.plot:
        print(f"wrote {result.plot(args.plot)}")
    return 0
