"""Design-space sweeps: one model estimated under many NPUConfigs, locally or on a Dask cluster.

``sweep(model, configs)`` runs ``estimate`` (partition, compile, timing model; nothing is
executed) for every configuration. Work goes out in chunks: to a local pool of processes by
default, to any ``concurrent.futures.Executor``, or to a Dask cluster through a
``distributed.Client``, which receives the model once per worker (``scatter(broadcast=True)``).
The model travels as a ``ModelSnapshot`` (TVMScript text plus constants), because the pinned TVM
cannot pickle an IRModule. A configuration that is invalid or cannot be compiled becomes a row
with the reason instead of stopping the sweep.
"""

from __future__ import annotations

import csv
import io
import itertools
import multiprocessing
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import tvm

from ..config import InvalidConfigError, NPUConfig
from ..partition.report import partition_with_report
from .estimate import bind_input_shapes, profile_partitioned
from .portable import ModelSnapshot

CONFIG_FIELDS = tuple(field.name for field in fields(NPUConfig))
METRICS = (
    "latency_us",
    "energy_uj",
    "total_cycles",
    "macs",
    "matrix_busy_cycles",
    "matrix_utilization",
    "dram_bytes",
    "l2_bytes",
    "l1_bytes",
    "npu_ops",
    "cpu_ops",
)
COLUMNS = CONFIG_FIELDS + METRICS + ("cpu_fallback", "error")
# Chunks per worker: enough to even out configurations of different cost, few enough that the
# per-task overhead stays small.
_CHUNKS_PER_WORKER = 4
# A local process pool is used when the remaining work would take longer than this in one
# process: starting the workers (importing TVM, parsing the model) costs a few seconds.
_POOL_PAYS_OFF_SECONDS = 10.0

Point = dict[str, Any]
Row = dict[str, Any]
_DEFAULTS: Point = asdict(NPUConfig())


def config_grid(base: NPUConfig | None = None, **values: Sequence[Any]) -> list[Point]:
    """Every combination of ``values`` (field name -> list of values) on top of ``base``, as
    field dicts for ``sweep``. Invalid combinations are kept: the sweep reports why."""
    unknown = sorted(set(values) - set(CONFIG_FIELDS))
    if unknown:
        raise ValueError(f"NPUConfig has no fields {unknown}")
    start = asdict(base) if base is not None else {}
    names = list(values)
    return [
        {**start, **dict(zip(names, combo, strict=True))}
        for combo in itertools.product(*(values[name] for name in names))
    ]


def _points(configs: Iterable[NPUConfig | Mapping[str, Any]] | Mapping[str, Sequence[Any]]):
    if isinstance(configs, Mapping):
        return config_grid(**configs)
    return [asdict(c) if isinstance(c, NPUConfig) else dict(c) for c in configs]


# Models a worker process has loaded, by snapshot digest (a worker serves one sweep at a time).
_LOADED: dict[str, tvm.IRModule] = {}
_INSTALLED: list[ModelSnapshot] = []


def _install(snapshot: ModelSnapshot) -> None:
    """Process-pool initializer: the model every task of this worker uses."""
    _INSTALLED[:] = [snapshot]


def _model(model: tvm.IRModule | ModelSnapshot | None) -> tvm.IRModule:
    model = model if model is not None else _INSTALLED[0]
    if isinstance(model, tvm.IRModule):
        return model
    loaded = _LOADED.get(model.digest)
    if loaded is None:
        loaded = model.load()
        _LOADED.clear()
        _LOADED[model.digest] = loaded
    return loaded


def _row(mod: tvm.IRModule, point: Point) -> Row:
    row: Row = {**_DEFAULTS, **{k: v for k, v in point.items() if k in _DEFAULTS}}
    row.update(dict.fromkeys(METRICS), cpu_fallback="", error="")
    try:
        unknown = sorted(set(point) - set(_DEFAULTS))
        if unknown:
            raise InvalidConfigError(f"unknown NPUConfig fields: {unknown}")
        config = NPUConfig(**point)
        partitioned, report = partition_with_report(mod, config)
        row.update(
            npu_ops=sum(report.npu_ops.values()),
            cpu_ops=sum(report.cpu_ops.values()),
            cpu_fallback="; ".join(
                f"{op}: {'; '.join(sorted(reasons))}"
                for op, reasons in sorted(report.reasons.items())
            ),
        )
        prof = profile_partitioned(partitioned)
    except Exception as err:  # noqa: BLE001 - any failure of one config is that row's result
        first_line = (str(err).strip().splitlines() or [""])[0]
        row["error"] = f"{type(err).__name__}: {first_line}"
        return row
    row.update(
        latency_us=prof.latency_us,
        energy_uj=prof.energy_uj,
        total_cycles=prof.total_cycles,
        macs=prof.macs,
        matrix_busy_cycles=prof.busy_cycles["matrix"],
        matrix_utilization=prof.utilization["matrix"],
        dram_bytes=prof.bytes_moved["DRAM"],
        l2_bytes=prof.bytes_moved["L2"],
        l1_bytes=prof.bytes_moved["L1"],
    )
    return row


