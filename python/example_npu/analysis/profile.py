"""Profile API: cycles, latency, energy and memory traffic of one inference on the NPU model.

``profile(executable, *inputs)`` runs the model once with a profiling session open; every NPU
subgraph called during the run reports the schedule the emulator's timing model computed for it
(the cost depends on shapes and the NPUConfig, not on values). Subgraphs run one after another,
so their cycles add up; CPU parts of the model are not timed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm import relax

TIERS = ("L0", "L1", "L2", "DRAM")
ENGINES = ("matrix", "vector", "activation", "pooling", "dma")
USED_TIERS = ("L1", "L2", "DRAM")


@dataclass
class NodeRecord:
    """One fused group of ops executed as a tile loop on one engine."""

    subgraph: str
    name: str
    ops: list[str]
    engine: str
    tiles: int
    tile_shape: list[int]
    macs: int
    cycles: int
    bytes: dict[str, int]
    energy_uj: float
    l1_bytes: int
    l2_bytes: int


@dataclass
class Profile:
    """Aggregate of every NPU subgraph executed in one run."""

    power_mode: str
    clock_mhz: float
    total_cycles: int = 0
    energy_uj: float = 0.0
    macs: int = 0
    bytes_moved: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    busy_cycles: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ENGINES, 0))
    # High-water marks: the most L1 / L2 bytes in use at once (a group's tile buffers and staged
    # weights, and the next group's while they overlap) and the DRAM scratch, over subgraphs
    # (which run one after another).
    memory_used: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USED_TIERS, 0))
    nodes: list[NodeRecord] = field(default_factory=list)
    subgraphs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def latency_us(self) -> float:
        return self.total_cycles / self.clock_mhz

    @property
    def utilization(self) -> dict[str, float]:
        """Busy cycles per engine over the total; DMA counts every channel."""
        total = max(self.total_cycles, 1)
        return {engine: busy / total for engine, busy in self.busy_cycles.items()}

    def table(self) -> str:
        """A text table: one row per NPU node, then totals."""
        header = (
            f"{'node':<28}{'ops':<34}{'engine':<11}{'tiles':>6}{'MACs':>12}{'cycles':>10}"
            f"{'DRAM B':>11}{'L2 B':>10}{'L1 B':>11}{'uJ':>9}"
        )
        lines = [header, "-" * len(header)]
        for node in self.nodes:
            lines.append(
                f"{node.name[:27]:<28}{'+'.join(node.ops)[:33]:<34}{node.engine:<11}"
                f"{node.tiles:>6}{node.macs:>12}{node.cycles:>10}{node.bytes['DRAM']:>11}"
                f"{node.bytes['L2']:>10}{node.bytes['L1']:>11}{node.energy_uj:>9.3f}"
            )
        lines.append("-" * len(header))
        utilization = ", ".join(f"{k} {v:.0%}" for k, v in self.utilization.items() if v > 0)
        lines.append(
            f"total: {self.total_cycles} cycles = {self.latency_us:.2f} us at {self.clock_mhz:.0f}"
            f" MHz ({self.power_mode}), {self.energy_uj:.3f} uJ, {self.macs} MACs; bytes "
            + ", ".join(f"{tier} {self.bytes_moved[tier]}" for tier in TIERS)
        )
        lines.append(f"engine utilization: {utilization}")
        return "\n".join(lines)

    def to_chrome_trace(self, path: str | Path) -> Path:
        """Writes a Chrome trace (open in https://ui.perfetto.dev): one track per engine and DMA
        channel, subgraphs laid end to end, times in microseconds. Groups of one subgraph may
        overlap in time (a group loads while the previous one computes), so the group spans take
        as many "groups" tracks as overlap at once."""
        events: list[dict[str, Any]] = []
        tracks: dict[str, int] = {}
        group_lanes: list[int] = []  # end time of the last group on each lane
        offset = 0
        for sub in self.subgraphs:
            scale = 1.0 / sub["clock_mhz"]
            for command, track, start, duration in sub["events"]:
                tid = tracks.setdefault(track, len(tracks) + 1)
                events.append(
                    {
                        "name": f"#{command}",
                        "cat": sub["symbol"],
                        "ph": "X",
                        "pid": 1,
                        "tid": tid,
                        "ts": (offset + start) * scale,
                        "dur": max(duration, 1) * scale,
                    }
                )
            for group in sorted(sub["groups"], key=lambda g: g["start"]):
                start = offset + group["start"]
                lane = next((i for i, end in enumerate(group_lanes) if end <= start), None)
                if lane is None:
                    lane = len(group_lanes)
                    group_lanes.append(0)
                group_lanes[lane] = offset + group["end"]
                events.append(
                    {
                        "name": f"{group['name']} ({'+'.join(group['ops'])})",
                        "ph": "X",
                        "pid": 1,
                        "tid": -lane,
                        "ts": (offset + group["start"]) * scale,
                        "dur": max(group["end"] - group["start"], 1) * scale,
                        "args": {"tiles": group["tiles"], "macs": group["macs"]},
                    }
                )
            offset += sub["total_cycles"]
        lanes = {
            -lane: "groups" + (f" {lane + 1}" if lane else "") for lane in range(len(group_lanes))
        }
        names = {**lanes, **{tid: track for track, tid in tracks.items()}}
        for tid, name in names.items():
            events.append(
                {"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}}
            )
        path = Path(path)
        path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}))
        return path


def aggregate_profiles(subgraph_json: list[str], empty: str) -> Profile:
    """One Profile from the JSON profiles of NPU subgraphs in execution order (raises
    ValueError(empty) when there is none)."""
    subs = [json.loads(text) for text in subgraph_json]
    if not subs:
        raise ValueError(empty)
    result = Profile(power_mode=subs[0]["power_mode"], clock_mhz=subs[0]["clock_mhz"])
    for sub in subs:
        result.subgraphs.append(sub)
        result.total_cycles += sub["total_cycles"]
        result.energy_uj += sub["energy_pj"] * 1e-6
        result.macs += sub["macs"]
        for tier in TIERS:
            result.bytes_moved[tier] += sub["bytes"][tier]
        for engine in ENGINES:
            result.busy_cycles[engine] += sub["busy_cycles"][engine]
        for tier in USED_TIERS:
            result.memory_used[tier] = max(result.memory_used[tier], sub["memory_used"][tier])
        for group in sub["groups"]:
            result.nodes.append(
                NodeRecord(
                    subgraph=sub["symbol"],
                    name=group["name"],
                    ops=list(group["ops"]),
                    engine=group["engine"],
                    tiles=group["tiles"],
                    tile_shape=list(group["tile_shape"]),
                    macs=group["macs"],
                    cycles=group["end"] - group["start"],
                    bytes=dict(group["bytes"]),
                    energy_uj=group["energy_pj"] * 1e-6,
                    l1_bytes=group["l1_bytes"],
                    l2_bytes=group["l2_bytes"],
                )
            )
    return result


def profile(executable: Any, *inputs: Any, device: Any = None, entry: str = "main") -> Profile:
    """Runs ``entry`` once on ``inputs`` (numpy arrays or tensors) and profiles the NPU parts."""
    return run_and_profile(executable, *inputs, device=device, entry=entry)[1]


def run_and_profile(
    executable: Any, *inputs: Any, device: Any = None, entry: str = "main"
) -> tuple[Any, Profile]:
    """``profile``, also returning what ``entry`` returned on that one run."""
    device = device if device is not None else tvm.cpu()
    vm = relax.VirtualMachine(executable, device)
    args = [tvm.runtime.tensor(x, device) if isinstance(x, np.ndarray) else x for x in inputs]
    tvm_ffi.get_global_func("example_npu.profiler_begin")()
    try:
        result = vm[entry](*args)
    finally:
        recorded = list(tvm_ffi.get_global_func("example_npu.profiler_end")())
    return result, aggregate_profiles(
        [str(text) for text in recorded],
        empty="the run executed no NPU subgraph: nothing to profile",
    )
