"""Network summary of one run: the partition report and the NPU profile as one set of numbers.

``network_summary`` collects them into a JSON-ready dict, ``summary_text`` prints that dict the
way Vela prints its network summary, and ``layer_rows`` gives one row per NPU layer (fused
group) for the CSV and JSON files. The text, the CSV and the JSON are all made from these two
structures, so they always hold the same numbers.
"""

from __future__ import annotations

import csv
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..config import NPUConfig
from ..partition.report import PartitionReport
from .profile import ENGINES, TIERS, Profile

LAYER_COLUMNS = (
    "subgraph",
    "layer",
    "ops",
    "engine",
    "tiles",
    "tile_shape",
    "macs",
    "cycles",
    "cycles_percent",
    *(f"bytes_{tier}" for tier in TIERS),
    "l1_used_bytes",
    "l2_used_bytes",
    "energy_uj",
)


def layer_rows(profile: Profile) -> list[dict[str, Any]]:
    """One row per NPU layer, keyed by LAYER_COLUMNS."""
    total = max(profile.total_cycles, 1)
    return [
        {
            "subgraph": node.subgraph,
            "layer": node.name,
            "ops": "+".join(node.ops),
            "engine": node.engine,
            "tiles": node.tiles,
            "tile_shape": "x".join(map(str, node.tile_shape)),
            "macs": node.macs,
            "cycles": node.cycles,
            "cycles_percent": round(100.0 * node.cycles / total, 2),
            **{f"bytes_{tier}": node.bytes[tier] for tier in TIERS},
            "l1_used_bytes": node.l1_bytes,
            "l2_used_bytes": node.l2_bytes,
            "energy_uj": node.energy_uj,
        }
        for node in profile.nodes
    ]


def network_summary(
    model: str, report: PartitionReport, profile: Profile, config: NPUConfig
) -> dict[str, Any]:
    """Op counts per side, memory used and moved per tier, MACs, cycles, latency, energy and
    engine utilization of one inference. Latency and energy cover the NPU parts only."""
    npu_ops, cpu_ops = sum(report.npu_ops.values()), sum(report.cpu_ops.values())
    latency_us = profile.latency_us
    return {
        "model": model,
        "npu_config": asdict(config),
        "power_mode": profile.power_mode,
        "clock_mhz": profile.clock_mhz,
        "npu_functions": len(report.npu_functions),
        "npu_ops": npu_ops,
        "cpu_ops": cpu_ops,
        "npu_op_counts": dict(sorted(report.npu_ops.items())),
        "cpu_op_counts": {
            op: {"count": count, "reason": report.cpu_reason(op)}
            for op, count in sorted(report.cpu_ops.items())
        },
        "sram_used_bytes": {"L1": profile.memory_used["L1"], "L2": profile.memory_used["L2"]},
        "sram_size_bytes": {"L1": config.l1_sram_kb * 1024, "L2": config.l2_cmx_kb * 1024},
        "dram_scratch_bytes": profile.memory_used["DRAM"],
        "bytes_moved": dict(profile.bytes_moved),
        "macs": profile.macs,
        "cycles": profile.total_cycles,
        "latency_us": latency_us,
        "inferences_per_s": 1e6 / latency_us if latency_us > 0 else None,
        "energy_uj": profile.energy_uj,
        "utilization": {engine: profile.utilization[engine] for engine in ENGINES},
    }


_SRAM_NAMES = {"L1": "SRAM", "L2": "CMX"}


def _kib(size: int) -> str:
    return f"{size / 1024:,.2f} KiB"


def summary_text(summary: dict[str, Any]) -> str:
    """The summary as aligned ``label  value`` lines."""
    total_ops = max(summary["npu_ops"] + summary["cpu_ops"], 1)
    config = summary["npu_config"]
    lines = [
        (
            "NPU",
            f"{config['matrix_engine_dim']}x{config['matrix_engine_dim']} matrix engine, "
            f"{config['vector_unit_width']}-wide vector unit, {config['tile_height']}x"
            f"{config['tile_width']} tiles",
        ),
        ("Power mode", f"{summary['power_mode']}, {summary['clock_mhz']:.0f} MHz"),
        ("NPU functions", f"{summary['npu_functions']}"),
        ("NPU operators", f"{summary['npu_ops']} ({100 * summary['npu_ops'] / total_ops:.1f}%)"),
        ("CPU operators", f"{summary['cpu_ops']} ({100 * summary['cpu_ops'] / total_ops:.1f}%)"),
    ]
    lines += [
        (f"  {op} x{entry['count']}", entry["reason"])
        for op, entry in summary["cpu_op_counts"].items()
    ]
    for tier, used in summary["sram_used_bytes"].items():
        size = summary["sram_size_bytes"][tier]
        share = f"{_kib(used)} of {_kib(size)} ({100 * used / size:.1f}%)"
        lines.append((f"{tier} {_SRAM_NAMES[tier]} used", share))
    lines.append(("DRAM scratch used", _kib(summary["dram_scratch_bytes"])))
    lines += [
        (f"{tier} bytes moved", f"{moved:,}") for tier, moved in summary["bytes_moved"].items()
    ]
    rate = summary["inferences_per_s"]
    lines += [
        ("MACs", f"{summary['macs']:,}"),
        ("NPU cycles", f"{summary['cycles']:,}"),
        (
            "NPU latency",
            f"{summary['latency_us']:,.2f} us"
            + (f" ({rate:,.1f} inferences/s)" if rate else "")
            + "; CPU parts not timed",
        ),
        ("NPU energy", f"{summary['energy_uj']:,.3f} uJ"),
        (
            "Engine utilization",
            ", ".join(f"{engine} {share:.1%}" for engine, share in summary["utilization"].items()),
        ),
    ]
    width = max(len(label) for label, _ in lines) + 2
    rows = [f"{label:<{width}}{value}" for label, value in lines]
    return "\n".join([f"Network summary for {summary['model']}", *rows])


def write_layers_csv(rows: list[dict[str, Any]], path: str | Path) -> Path:
    path = Path(path)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=LAYER_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path
