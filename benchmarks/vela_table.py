"""Our Ethos-U presets beside Arm's Vela 5.2.0: the side-by-side table of docs/ethos-u.md.

For each committed TFLite test model (tests/python/tflite_models.py) and each preset that Vela
also ran (tests/python/data/vela_reference.json, made by tools/vela_reference.py), the model is
imported with TVM's TFLite frontend and estimated for the preset; one row gives cycles,
inference time, off-chip bytes, SRAM traffic and MAC utilization, Vela's and ours, and the
ratios (ours / Vela). Prints a Markdown table.

    python benchmarks/vela_table.py [--presets ethos-u55-256 ethos-u65-256]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))

from test_vela_reference import ROWS, compare  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["ethos-u55-256", "ethos-u65-256"])
    args = parser.parse_args()
    print(
        "| model | preset | Vela cycles | our cycles | ratio | Vela µs | our µs "
        "| Vela off-chip B | our off-chip B | ratio | Vela SRAM B | our SRAM B "
        "| Vela MAC util. | our MAC util. |"
    )
    print(
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: |"
    )
    for row in ROWS:
        if row["accelerator"] not in args.presets:
            continue
        ours = compare(row)
        print(
            f"| {ours.model} | {ours.preset} | {row['cycles']:,} | {ours.cycles:,} "
            f"| {ours.cycle_ratio:.2f} | {row['latency_us']:.1f} | {ours.latency_us:.1f} "
            f"| {row['off_chip_bytes']:,} | {ours.off_chip_bytes:,} | {ours.off_chip_ratio:.2f} "
            f"| {row['sram_bytes']:,} | {ours.sram_bytes:,} | {row['mac_utilization']:.1%} "
            f"| {ours.mac_utilization:.1%} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
