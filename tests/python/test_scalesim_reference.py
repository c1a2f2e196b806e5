"""The matrix-engine timing model against SCALE-Sim 3.0.0 (tests/python/data/scalesim_reference.csv,
made by tools/scalesim_reference.py; SCALE-Sim itself never runs here).

Each row is an int8 layer on a 16x16 or 32x32 array under output- or weight-stationary dataflow,
with SCALE-Sim's stall-free compute cycles. SCALE-Sim's stall-free mode lets no memory limit the
schedule, so the NPU is given memories that do not either: an L1 that holds a layer's operands
and accumulators, and DRAM fast enough that the tiling keeps a layer in few tiles. The NPU's
matrix-engine busy cycles (every command's folds plus its issue cycles) must then be within 2% of
SCALE-Sim's. At the default 256 KB L1 the tiling adds fill and drain per tile; those ratios are
reported, and can only be higher.
"""

from __future__ import annotations

import csv
from pathlib import Path

import example_npu
import numpy as np
import pytest
import tvm
from example_npu import NPUConfig
from qdq_models import qdq_module

DATA = Path(__file__).parent / "data" / "scalesim_reference.csv"
# Memories that never limit the schedule (SCALE-Sim's InterfaceBandwidth: CALC).
STALL_FREE = {"l1_sram_kb": 4096, "dram_bandwidth_gb_per_s": 1024.0}
TOLERANCE = 0.02


def _read() -> tuple[list[str], list[dict[str, str]]]:
    lines = DATA.read_text().splitlines()
    header = [line for line in lines if line.startswith("#")]
    rows = list(csv.DictReader(line for line in lines if not line.startswith("#")))
    return header, rows


HEADER, ROWS = _read()


def _layer(row: dict[str, str]) -> tvm.IRModule:
    """The row's layer as an int8 QDQ module (one qnn.conv2d / qnn.matmul on the NPU)."""
    rng = np.random.default_rng(0)
    if row["op"] == "gemm":
        m, k, n = int(row["m"]), int(row["k"]), int(row["n"])
        weight = rng.integers(-127, 128, (k, n)).astype("int8")
        scales = np.full((n,), 0.01, "float32")
        return qdq_module("matmul", (m, k), weight, scales, (0.05, 0), (0.1, 0))
    c, o, kernel = int(row["in_c"]), int(row["out_c"]), int(row["kernel"])
    weight = rng.integers(-127, 128, (o, c, kernel, kernel)).astype("int8")
    attrs = {"strides": int(row["stride"]), "padding": int(row["pad"])}
    x_shape = (1, c, int(row["in_h"]), int(row["in_w"]))
    scales = np.full((o,), 0.01, "float32")
    return qdq_module("conv2d", x_shape, weight, scales, (0.05, 0), (0.1, 0), conv_attrs=attrs)


def _busy(row: dict[str, str], **config) -> int:
    npu = NPUConfig(matrix_engine_dim=int(row["array"]), dataflow=row["dataflow"], **config)
    prof = example_npu.estimate(_layer(row), npu)
    assert [node.ops for node in prof.nodes] == [
        ["qnn." + ("matmul" if row["op"] == "gemm" else "conv2d")]
    ]
    return prof.busy_cycles["matrix"]


def test_the_reference_names_its_tool_config_and_covers_the_table():
    assert any("SCALE-Sim 3.0.0" in line for line in HEADER)
    assert any("InterfaceBandwidth CALC" in line and "64" in line for line in HEADER)
    layers = {row["layer"] for row in ROWS}
    assert len(layers) >= 10 and {"alexnet_conv1", "gemm_1024"} <= layers
    assert {(row["array"], row["dataflow"]) for row in ROWS} == {
        (a, d) for a in ("16", "32") for d in ("output_stationary", "weight_stationary")
    }
    assert all(row["stall_cycles"] == "0" for row in ROWS)


@pytest.mark.parametrize(
    "row", ROWS, ids=[f"{r['layer']}-{r['array']}-{r['dataflow'][:6]}" for r in ROWS]
)
def test_matrix_engine_busy_cycles_within_2_percent_of_scalesim(row, summary_line):
    reference = int(row["compute_cycles"])
    stall_free = _busy(row, **STALL_FREE)
    default = _busy(row)
    summary_line(
        f"scalesim {row['layer']:<20} {row['array']}x{row['array']} {row['dataflow']:<17} "
        f"SCALE-Sim {reference:>9}  NPU {stall_free / reference:.4f}x  "
        f"(256 KB L1: {default / reference:.4f}x)"
    )
    assert abs(stall_free / reference - 1) <= TOLERANCE
    # Tiling can only add folds and fills (SCALE-Sim rounds a cycle now and then).
    assert default >= reference - 1
