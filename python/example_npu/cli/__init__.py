"""Command line: ``example-npu COMMAND`` (also ``python -m example_npu COMMAND``).

One module per command. Each has ``add_parser(commands)``, which adds its subparser and sets
``run`` (parsed arguments -> exit status) as a default; adding a command is a module plus a
row in ``COMMANDS``. A command reports a problem with what the user gave it (a file, a shape, a
config) by raising one of ``USER_ERRORS``: ``main`` prints its one-line message and returns 2.
"""

from __future__ import annotations

import argparse
import sys

from ..config import InvalidConfigError
from ..frontend.model_file import ModelFileError
from ..partition.pipeline import PartitionError
from . import compile_model, demo, profile_model, sweep_model
from .common import UsageError

COMMANDS = (demo, compile_model, profile_model, sweep_model)
# PartitionError: a model the partitioner cannot take (such as control flow TVM's passes refuse).
USER_ERRORS = (UsageError, ModelFileError, InvalidConfigError, PartitionError)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="example-npu",
        description="Compile and profile models for the example NPU (TVM Relax backend).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except USER_ERRORS as error:
        print(f"example-npu: error: {one_line(error)}", file=sys.stderr)
        return 2


def one_line(error: BaseException, limit: int = 600) -> str:
    """The error's message on one line of at most ``limit`` characters (a library's message may
    span lines or quote a whole input)."""
    text = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    text = text or type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


if __name__ == "__main__":
    sys.exit(main())
