"""Reference matrix-engine cycles from SCALE-Sim 3.0.0 for the cycle-model test.

    python3 tools/scalesim_reference.py [--jobs 2] [--only alexnet_conv1]

SCALE-Sim 3.0.0 (PyPI ``scalesim``) needs ``numpy<2``, which the project's ``.venv`` does not
have, so this script makes its own virtual environment (``build/scalesim-venv``), installs
``scalesim==3.0.0`` and ``numpy<2`` there and runs SCALE-Sim in it, one layer per process. Every
layer of ``LAYERS`` runs on a 16x16 and a 32x32 array under output- and weight-stationary
dataflow, stall-free (``InterfaceBandwidth: CALC``) with 64 KB SRAMs. The result is
``tests/python/data/scalesim_reference.csv``: one row per (layer, array, dataflow) with the
layer's geometry as our models build it and SCALE-Sim's compute cycles, under header lines
that record the SCALE-Sim version and configuration. ``tests/python/test_scalesim_reference.py``
compares the NPU's matrix-engine busy cycles with it; CI uses the committed CSV and never runs
SCALE-Sim.

SCALE-Sim has no padding: a layer runs on the input extent that yields our output positions
((out - 1) * stride + kernel), which does the same MACs on the same P x K x N problem. GEMMs use
SCALE-Sim's GEMM mode (M, N, K).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VENV = ROOT / "build" / "scalesim-venv"
DEFAULT_OUT = ROOT / "tests" / "python" / "data" / "scalesim_reference.csv"
DEFAULT_CACHE = ROOT / "build" / "scalesim-runs"
SCALESIM_VERSION = "3.0.0"
ARRAYS = (16, 32)
DATAFLOWS = {"output_stationary": "os", "weight_stationary": "ws"}
SRAM_KB = 64
GEMM_FIELDS = {"m", "k", "n"}
FIELDS = [
    "layer",
    "op",
    "in_h",
    "in_w",
    "in_c",
    "kernel",
    "stride",
    "pad",
    "out_c",
    "m",
    "k",
    "n",
    "array",
    "dataflow",
    "compute_cycles",
    "stall_cycles",
]


@dataclass(frozen=True)
class Layer:
    """A square-kernel convolution (NCHW input in_c x in_h x in_w) or a GEMM (M x K @ K x N)."""

    name: str
    op: str  # "conv2d" or "gemm"
    in_h: int = 0
    in_w: int = 0
    in_c: int = 0
    kernel: int = 0
    stride: int = 1
    pad: int = 0
    out_c: int = 0
    m: int = 0
    k: int = 0
    n: int = 0

    def output_extent(self, extent: int) -> int:
        return (extent + 2 * self.pad - self.kernel) // self.stride + 1

    def topology_row(self) -> str:
        """This layer as a row of SCALE-Sim's conv or GEMM topology CSV."""
        if self.op == "gemm":
            return f"{self.name}, {self.m}, {self.n}, {self.k},"
        ifmap_h = (self.output_extent(self.in_h) - 1) * self.stride + self.kernel
        ifmap_w = (self.output_extent(self.in_w) - 1) * self.stride + self.kernel
        return (
            f"{self.name}, {ifmap_h}, {ifmap_w}, {self.kernel}, {self.kernel}, {self.in_c},"
            f" {self.out_c}, {self.stride},"
        )


LAYERS = (
    # The layers the issue measured.
    Layer("alexnet_conv1", "conv2d", 227, 227, 3, 11, 4, 0, 96),
    Layer("resnet_conv3x3_56", "conv2d", 56, 56, 64, 3, 1, 1, 64),
    Layer("resnet_conv3x3_28", "conv2d", 28, 28, 128, 3, 1, 1, 128),
    Layer("conv1x1_14", "conv2d", 14, 14, 256, 1, 1, 0, 1024),
    Layer("gemm_256", "gemm", m=256, k=256, n=256),
    Layer("gemm_1024", "gemm", m=1024, k=1024, n=1024),
    # More shapes: a strided 7x7 stem, a stride-2 downsampling conv, a 7x7 map whose 49 pixels
    # leave most of a fold empty, a pointwise conv and a transformer feed-forward GEMM.
    Layer("resnet_stem_7x7_s2", "conv2d", 224, 224, 3, 7, 2, 3, 64),
    Layer("resnet_down_3x3_s2", "conv2d", 56, 56, 64, 3, 2, 1, 128),
    Layer("resnet_conv3x3_7", "conv2d", 7, 7, 512, 3, 1, 1, 512),
    Layer("pointwise_28", "conv2d", 28, 28, 128, 1, 1, 0, 256),
    Layer("bert_ffn_gemm", "gemm", m=128, k=768, n=3072),
)


def scalesim_config(run_name: str, array: int, dataflow: str) -> str:
    return f"""[general]
run_name = {run_name}

[architecture_presets]
ArrayHeight: {array}
ArrayWidth: {array}
IfmapSramSzkB: {SRAM_KB}
FilterSramSzkB: {SRAM_KB}
OfmapSramSzkB: {SRAM_KB}
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Bandwidth: 10
Dataflow: {DATAFLOWS[dataflow]}
MemoryBanks: 1
ReadRequestBuffer: 512
WriteRequestBuffer: 512

[layout]
IfmapCustomLayout: False
FilterCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2

[run_presets]
InterfaceBandwidth: CALC
UseRamulatorTrace: False

[sparsity]
SparsitySupport: false
"""


