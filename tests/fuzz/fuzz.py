"""Seeded structural fuzzer of the NPU runtime's inputs: graph JSON, module bytes, NPUConfig.

Inputs are mutations (tests/fuzz/mutate.py) of the graphs the codegen produces for the test
models (tests/fuzz/corpus.py) and, for a share set by ``--programs``, Relax programs built from
the pattern table's ops with boundary-valued attributes (tests/fuzz/generate.py), partitioned
and run against TVM's CPU build: a difference is a ``wrong`` finding. Each runs in a worker
process (tests/fuzz/target.py), so a crash or a hang costs that worker, which is restarted, and
is counted instead of ending the run. Every input must end as ``ok`` or ``rejected`` (a
ValueError / TypeError); a crash, a hang, a worker over the memory limit (``oom``), a wrong
result or any other exception (``bad_error``) is a finding. Findings are
minimised and saved under ``--out``; the run exits 1 if there is any.

    .venv/bin/python tests/fuzz/fuzz.py --inputs 4000    # CI: seed 1, 2 workers
    .venv/bin/python tests/fuzz/fuzz.py --long --seed 7  # an hour, for local runs
    .venv/bin/python tests/fuzz/fuzz.py --replay tests/fuzz/regressions/*.json

Input ``i`` of seed ``s`` is drawn from ``numpy.random.default_rng([s, i])``, so a finding's
(seed, index) regenerates it with ``--only-index``. A finding becomes a regression test by
copying its minimised file into tests/fuzz/regressions/ (tests/python/test_fuzz_regressions.py
replays every file there).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import generate  # noqa: E402
import hostile_files  # noqa: E402
from mutate import FuzzInput, Mutator  # noqa: E402

GOOD = ("ok", "rejected")
OUTCOMES = ("ok", "rejected", "crash", "hang", "oom", "bad_error", "wrong")
LONG_BUDGET = 3600.0


# -- one worker process ------------------------------------------------------------------------
class Worker:
    """A target.py process fed one input at a time; restarted after a crash, hang or oom."""

    def __init__(self, log_path: Path, max_rss_mb: int, python: str = sys.executable):
        self.log_path = log_path
        self.max_rss_kb = max_rss_mb * 1024
        self.python = python
        self.proc: subprocess.Popen | None = None
        self.buffer = b""

    def start(self) -> None:
        self.log = open(self.log_path, "wb")  # noqa: SIM115  # closed in stop()
        self.proc = subprocess.Popen(
            [self.python, str(HERE / "target.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            start_new_session=True,
        )
        self.buffer = b""
        ready = self._read_line(timeout=600.0)
        if not isinstance(ready, dict) or not ready.get("ready"):
            raise RuntimeError(f"fuzz worker did not start: {ready} {self.stderr_tail()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None
        if hasattr(self, "log"):
            self.log.close()

    def stderr_tail(self, chars: int = 3000) -> str:
        self.log.flush()
        return self.log_path.read_bytes()[-chars:].decode("utf-8", errors="replace")

    def _rss_kb(self) -> int:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return 0

    def _read_line(self, timeout: float) -> dict | str:
        """The next JSON line, or "crash" / "hang" / "oom"."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return "hang"
            readable, _, _ = select.select([fd], [], [], min(left, 0.1))
            if readable:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    self.proc.wait()
                    return "crash"
                self.buffer += chunk
            elif self.proc.poll() is not None:
                return "crash"
            elif self._rss_kb() > self.max_rss_kb:
                return "oom"
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def run(self, inp: FuzzInput, timeout: float) -> tuple[str, str]:
        if self.proc is None:
            self.start()
        try:
            self.proc.stdin.write(inp.kind.encode() + struct.pack("<Q", len(inp.data)) + inp.data)
            self.proc.stdin.flush()
            reply = self._read_line(timeout)
        except (BrokenPipeError, ConnectionResetError):
            self.proc.wait()
            reply = "crash"
        if isinstance(reply, dict):
            return reply["outcome"], reply.get("detail", "")
        if reply == "crash":
            code = self.proc.returncode
            how = f"signal {-code}" if code is not None and code < 0 else f"exit {code}"
            detail = f"{how}\n{self.stderr_tail()}"
        else:
            detail = f"no answer within {timeout:g} s" if reply == "hang" else "over the RSS limit"
        self.stop()
        return reply, detail


# -- saved inputs --------------------------------------------------------------------------
def to_record(inp: FuzzInput, **fields: Any) -> dict:
    record: dict[str, Any] = {"kind": inp.kind, "description": inp.description}
    try:
        record["text"] = inp.data.decode("utf-8")
    except UnicodeDecodeError:
        record["base64"] = base64.b64encode(inp.data).decode()
    record.update(fields)
    return record


def from_record(record: dict) -> FuzzInput:
    data = (
        record["text"].encode("utf-8", errors="surrogatepass")
        if "text" in record
        else base64.b64decode(record["base64"])
    )
    return FuzzInput(record["kind"], data, record.get("description", ""))


