"""Arm Vela's performance estimate of a TFLite model on an Ethos-U configuration.

    python3 tools/vela_reference.py MODEL.tflite [MODEL.tflite ...]
        [--accelerator ethos-u55-256 ethos-u65-256] [--system-config NAME] [--memory-mode NAME]
        [--csv out.csv] [--json out.json]

Vela (PyPI ``ethos-u-vela`` 5.2.0) compiles full-integer TFLite models for Arm's Ethos-U NPUs and
prints a network summary with its performance estimate. It is a reference tool, not a
dependency: like tools/scalesim_reference.py this script makes its own venv (``build/vela-venv``,
``ethos-u-vela==5.2.0``, about 30 s) and runs the ``vela`` command there, one compilation per
(model, accelerator), in a temporary output folder. Without ``--system-config`` /
``--memory-mode`` Vela picks its defaults (U55: ``Ethos_U55_High_End_Embedded``, ``Shared_Sram``,
500 MHz, weights in off-chip flash; U65: ``Ethos_U65_Client_Server``, ``Dedicated_Sram_384KB``,
1 GHz, weights and feature maps in DRAM). An open batch dimension is set to 1 by Vela itself.

Importable: ``estimate(model, accelerator)`` returns a ``VelaEstimate`` (the summary CSV's row,
the per-layer CSV's rows and the CPU / NPU operator counts); benchmarks/tflite_vela_table.py puts
it beside our own estimate.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VENV = ROOT / "build" / "vela-venv"
VELA_VERSION = "5.2.0"
ACCELERATORS = ("ethos-u55-256", "ethos-u65-256")


def ensure_venv(venv: Path = DEFAULT_VENV) -> Path:
    """The venv's ``vela`` command, installing ethos-u-vela when it is missing or another one."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import importlib.metadata as m; print(m.version('ethos-u-vela'))"]
    if python.exists():
        found = subprocess.run(probe, capture_output=True, text=True)
        if found.returncode == 0 and found.stdout.strip() == VELA_VERSION:
            return venv / "bin" / "vela"
    print(f"creating {venv} with ethos-u-vela=={VELA_VERSION}", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"ethos-u-vela=={VELA_VERSION}"], check=True
    )
    return venv / "bin" / "vela"


@dataclass
class VelaEstimate:
    model: str
    accelerator: str
    summary: dict[str, str]  # the *_summary_*.csv row, as Vela writes it
    layers: list[dict[str, str]] = field(default_factory=list)  # the *_per-layer.csv rows
    cpu_operators: int = 0
    npu_operators: int = 0

    def number(self, key: str) -> float:
        return float(self.summary[key])

    @property
    def cycles(self) -> int:
        return int(self.number("cycles_total"))

    @property
    def macs(self) -> int:
        return int(self.number("nn_macs"))

    @property
    def clock_hz(self) -> float:
        return self.number("core_clock")

    @property
    def latency_s(self) -> float:
        return self.number("inference_time")

    @property
    def off_chip_bytes(self) -> int:
        """Bytes read and written off chip: DRAM plus off-chip flash."""
        return int(self.number("dram_total_bytes") + self.number("off_chip_flash_total_bytes"))

    @property
    def sram_bytes(self) -> int:
        return int(self.number("sram_total_bytes"))

    @property
    def mac_utilization(self) -> float:
        """MACs over (cycles x the accelerator's MACs per cycle)."""
        per_cycle = int(self.accelerator.rsplit("-", 1)[1])
        return self.macs / (self.cycles * per_cycle) if self.cycles else 0.0


def _operator_counts(stdout: str) -> tuple[int, int]:
    counts = {}
    for kind in ("CPU", "NPU"):
        match = re.search(rf"^{kind} operators = (\d+)", stdout, re.MULTILINE)
        counts[kind] = int(match.group(1)) if match else 0
    return counts["CPU"], counts["NPU"]


def estimate(
    model: Path,
    accelerator: str = "ethos-u55-256",
    *,
    system_config: str | None = None,
    memory_mode: str | None = None,
    extra_args: tuple[str, ...] = (),
    venv: Path = DEFAULT_VENV,
) -> VelaEstimate:
    """Compiles `model` with Vela for `accelerator` and returns its estimate."""
    vela = ensure_venv(venv)
    with tempfile.TemporaryDirectory(prefix="vela_") as out:
        command = [
            str(vela),
            str(model),
            "--accelerator-config",
            accelerator,
            "--output-dir",
            out,
            "--verbose-performance",
            *extra_args,
        ]
        if system_config:
            command += ["--system-config", system_config]
        if memory_mode:
            command += ["--memory-mode", memory_mode]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"vela failed on {model}: {done.stderr.strip() or done.stdout}")
        (summary_path,) = Path(out).glob("*_summary_*.csv")
        with summary_path.open() as f:
            (summary,) = list(csv.DictReader(f))
        layers = []
        for path in Path(out).glob("*_per-layer.csv"):
            with path.open() as f:
                layers = list(csv.DictReader(f))
    cpu, npu = _operator_counts(done.stdout)
    return VelaEstimate(Path(model).stem, accelerator, summary, layers, cpu, npu)


COLUMNS = (
    "model",
    "accelerator",
    "system_config",
    "memory_mode",
    "clock_mhz",
    "cpu_ops",
    "npu_ops",
    "macs",
    "cycles",
    "latency_us",
    "mac_utilization",
    "off_chip_bytes",
    "sram_bytes",
)


def row(result: VelaEstimate) -> dict[str, object]:
    return {
        "model": result.model,
        "accelerator": result.accelerator,
        "system_config": result.summary["system_config"],
        "memory_mode": result.summary["memory_mode"],
        "clock_mhz": round(result.clock_hz / 1e6),
        "cpu_ops": result.cpu_operators,
        "npu_ops": result.npu_operators,
        "macs": result.macs,
        "cycles": result.cycles,
        "latency_us": round(result.latency_s * 1e6, 2),
        "mac_utilization": round(result.mac_utilization, 4),
        "off_chip_bytes": result.off_chip_bytes,
        "sram_bytes": result.sram_bytes,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--accelerator", nargs="+", default=list(ACCELERATORS))
    parser.add_argument("--system-config")
    parser.add_argument("--memory-mode")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--csv", type=Path, help="write the table as CSV")
    parser.add_argument(
        "--json",
        type=Path,
        help="write the table as JSON (tests/python/data/vela_reference.json is this output for "
        "the committed TFLite models)",
    )
    args = parser.parse_args()
    rows = [
        row(
            estimate(
                model,
                accelerator,
                system_config=args.system_config,
                memory_mode=args.memory_mode,
                venv=args.venv,
            )
        )
        for model in args.models
        for accelerator in args.accelerator
    ]
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in COLUMNS}
    print("  ".join(c.ljust(widths[c]) for c in COLUMNS))
    for r in rows:
        print("  ".join(str(r[c]).ljust(widths[c]) for c in COLUMNS))
    if args.csv:
        with args.csv.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
    if args.json:
        table = {"vela": VELA_VERSION, "rows": rows}
        args.json.write_text(json.dumps(table, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
