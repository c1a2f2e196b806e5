"""Writes the NPU graph JSON of every bench_ops.py case, for benchmarks/emulator_bench.

    python benchmarks/dump_graphs.py OUT_DIR [--only SUBSTRING] [--tflite]
    build/bench/emulator_bench OUT_DIR/relu_1x64x56x56.json 200

--tflite dumps the committed TFLite models instead (tests/python/tflite_models.py, as
bench_tflite.py runs them): OUT_DIR/kws_dscnn.json and so on.

The graphs are captured from the real codegen (partition_for_npu), so the C++ benchmark runs
exactly what the Python benchmark times, minus the VM and the FFI call.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import example_npu
from example_npu.codegen import graph as codegen

sys.path.insert(0, str(Path(__file__).parent))
import bench_ops  # noqa: E402


def capture_graphs(mod) -> list[dict[str, Any]]:
    """Partitions `mod` and returns the graph of each NPU function it produced."""
    graphs: list[dict[str, Any]] = []
    create = codegen.create_runtime_module

    def recording(graph: dict[str, Any]):
        graphs.append(graph)
        return create(graph)

    codegen.create_runtime_module = recording
    try:
        example_npu.partition_for_npu(mod)
    finally:
        codegen.create_runtime_module = create
    return graphs


def file_stem(case: bench_ops.Case) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", f"{case.name} {case.size.split()[0]}").strip("_")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--only", default="", help="dump only cases whose name contains this")
    parser.add_argument("--tflite", action="store_true", help="the committed TFLite models")
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if args.tflite:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "python"))
        from tflite_models import MODELS, model_path

        modules = [
            (name, example_npu.load_model(model_path(name)).mod)
            for name in MODELS
            if args.only in name
        ]
    else:
        modules = [
            (file_stem(case), bench_ops.build_module(case))
            for case in bench_ops.cases()
            if args.only in case.name
        ]
    for stem, mod in modules:
        for i, graph in enumerate(capture_graphs(mod)):
            path = args.out_dir / f"{stem}{f'_{i}' if i else ''}.json"
            path.write_text(json.dumps(graph))
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