# -- minimisation --------------------------------------------------------------------------
def _json_candidates(value: Any) -> list[Any]:
    """Smaller variants of a JSON value: one element or key removed, one leaf simplified."""
    out: list[Any] = []

    def walk(node: Any, rebuild) -> None:
        if isinstance(node, dict):
            for key in list(node):
                out.append(rebuild({k: v for k, v in node.items() if k != key}))
            for key in list(node):
                walk(node[key], lambda v, key=key: rebuild({**node, key: v}))
        elif isinstance(node, list):
            if len(node) > 1:
                half = len(node) // 2
                out.append(rebuild(node[:half]))
                out.append(rebuild(node[half:]))
            for i in range(len(node)):
                out.append(rebuild(node[:i] + node[i + 1 :]))
            for i in range(min(len(node), 32)):
                walk(node[i], lambda v, i=i: rebuild(node[:i] + [v] + node[i + 1 :]))
        elif isinstance(node, str) and len(node) > 8:
            out.append(rebuild(node[: len(node) // 2]))

    walk(value, lambda v: v)
    return out


def _encode(kind: str, value: Any, wrapped: bool) -> FuzzInput:
    text = json.dumps(value)
    if wrapped:
        text = json.dumps({"format": "example_npu_json", "version": 1, "graph": text})
    return FuzzInput(kind, text.encode("utf-8", errors="surrogatepass"), "minimised")


def minimise(inp: FuzzInput, outcome: str, detail: str, worker: Worker, timeout: float,
             seconds: float) -> FuzzInput:  # fmt: skip
    """Greedy reduction keeping the same outcome (and exception type for bad_error)."""
    deadline = time.monotonic() + seconds
    signature = detail.split(":")[0] if outcome == "bad_error" else ""

    def same(candidate: FuzzInput) -> bool:
        got, got_detail = worker.run(candidate, timeout)
        return got == outcome and (got_detail.split(":")[0] == signature or not signature)

    best = inp
    try:
        value = json.loads(inp.data)
    except (ValueError, RecursionError):
        value = None
    wrapped = inp.kind == "b" and isinstance(value, dict) and isinstance(value.get("graph"), str)
    if wrapped:
        try:
            value = json.loads(value["graph"])
        except (ValueError, RecursionError):
            value, wrapped = None, False
    if value is not None and (inp.kind != "b" or wrapped):
        improved = True
        while improved and time.monotonic() < deadline:
            improved = False
            for candidate in _json_candidates(value):
                if time.monotonic() > deadline:
                    break
                encoded = _encode(inp.kind, candidate, wrapped)
                if len(encoded.data) < len(best.data) and same(encoded):
                    value, best, improved = candidate, encoded, True
                    break
        return best
    data = inp.data  # bytes: drop chunks, halving their size
    chunk = max(1, len(data) // 2)
    while chunk >= 1 and time.monotonic() < deadline:
        start = 0
        while start < len(data) and time.monotonic() < deadline:
            candidate = FuzzInput(inp.kind, data[:start] + data[start + chunk :], "minimised")
            if same(candidate):
                data = candidate.data
            else:
                start += chunk
        chunk //= 2
    return FuzzInput(inp.kind, data, "minimised")


# -- the run -------------------------------------------------------------------------------
def load_seeds(path: Path | None, out: Path) -> list[dict]:
    if path is None:
        path = out / "corpus.json"
        # The exporters' warnings are noise here; they are shown when the corpus fails to build.
        built = subprocess.run([sys.executable, str(HERE / "corpus.py"), str(path)],
                               capture_output=True, text=True)  # fmt: skip
        if built.returncode != 0:
            raise RuntimeError(f"the seed corpus failed to build:\n{built.stderr[-5000:]}")
        print(built.stdout.strip(), flush=True)
    return json.loads(path.read_text())


def make_input(mutator: Mutator, rng: np.random.Generator, args: argparse.Namespace,
               files: list[tuple[str, bytes]]) -> FuzzInput:  # fmt: skip
    """Input ``rng`` stands for: a generated program, a mutated model file or a mutated graph."""
    draw = rng.random()
    if draw < args.model_files:
        data, description = hostile_files.mutate(rng, files)
        return FuzzInput("m", data, description)
    if draw < args.model_files + args.programs:
        program = generate.generate(rng)
        ops = ", ".join(step["op"] for step in program["steps"])
        return FuzzInput("r", json.dumps(program).encode(), f"generated program: {ops}")
    return mutator.make(rng)


def fuzz(args: argparse.Namespace) -> int:
    out = Path(args.out)
    (out / "findings").mkdir(parents=True, exist_ok=True)
    seeds = load_seeds(Path(args.corpus) if args.corpus else None, out)
    mutator = Mutator(seeds)
    files = hostile_files.seeds() if args.model_files else []
    counts: Counter = Counter()
    kinds: Counter = Counter()
    findings: dict[str, dict] = {}
    lock = threading.Lock()
    errors: list[str] = []
    next_index = iter(range(args.only_index, args.only_index + 1) if args.only_index is not None
                      else range(args.inputs or 10**12))  # fmt: skip
    start = time.monotonic()
    deadline = start + args.budget

    def loop(worker_id: int) -> None:
        worker = Worker(out / f"worker{worker_id}.log", args.max_rss_mb)
        try:
            while time.monotonic() < deadline:
                with lock:
                    index = next(next_index, None)
                if index is None:
                    return
                rng = np.random.default_rng([args.seed, index])
                inp = make_input(mutator, rng, args, files)
                outcome, detail = worker.run(inp, args.timeout)
                with lock:
                    counts[outcome] += 1
                    kinds[inp.kind] += 1
                    if outcome not in GOOD:
                        key = f"{outcome}:{detail.splitlines()[0][:120] if detail else ''}"
                        if key not in findings:
                            findings[key] = {"input": inp, "outcome": outcome, "detail": detail,
                                             "index": index}  # fmt: skip
                            print(f"FINDING {outcome} at index {index}: {inp.description}\n"
                                  f"  {detail[:400]}", flush=True)  # fmt: skip
        except Exception:
            with lock:
                errors.append(traceback.format_exc())
            raise
        finally:
            worker.stop()

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(args.jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - start
    total = sum(counts.values())
    summary = {
        "inputs": total,
        "seconds": round(elapsed, 1),
        "seed": args.seed,
        "jobs": args.jobs,
        "seed_graphs": len(seeds),
        "outcomes": {k: counts[k] for k in OUTCOMES},
        "kinds": {
            "graph": kinds["g"],
            "bytes": kinds["b"],
            "config": kinds["c"],
            "program": kinds["r"],
        },
        "findings": [],
    }
    if findings:
        worker = Worker(out / "minimise.log", args.max_rss_mb)
        try:
            for finding in findings.values():
                small = minimise(finding["input"], finding["outcome"], finding["detail"], worker,
                                 args.timeout, args.minimise_seconds)  # fmt: skip
                record = to_record(finding["input"], outcome=finding["outcome"],
                                   detail=finding["detail"][-2000:], seed=args.seed,
                                   index=finding["index"], minimised=to_record(small))  # fmt: skip
                name = hashlib.sha1(finding["input"].data).hexdigest()[:10]
                path = out / "findings" / f"{finding['outcome']}-{name}.json"
                path.write_text(json.dumps(record, indent=1) + "\n")
                summary["findings"].append(str(path))
        finally:
            worker.stop()
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    o = summary["outcomes"]
    print(
        f"fuzz: {total} inputs in {elapsed:.0f} s (seed {args.seed}, {args.jobs} workers, "
        f"{len(seeds)} seed graphs; graph {kinds['g']}, bytes {kinds['b']}, config {kinds['c']}): "
        f"ok {o['ok']}, rejected {o['rejected']}, crashes {o['crash']}, hangs {o['hang']}, "
        f"oom {o['oom']}, bad errors {o['bad_error']}, wrong results {o['wrong']} "
        f"(of {kinds['r']} generated programs); {kinds['m']} model files"
    )
    for path in summary["findings"]:
        print(f"  finding: {path}")
    if errors:
        print(f"fuzz: the fuzzer itself failed:\n{errors[0]}")
        return 2
    return 1 if findings else 0


def replay(paths: list[str], timeout: float, max_rss_mb: int) -> int:
    worker = Worker(Path("/tmp") / f"fuzz-replay-{os.getpid()}.log", max_rss_mb)
    bad = 0
    try:
        for path in paths:
            record = json.loads(Path(path).read_text())
            outcome, detail = worker.run(from_record(record), timeout)
            bad += outcome not in GOOD
            print(f"{outcome:9s} {path}  {detail.splitlines()[0][:100] if detail else ''}")
    finally:
        worker.stop()
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=150.0, help="seconds of fuzzing")
    parser.add_argument("--long", action="store_true", help=f"{LONG_BUDGET:g} s budget")
    parser.add_argument("--inputs", type=int, default=0,
                        help="stop after this many inputs (0: no limit); with a fixed seed the "
                             "same inputs every run, so a run's verdict does not depend on the "
                             "machine's speed (the budget still caps the time)")  # fmt: skip
    parser.add_argument("--programs", type=float, default=0.05,
                        help="share of inputs that are generated Relax programs run against "
                             "TVM's CPU build (each costs two compilations)")  # fmt: skip
    parser.add_argument("--model-files", type=float, default=0.02,
                        help="share of inputs that are mutated model files given to "
                             "`example-npu profile`")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per input (hang)")
    parser.add_argument("--max-rss-mb", type=int, default=4096, help="worker memory limit (oom)")
    parser.add_argument("--minimise-seconds", type=float, default=120.0)
    parser.add_argument("--corpus", help="a corpus.json to reuse (default: build it)")
    parser.add_argument("--out", default=str(ROOT / "build" / "fuzz"))
    parser.add_argument("--only-index", type=int, help="run just this input of the seed")
    parser.add_argument("--replay", nargs="+", metavar="FILE", help="run saved inputs")
    args = parser.parse_args(argv)
    if args.replay:
        return replay(args.replay, args.timeout, args.max_rss_mb)
    if args.long:
        args.budget = LONG_BUDGET
    return fuzz(args)


if __name__ == "__main__":
    sys.exit(main())
