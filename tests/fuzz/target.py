"""The fuzz target: one worker process that feeds inputs to the NPU runtime and classifies them.

Run as ``python tests/fuzz/target.py``. It reads inputs from stdin, each a 1-byte kind, an 8-byte
little-endian length and the payload, and answers each with one JSON line on the original stdout
(library output is sent to stderr so it cannot corrupt the protocol):

* ``g`` graph JSON text: ``runtime.ExampleNPUJSONRuntimeCreate(symbol, text, const_names)``;
* ``b`` module bytes: ``ffi.Module.load_from_bytes.example_npu_json(bytes)``;
* ``c`` NPUConfig JSON: ``NPUConfig.from_json`` in Python, and the same text as the
  ``npu_config`` of a small graph in C++; the two must agree on what is valid;
* ``m`` a model file (hostile_files.py): ``example-npu profile FILE`` must exit 0, or 2 with one
  ``example-npu: error:`` line, and must not run code stored in the file;
* ``r`` a generated Relax program (generate.py): built with Relax's constructors, partitioned
  by ``partition_for_npu`` and, when its tensors are small, run on the NPU and with TVM's CPU
  build of the unpartitioned module; a difference beyond float tolerance is ``wrong``.

A module that loads is then exercised: its constants are bound, it is called on random inputs
(when they are small), and its command stream is printed. The outcome is ``ok``, ``rejected``
(a ValueError or TypeError with a short ASCII message, the promised errors) or ``bad_error`` (any
other exception, a UnicodeError, which means a message carried raw bytes, or a message longer
than the runtime's cap). A crash or hang is seen by the parent
as the worker dying or not answering.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import struct
import sys
import tempfile
import traceback
from pathlib import Path

import example_npu
import generate
import hostile_files
import numpy as np
import tvm
from example_npu import cli
from example_npu.relax_types import static_shape
from tvm import relax

# Inputs the harness calls with random data at most this large (bytes of all tensors).
MAX_CALL_BYTES = 8 << 20
DTYPES = {name: name for name in ("float32", "float16", "int8", "uint8", "int16", "int32", "int64")}
PROBE_GRAPH = (
    '{"version": 1, "symbol": "probe", "npu_config": %s, "nodes": ['
    '{"op": "input", "name": "x", "shape": [4, 8], "dtype": "float32"},'
    '{"op": "nn.relu", "name": "y", "inputs": [0], "shape": [4, 8], "dtype": "float32"}],'
    '"arg_nodes": [0], "heads": [1]}'
)


class Rejected(Exception):
    """A ValueError or TypeError raised where the runtime promises one."""


class WrongResult(Exception):
    """The NPU's answer differs from TVM's CPU build of the same program."""


# (rtol, atol relative to the largest expected magnitude) per dtype: chains of a few ops, where
# a subtraction can cancel, need more room than the one-op suite's 1e-5.
TOLERANCE = {"float32": (1e-3, 1e-4), "float16": (3e-2, 3e-2)}


# The runtime cuts every message to 1000 characters (plus "..."); README: short printable errors.
MAX_MESSAGE_CHARS = 1003


def _is_promised(err: BaseException) -> bool:
    """A ValueError / TypeError with a short printable message: what the runtime promises."""
    if not isinstance(err, (ValueError, TypeError)) or isinstance(err, UnicodeError):
        return False
    message = str(err)
    return len(message) <= MAX_MESSAGE_CHARS and message.isascii()


class Harness:
    def __init__(self) -> None:
        self.create = tvm.get_global_func("runtime.ExampleNPUJSONRuntimeCreate")
        self.load = tvm.get_global_func("ffi.Module.load_from_bytes.example_npu_json")

    # -- loading -------------------------------------------------------------------------
    def graph(self, data: bytes) -> str:
        text = data.decode("utf-8")  # the fuzzer only sends UTF-8 here (bytes go through 'b')
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            parsed = None
        symbol = parsed.get("symbol") if isinstance(parsed, dict) else None
        symbol = symbol if isinstance(symbol, str) else "f"
        names = []
        if isinstance(parsed, dict) and isinstance(parsed.get("nodes"), list):
            for node in parsed["nodes"]:
                if isinstance(node, dict) and node.get("op") == "const":
                    name = node.get("name")
                    names.append(name if isinstance(name, str) else "")
        try:
            symbol.encode("utf-8")
            for name in names:
                name.encode("utf-8")
        except UnicodeError:
            symbol, names = "f", []  # lone surrogates from \\u escapes cannot cross the FFI
        module = self._promised(lambda: self.create(symbol, text, names))
        return self.exercise(module)

    def module_bytes(self, data: bytes) -> str:
        module = self._promised(lambda: self.load(data))
        return self.exercise(module)

    def config(self, data: bytes) -> str:
        text = data.decode("utf-8", errors="replace")
        python_ok = True
        try:
            example_npu.NPUConfig.from_json(text)
        except Exception as err:  # noqa: BLE001
            if not _is_promised(err):
                raise
            python_ok = False
        try:
            self.create("probe", PROBE_GRAPH % text, [])
            cpp_ok = True
        except Exception as err:  # noqa: BLE001
            if not _is_promised(err):
                raise
            cpp_ok = False
        try:
            json.loads(text)
            valid_json = True
        except (ValueError, RecursionError):
            valid_json = False  # tvm-ffi's parser is laxer (e.g. it reads 007 as 7)
        if valid_json and python_ok != cpp_ok:
            raise AssertionError(
                f"NPUConfig validity differs: Python {python_ok}, C++ {cpp_ok} for {text[:200]!r}"
            )
        if not cpp_ok:
            raise Rejected("config rejected")
        return "ok"

    def model_file(self, data: bytes) -> str:
        suffix, _, body = data.partition(b"\n")
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / f"model{suffix.decode(errors='replace')}"
            path.write_bytes(body)
            hostile_files.MARKER.parent.mkdir(parents=True, exist_ok=True)
            hostile_files.MARKER.unlink(missing_ok=True)
            stderr = io.StringIO()
            with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
                status = cli.main(["profile", str(path)])
        if hostile_files.MARKER.exists():
            raise AssertionError("reading the model file ran code stored in it")
        message = stderr.getvalue()
        if status == 0:
            return "ok"
        lines = message.strip().splitlines()
        if status == 2 and len(lines) == 1 and lines[0].startswith("example-npu: error: "):
            if lines[0].isascii() and len(lines[0]) <= MAX_MESSAGE_CHARS + 20:
                raise Rejected(lines[0])
        raise AssertionError(f"exit {status}, stderr {message[:600]!r}")

    def program(self, data: bytes) -> str:
        program = json.loads(data)
        try:
            mod = generate.build(program)
        except Exception as err:  # noqa: BLE001 - TVM refusing the program is not our finding
            raise Rejected(f"TVM refuses the program: {type(err).__name__}") from None
        partitioned = self._promised(lambda: example_npu.partition_for_npu(mod))
        if _largest_tensor(mod) > generate.MAX_RUN_ELEMENTS:
            return "ok"
        try:
            expected = _run(mod, program)
        except Exception as err:  # noqa: BLE001 - TVM's own CPU build failing is not ours
            raise Rejected(f"TVM's CPU build fails: {type(err).__name__}") from None
        actual = self._promised(lambda: _run(partitioned, program))
        dtype = program["inputs"][0]["dtype"]  # every generated op keeps its input's dtype
        rtol, atol = TOLERANCE[dtype]
        for a, e in zip(actual, expected, strict=True):
            # TVM's CPU build of a float16 batch_norm returns float32 against its own types, so
            # the NPU's dtype is checked against the program and the values compared as numbers.
            problem = f"NPU dtype {a.dtype}, the program's {dtype}" if a.dtype != dtype else ""
            problem = problem or _difference(a, e, rtol, atol)
            if problem:
                raise WrongResult(problem)
        return "ok"

    def _promised(self, fn):
        try:
            return fn()
        except Exception as err:  # noqa: BLE001
            if _is_promised(err):
                raise Rejected(str(err)) from None
            raise

    # -- exercising a loaded module ------------------------------------------------------
    def exercise(self, module) -> str:
        graph = json.loads(module.inspect_source("json"))
        module.inspect_source("commands")
        symbol = module.get_function("get_symbol")()
        nodes = graph["nodes"]

        def array(node, rng):
            dtype = DTYPES[node["dtype"]]
            shape = tuple(node["shape"])
            if dtype.startswith("int"):
                return rng.integers(-100, 100, size=shape).astype(dtype)
            return rng.standard_normal(shape).astype(dtype)

        consts = [n for n in nodes if n["op"] == "const"]
        inputs = [nodes[i] for i in graph["arg_nodes"]]
        outputs = [nodes[i] for i in graph["heads"]]
        total = sum(
            math.prod(node["shape"]) * np.dtype(DTYPES[node["dtype"]]).itemsize
            for node in consts + inputs + outputs
        )
        if total > MAX_CALL_BYTES:
            return "ok"
        rng = np.random.default_rng(0)
        if consts:
            module.get_function(f"__init_{symbol}")(
                [tvm.runtime.tensor(array(n, rng)) for n in consts]
            )
        args = [tvm.runtime.tensor(array(n, rng)) for n in inputs]
        args += [tvm.runtime.tensor(np.zeros(n["shape"], DTYPES[n["dtype"]])) for n in outputs]
        module.get_function(symbol)(*args)
        return "ok"


def _largest_tensor(mod: tvm.IRModule) -> int:
    sizes = [0]

    def visit(expr: object) -> None:
        ty = getattr(expr, "ty", None)
        fields = ty.fields if isinstance(ty, tvm.ir.type.TupleType) else [ty]
        for field in fields:
            shape = static_shape(field)
            if shape is not None:
                sizes.append(math.prod(shape))

    relax.analysis.post_order_visit(mod["main"], visit)
    return max(sizes)


def _run(mod: tvm.IRModule, program: dict) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    inputs = [rng.uniform(-2, 2, size=v["shape"]).astype(v["dtype"]) for v in program["inputs"]]
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(x) for x in inputs])
    return [out.numpy()] if isinstance(out, tvm.runtime.Tensor) else [o.numpy() for o in out]


def _difference(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> str:
    """What differs beyond tolerance (NaN must meet NaN, infinity the same infinity), or ''."""
    if actual.shape != expected.shape:
        return f"shape {actual.shape} != {expected.shape}"
    a, e = actual.astype("float64"), expected.astype("float64")
    finite = np.isfinite(e)
    if not np.array_equal(np.isnan(a), np.isnan(e)) or not np.array_equal(
        a[np.isinf(e)], e[np.isinf(e)]
    ):
        return f"NaN / infinity differ: {int((np.isnan(a) != np.isnan(e)).sum())} NaN mismatches"
    scale = float(np.abs(e[finite]).max()) if finite.any() else 0.0
    diff = np.abs(a[finite] - e[finite])
    bad = diff > atol * max(1.0, scale) + rtol * np.abs(e[finite])
    if bad.any():
        return (
            f"{int(bad.sum())} of {e.size} values differ, max |diff| {diff.max():.3g} "
            f"(scale {scale:.3g})"
        )
    return ""


def serve() -> None:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything printed by libraries goes to stderr
    harness = Harness()
    protocol.write(json.dumps({"ready": True}) + "\n")
    stdin = sys.stdin.buffer
    handlers = {
        b"g": harness.graph,
        b"b": harness.module_bytes,
        b"c": harness.config,
        b"r": harness.program,
        b"m": harness.model_file,
    }
    while True:
        header = stdin.read(9)
        if len(header) < 9:
            return
        kind, length = header[:1], struct.unpack("<Q", header[1:])[0]
        data = stdin.read(length)
        try:
            outcome, detail = handlers[kind](data), ""
        except Rejected as err:
            outcome, detail = "rejected", str(err)[:300]
        except WrongResult as err:
            outcome, detail = "wrong", f"{err}\n{data[:1500].decode(errors='replace')}"
        except Exception as err:  # noqa: BLE001
            if _is_promised(err):  # a promised error while calling a loaded module
                outcome, detail = "rejected", str(err)[:300]
            else:
                outcome = "bad_error"
                detail = (
                    f"{type(err).__name__} ({len(str(err))} chars): {err!s:.500}\n"
                    f"{traceback.format_exc()[-1500:]}"
                )
        protocol.write(json.dumps({"outcome": outcome, "detail": detail}) + "\n")


if __name__ == "__main__":
    serve()
