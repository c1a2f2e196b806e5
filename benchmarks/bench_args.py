"""The command line shared by the peer benchmarks (bench_models.py, bench_tflite.py).

Every library reads its thread count once, when it loads, so the count is exported here, before
the calling script imports any of them; this module imports none.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable


def parse_bench_args(
    description: str,
    repeat: int,
    argv: list[str] | None,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """--threads / --only / --repeat (and the script's own options, from `add_arguments`), with
    the thread count exported for every library."""
    parser = argparse.ArgumentParser(description=description)
    if add_arguments is not None:
        add_arguments(parser)
    parser.add_argument("--threads", type=int, default=1, help="threads for every library")
    parser.add_argument("--only", default="", help="run only rows whose name contains this")
    parser.add_argument(
        "--repeat", type=int, default=repeat, help="timed calls per round (at most)"
    )
    args = parser.parse_args(argv)
    for variable in ("EXAMPLE_NPU_NUM_THREADS", "TVM_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[variable] = str(args.threads)
    return args
