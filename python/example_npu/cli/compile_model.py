"""``example-npu compile MODEL -o model.so``: partition, compile and export a model file."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..partition.report import partition_with_report
from .common import (
    UsageError,
    add_model_arguments,
    compile_for_cpu,
    describe_inputs,
    load_config,
    load_model_from_args,
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "compile",
        help="partition and compile a model file into a library",
        description="Partitions MODEL for the NPU, compiles the NPU parts with the NPU compiler "
        "and the rest with TVM's LLVM build, exports one library and prints the partition "
        "report. Load the library with tvm.runtime.load_module.",
    )
    add_model_arguments(parser)
    parser.add_argument(
        "-o", "--output", required=True, metavar="model.so", help="the library to write"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    output = Path(args.output)
    if not output.parent.is_dir():
        raise UsageError(f"cannot write {output}: directory {output.parent} does not exist")
    config = load_config(args.config)
    model = load_model_from_args(args)
    partitioned, report = partition_with_report(model.mod, config=config)
    print(f"Partition of {model.path.name}:")
    print(report.table())
    compile_for_cpu(partitioned, str(args.model)).export_library(str(output))
    print(f"\nwrote {output} ({output.stat().st_size:,} bytes); inputs: {describe_inputs(model)}")
    return 0