# Runs inside the SCALE-Sim venv: argv = config, topology, layout, output dir, gemm (0/1).
SIMULATE = """
import sys
from scalesim.scale_sim import scalesim
config, topology, layout, out, gemm = sys.argv[1:6]
sim = scalesim(save_disk_space=True, verbose=False, config=config, topology=topology,
               layout=layout, input_type_gemm=gemm == "1")
sim.run_scale(top_path=out)
"""


def ensure_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import importlib.metadata as m; print(m.version('scalesim'))"]
    if python.exists():
        found = subprocess.run(probe, capture_output=True, text=True)
        if found.returncode == 0 and found.stdout.strip() == SCALESIM_VERSION:
            return python
    print(f"creating {venv} with scalesim=={SCALESIM_VERSION} and numpy<2", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"scalesim=={SCALESIM_VERSION}", "numpy<2"],
        check=True,
    )
    return python


def simulate(python: Path, layer: Layer, array: int, dataflow: str, cache: Path) -> dict[str, str]:
    """Runs one layer through SCALE-Sim (or takes the row an earlier run left in ``cache``:
    the big GEMMs take the better part of an hour each); returns its CSV row."""
    run_name = f"{layer.name}_{array}x{array}_{DATAFLOWS[dataflow]}"
    cached = cache / f"{run_name}.json"
    if cached.exists():
        return json.loads(cached.read_text())
    with tempfile.TemporaryDirectory(prefix="scalesim_") as tmp:
        work = Path(tmp)
        (work / "config.cfg").write_text(scalesim_config(run_name, array, dataflow))
        header = (
            "Layer, M, N, K,"
            if layer.op == "gemm"
            else (
                "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels,"
                " Num Filter, Strides,"
            )
        )
        (work / "topology.csv").write_text(f"{header}\n{layer.topology_row()}\n")
        # SCALE-Sim 3 reads a layout row per layer even with custom layouts off; unused then.
        layout = ",".join(["1"] * 6 + ["0", "1", "2"] * 2 + ["0", "1", "2", "3"] * 2)
        (work / "layout.csv").write_text(f"Layer name,{',' * 19}\n{layer.name}, {layout},\n")
        subprocess.run(
            [
                str(python),
                "-c",
                SIMULATE,
                str(work / "config.cfg"),
                str(work / "topology.csv"),
                str(work / "layout.csv"),
                str(work / "out"),
                "1" if layer.op == "gemm" else "0",
            ],
            check=True,
            cwd=work,
        )
        report = work / "out" / run_name / "COMPUTE_REPORT.csv"
        with report.open() as f:
            rows = [[cell.strip() for cell in row] for row in csv.reader(f)]
    columns = {name: i for i, name in enumerate(rows[0])}
    values = rows[1]
    row = {field: "" for field in FIELDS}
    for field in ("layer", "op"):
        row[field] = getattr(layer, field if field != "layer" else "name")
    for field in ("in_h", "in_w", "in_c", "kernel", "stride", "pad", "out_c", "m", "k", "n"):
        value = getattr(layer, field)
        row[field] = str(value) if (layer.op == "gemm") == (field in GEMM_FIELDS) else ""
    row["array"] = str(array)
    row["dataflow"] = dataflow
    row["compute_cycles"] = values[columns["Total Cycles"]]
    row["stall_cycles"] = values[columns["Stall Cycles"]]
    print(f"{run_name}: {row['compute_cycles']} cycles", flush=True)
    cache.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(row))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--jobs", type=int, default=1, help="SCALE-Sim processes at a time")
    parser.add_argument(
        "--cache",
        type=Path,
        default=DEFAULT_CACHE,
        help="one finished run per file; delete it to run SCALE-Sim again",
    )
    parser.add_argument(
        "--only", nargs="*", help="run just these layers (the CSV then holds only them)"
    )
    parser.add_argument(
        "--arrays", nargs="*", type=int, default=list(ARRAYS), help="array sizes to run"
    )
    args = parser.parse_args()
    layers = [layer for layer in LAYERS if not args.only or layer.name in args.only]
    python = ensure_venv(args.venv)
    runs = [(layer, a, df) for layer in layers for a in args.arrays for df in DATAFLOWS]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        rows = list(pool.map(lambda run: simulate(python, *run, args.cache), runs))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        today = datetime.date.today().isoformat()
        f.write(f"# SCALE-Sim {SCALESIM_VERSION} (PyPI scalesim, with numpy<2), {today}\n")
        f.write(
            f"# config: ArrayHeight = ArrayWidth = array, Dataflow os|ws, IfmapSramSzkB ="
            f" FilterSramSzkB = OfmapSramSzkB = {SRAM_KB}, MemoryBanks 1, InterfaceBandwidth CALC"
            " (stall-free), SparsitySupport false, custom layouts off\n"
        )
        f.write(
            "# compute_cycles: COMPUTE_REPORT.csv 'Total Cycles' (stall_cycles 'Stall Cycles');"
            " conv2d rows ran on the unpadded input extent giving the same output\n"
        )
        f.write("# regenerate: python3 tools/scalesim_reference.py\n")
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