def _estimate_points(
    model: tvm.IRModule | ModelSnapshot | None,
    points: list[Point],
    input_shapes: Mapping[str, Sequence[int]] | None,
) -> list[Row]:
    """One task: every point of a chunk on one worker (module-level, so pools can pickle it)."""
    mod = _model(model)
    if input_shapes:
        mod = bind_input_shapes(mod, input_shapes)
    return [_row(mod, point) for point in points]


def _is_dask_client(executor: Any) -> bool:
    return type(executor).__module__.startswith("distributed") and hasattr(executor, "scatter")


def _chunks(points: list[Point], workers: int) -> list[list[Point]]:
    count = max(1, min(len(points), workers * _CHUNKS_PER_WORKER))
    size = -(-len(points) // count)
    return [points[i : i + size] for i in range(0, len(points), size)]


def _run_locally(
    mod: tvm.IRModule, points: list[Point], input_shapes: Mapping[str, Sequence[int]] | None
) -> list[Row]:
    """In this process until one valid configuration has been timed; the rest in a pool of
    processes when that pays for starting them (each imports TVM and parses the model)."""
    rows: list[Row] = []
    started = time.perf_counter()
    while len(rows) < len(points) and all(row["error"] for row in rows):
        rows += _estimate_points(mod, [points[len(rows)]], input_shapes)
    rest = points[len(rows) :]
    workers = min(os.cpu_count() or 1, len(rest))
    if workers <= 1 or (time.perf_counter() - started) * len(rest) < _POOL_PAYS_OFF_SECONDS:
        return rows + _estimate_points(mod, rest, input_shapes)
    # spawn: a fresh interpreter per worker, never a fork of this (threaded) process.
    with ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_install,
        initargs=(ModelSnapshot(mod),),
    ) as pool:
        futures = [
            pool.submit(_estimate_points, None, chunk, input_shapes)
            for chunk in _chunks(rest, workers)
        ]
        return rows + [row for future in futures for row in future.result()]


def _run(
    mod: tvm.IRModule,
    points: list[Point],
    executor: Executor | Any | None,
    input_shapes: Mapping[str, Sequence[int]] | None,
) -> list[Row]:
    if executor is None:
        return _run_locally(mod, points, input_shapes)
    if _is_dask_client(executor):
        workers = max(1, sum(executor.nthreads().values()))
        model = executor.scatter(ModelSnapshot(mod), broadcast=True)
        futures = [
            executor.submit(_estimate_points, model, chunk, input_shapes, pure=False)
            for chunk in _chunks(points, workers)
        ]
        return [row for rows in executor.gather(futures) for row in rows]
    if not isinstance(executor, Executor):
        raise TypeError(
            f"executor must be a concurrent.futures.Executor or a distributed.Client, got "
            f"{type(executor).__name__}"
        )
    workers = getattr(executor, "_max_workers", None) or os.cpu_count() or 1
    # Threads share this process's module; anything else may pickle the arguments.
    shipped = mod if isinstance(executor, ThreadPoolExecutor) else ModelSnapshot(mod)
    futures = [
        executor.submit(_estimate_points, shipped, chunk, input_shapes)
        for chunk in _chunks(points, workers)
    ]
    return [row for future in futures for row in future.result()]


