"""``example-npu profile MODEL``: one run on the NPU emulator, a network summary, a layer table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import tvm
from tvm import relax

from ..analysis.profile import Profile, run_and_profile
from ..analysis.summary import layer_rows, network_summary, summary_text, write_layers_csv
from ..partition.report import partition_with_report
from .common import (
    UsageError,
    add_model_arguments,
    compile_for_cpu,
    flatten_outputs,
    load_config,
    load_model_from_args,
    random_inputs,
    read_input_data,
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "profile",
        help="run a model file once on the NPU emulator and print its network summary",
        description="Partitions and compiles MODEL, runs it once on random inputs (or "
        "--input-data) and prints the network summary (NPU/CPU ops, SRAM used and bytes moved "
        "per tier, MACs, cycles, latency, energy, engine utilization) and the per-layer table.",
    )
    add_model_arguments(parser)
    parser.add_argument(
        "--input-data",
        metavar="FILE.npz",
        help="inputs keyed by the model's input names (default: random, see --seed)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--csv", metavar="FILE", help="write the per-layer table as CSV")
    parser.add_argument("--json", metavar="FILE", help="write the summary and layers as JSON")
    parser.add_argument("--trace", metavar="FILE", help="write a Chrome/Perfetto trace")
    parser.add_argument(
        "--output-data", metavar="FILE.npz", help="save the outputs, keyed by output name"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    for option in ("csv", "json", "trace", "output_data"):
        path = getattr(args, option)
        if path and not Path(path).parent.is_dir():
            raise UsageError(f"cannot write {path}: directory {Path(path).parent} does not exist")
    config = load_config(args.config)
    model = load_model_from_args(args)
    inputs = (
        read_input_data(args.input_data, model)
        if args.input_data
        else random_inputs(model, args.seed)
    )
    partitioned, report = partition_with_report(model.mod, config=config)
    executable = compile_for_cpu(partitioned, str(args.model))
    if report.npu_functions:
        result, prof = run_and_profile(executable, *inputs)
    else:  # nothing to profile: the summary shows zeros next to the CPU ops and their reasons
        vm = relax.VirtualMachine(executable, tvm.cpu())
        result = vm["main"](*[tvm.runtime.tensor(array) for array in inputs])
        prof = Profile(power_mode=config.power_mode, clock_mhz=config.clock_mhz)
    summary = network_summary(str(args.model), report, prof, config)
    rows = layer_rows(prof)
    print(summary_text(summary))
    print()
    print(prof.table())
    if args.csv:
        print(f"wrote {write_layers_csv(rows, args.csv)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "layers": rows}, indent=1))
        print(f"wrote {args.json}")
    if args.trace:
        print(f"wrote {prof.to_chrome_trace(args.trace)} (open in ui.perfetto.dev)")
    if args.output_data:
        outputs = flatten_outputs(result)
        names = model.output_names
        if len(names) != len(outputs):
            names = [f"output_{i}" for i in range(len(outputs))]
        np.savez(args.output_data, **dict(zip(names, outputs, strict=True)))
        print(f"wrote {args.output_data}")
    return 0