def sweep(
    model: tvm.IRModule,
    configs: Iterable[NPUConfig | Mapping[str, Any]] | Mapping[str, Sequence[Any]],
    *,
    executor: Executor | Any | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> SweepResult:
    """Estimates ``model`` under every configuration of ``configs`` and returns one row each.

    ``configs`` is a list of ``NPUConfig`` objects or field dicts, or a grid: a dict of field
    name -> list of values (``{"l1_sram_kb": [64, 256], "dataflow": [...]}``) whose every
    combination is swept. ``executor``: None runs locally, on a pool of ``os.cpu_count()``
    processes once the first configuration shows the sweep would take more than a few seconds;
    a ``distributed.Client`` runs on its Dask cluster; any ``concurrent.futures.Executor`` is
    used as it is. ``input_shapes`` binds symbolic input dims (see ``estimate``). Rows keep the
    order of ``configs``.
    """
    points = _points(configs)
    if not points:
        raise ValueError("sweep: no configurations given")
    return SweepResult(_run(model, points, executor, input_shapes))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass
class SweepResult:
    """One row per configuration: every NPUConfig field, the metrics, and for a failed
    configuration the reason (``error``). ``cpu_fallback`` lists ops this configuration left on
    the CPU, with the check's reason (an L1 too small for a layer, say)."""

    rows: list[Row]

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def valid(self) -> list[Row]:
        return [row for row in self.rows if not row["error"]]

    @property
    def failed(self) -> list[Row]:
        return [row for row in self.rows if row["error"]]

    def varying_fields(self) -> list[str]:
        """The NPUConfig fields whose values differ between rows."""
        return [f for f in CONFIG_FIELDS if len({repr(row[f]) for row in self.rows}) > 1]

    def pareto(self, x: str = "latency_us", y: str = "energy_uj") -> SweepResult:
        """The rows no other row beats on both ``x`` and ``y`` (lower is better), sorted by
        ``x``. Only configurations that run the most ops on the NPU compete: one that leaves a
        layer on the CPU does less NPU work and is not comparable."""
        candidates = [
            r for r in self.valid if _number(r[x]) is not None and _number(r[y]) is not None
        ]
        if not candidates:
            return SweepResult([])
        most = max(row["npu_ops"] for row in candidates)
        candidates = sorted(
            (r for r in candidates if r["npu_ops"] == most), key=lambda r: (r[x], r[y])
        )
        front: list[Row] = []
        for row in candidates:
            if not front or row[y] < front[-1][y]:
                front.append(row)
        return SweepResult(front)

    def to_csv(self, path: str | Path | None = None) -> str:
        """The rows as CSV (every column); also written to ``path`` when given."""
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(COLUMNS), lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows)
        text = out.getvalue()
        if path is not None:
            Path(path).write_text(text)
        return text

    def table(self, columns: Sequence[str] | None = None) -> str:
        """A text table of the varying config fields and the main metrics."""
        columns = list(columns or self.varying_fields()) + [
            "latency_us",
            "energy_uj",
            "dram_bytes",
            "npu_ops",
        ]
        if self.failed:
            columns.append("error")
        cells = [[_cell(row[c]) for c in columns] for row in self.rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
        lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
        return "\n".join(line.rstrip() for line in lines)

    def plot(self, path: str | Path, x: str = "latency_us", y: str = "energy_uj") -> Path:
        """Writes a PNG: every valid configuration, the Pareto front joined and labelled with
        its varying fields (needs matplotlib)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        valid = [r for r in self.valid if _number(r[x]) is not None]
        front = self.pareto(x, y).rows
        varying = self.varying_fields()
        fig, ax = plt.subplots(figsize=(10, 5.5))
        ax.scatter(
            [r[x] for r in valid],
            [r[y] for r in valid],
            s=18,
            c="tab:gray",
            alpha=0.6,
            label=f"{len(valid)} configurations",
        )
        ax.plot(
            [r[x] for r in front],
            [r[y] for r in front],
            "o-",
            c="tab:red",
            drawstyle="steps-post",
            label=f"Pareto front ({len(front)})",
        )
        # Numbers on the front, their configurations listed beside the plot (labels on dense
        # fronts would overlap).
        legend_lines = []
        for number, row in enumerate(front, start=1):
            ax.annotate(
                str(number), (row[x], row[y]), textcoords="offset points", xytext=(4, 4), fontsize=8
            )
            legend_lines.append(f"{number}: " + ", ".join(_short(f, row[f]) for f in varying))
        fig.text(0.74, 0.93, "\n".join(legend_lines), va="top", fontsize=8, family="monospace")
        fig.subplots_adjust(left=0.08, right=0.72, top=0.92, bottom=0.1)
        for set_scale, values in (
            (ax.set_xscale, [r[x] for r in valid]),
            (ax.set_yscale, [r[y] for r in valid]),
        ):
            if values and min(values) > 0 and max(values) / min(values) > 20:
                set_scale("log")
        ax.set_xlabel(_axis_label(x))
        ax.set_ylabel(_axis_label(y))
        failed = len(self.failed)
        ax.set_title("example-npu design-space sweep" + (f" ({failed} failed)" if failed else ""))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
        path = Path(path)
        fig.savefig(path, dpi=120)
        plt.close(fig)
        return path


_UNITS = {"latency_us": "latency (us)", "energy_uj": "energy per inference (uJ)"}
_SHORT = {
    "l1_sram_kb": "L1 {}K",
    "l2_cmx_kb": "L2 {}K",
    "matrix_engine_dim": "{0}x{0}",
    "power_mode": "{}",
    "dataflow": "{}",
    "dram_bandwidth_gb_per_s": "{} GB/s",
}
_ABBREVIATIONS = {
    "output_stationary": "OS",
    "weight_stationary": "WS",
    "high_performance": "hp",
    "balanced": "bal",
    "low_power": "lp",
}


def _axis_label(key: str) -> str:
    return _UNITS.get(key, key)


def _short(field: str, value: Any) -> str:
    value = _ABBREVIATIONS.get(value, value) if isinstance(value, str) else value
    return _SHORT.get(field, field + "={}").format(value)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
