"""Structure-aware generation of small Relax programs for differential fuzzing.

The mutator (mutate.py) bends graphs the codegen already produced; this module builds programs
the way a user's model would reach the backend: random chains of the ops in the pattern table,
with attributes drawn from their documented domains and, now and then, from the boundary values
(0, 1, 2^31 - 1, 2^31, 2^62, NaN) where bugs live. A program is plain JSON (a ``Program``), so a
finding is a file that replays without this generator.

The fuzz target (target.py, input kind ``r``) builds the program with Relax's own op
constructors, partitions it with ``partition_for_npu`` and runs it on the NPU and with TVM's CPU
(LLVM) build of the unpartitioned module: any difference beyond float tolerance is a ``wrong``
finding, like a crash. TVM's shape inference is the judge of what is well-typed, both here
(a step it refuses is drawn again) and in the target.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import tvm
from example_npu.relax_types import static_shape
from tvm import relax

BOUNDARY_INTS = [0, 1, (1 << 31) - 1, 1 << 31, 1 << 62]
BOUNDARY_FLOATS = [0.0, 1e-45, 1e30, math.inf, math.nan]
DIMS = [1, 2, 3, 4, 5, 7, 8, 16, 17, 33]
UNARY = ["nn.relu", "nn.gelu", "nn.gelu_tanh", "sigmoid", "tanh", "sqrt", "rsqrt", "exp", "log",
         "erf", "abs", "negative"]  # fmt: skip
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power"]
# Elements of any tensor a program may hold for it to be run (not only compiled).
MAX_RUN_ELEMENTS = 1 << 20

Operand = dict[str, Any]  # {"value": k} or {"const": shape, "dtype": d, "data": kind}
Step = dict[str, Any]  # {"op": name, "args": [Operand], "attrs": {...}, "index": k}


class Gen:
    """Draws from one numpy Generator; ``edge`` swaps a value for a boundary value sometimes."""

    def __init__(self, rng: np.random.Generator, edge_rate: float) -> None:
        self.rng = rng
        self.edge_rate = edge_rate

    def pick(self, options: list) -> Any:
        return options[int(self.rng.integers(len(options)))]

    def coin(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)

    def int(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def edge(self, value: Any) -> Any:
        if not self.coin(self.edge_rate):
            return value
        if isinstance(value, float):
            return self.pick(BOUNDARY_FLOATS)
        if isinstance(value, list):
            return [self.edge(v) for v in value]
        return self.pick(BOUNDARY_INTS)


# -- attribute drawers: (gen, input shapes) -> (extra operands, attrs) --------------------------
def _axis(g: Gen, rank: int) -> int:
    return g.int(-rank, rank - 1) if rank else 0


def _const(shape: list[int], dtype: str, data: str = "normal") -> Operand:
    return {"const": list(shape), "dtype": dtype, "data": data}


def _window(g: Gen, spatial: int, extent: list[int]) -> dict[str, Any]:
    size = [g.int(1, max(1, min(e, 4))) for e in extent]
    return {
        "pool_size": g.edge(size),
        "strides": g.edge([g.int(1, 3) for _ in range(spatial)]),
        "padding": g.edge([g.int(0, s - 1) for s in size] * 2),
        "dilation": g.edge([g.int(1, 2) for _ in range(spatial)]),
        "ceil_mode": g.coin(0.2),
        "count_include_pad": g.coin(),
    }


def _conv(g: Gen, shape: list[int], dtype: str, spatial: int) -> tuple[list[Operand], dict]:
    channel_last = g.coin(0.3)
    channels = shape[-1] if channel_last else shape[1]
    groups = g.pick([d for d in (1, 2, 3, 4, channels) if d and channels % d == 0])
    out = groups * g.int(1, 4)
    kernel = [g.int(1, 3) for _ in range(spatial)]
    layout = ("NWC", "NHWC")[spatial - 1] if channel_last else ("NCW", "NCHW")[spatial - 1]
    kernel_layout = ("OIW", "OIHW")[spatial - 1]
    attrs = {
        "strides": g.edge([g.int(1, 3) for _ in range(spatial)]),
        "padding": g.edge([g.int(0, 2) for _ in range(2 * spatial)]),
        "dilation": g.edge([g.int(1, 2) for _ in range(spatial)]),
        "groups": groups,
        "data_layout": layout,
        "kernel_layout": kernel_layout,
    }
    return [_const([out, channels // groups, *kernel], dtype)], attrs


def _matmul_args(g: Gen, shape: list[int], dtype: str, latest: Operand) -> list[Operand]:
    if len(shape) >= 2 and g.coin(0.3):  # constant on the left: the sliced-input case
        return [_const([g.pick(DIMS), shape[-2]], dtype), latest]
    return [latest, _const([shape[-1], g.pick(DIMS)], dtype)]


def _norm(g: Gen, shape: list[int], dtype: str, op: str) -> tuple[list[Operand], dict]:
    if op == "nn.batch_norm":
        axis = _axis(g, len(shape))
        n = shape[axis]
        params = [_const([n], dtype), _const([n], dtype), _const([n], dtype),
                  _const([n], dtype, "positive")]  # fmt: skip
        return params, {"axis": axis, "epsilon": g.edge(1e-5), "center": g.coin(0.8),
                        "scale": g.coin(0.8), "training": False}  # fmt: skip
    axes = sorted({_axis(g, len(shape)) % len(shape) for _ in range(g.int(1, 2))})
    norm_shape = [shape[a] for a in axes]
    return [_const(norm_shape, dtype), _const(norm_shape, dtype)], {
        "axes": axes, "epsilon": g.edge(1e-5), "center": True, "scale": True}  # fmt: skip


def _slice(g: Gen, shape: list[int]) -> dict[str, Any]:
    axes = sorted({_axis(g, len(shape)) % len(shape) for _ in range(g.int(1, 2))})
    begin = [g.edge(g.int(-shape[a], shape[a] - 1)) for a in axes]
    end = [g.edge(g.int(-shape[a], shape[a] + 2)) for a in axes]
    strides = [g.edge(g.pick([1, 1, 2, 3, -1])) for _ in axes]
    return {"axes": axes, "begin": begin, "end": end, "strides": strides}


def _reshape(g: Gen, shape: list[int]) -> dict[str, Any]:
    total = math.prod(shape)
    factors = [d for d in range(1, total + 1) if total % d == 0] or [1]  # an empty tensor: 1 x 0
    first = g.pick(factors)
    return {"shape": g.pick([[total], [first, total // first], [1, first, total // first]])}


def draw_step(g: Gen, shape: list[int], dtype: str, count: int) -> Step:
    """One op on the latest value (``count`` values exist; earlier ones may join binaries)."""
    rank = len(shape)
    latest = {"value": count - 1}
    kinds = ["unary", "binary", "matmul", "softmax", "norm", "mean", "clip", "move", "concat"]
    kinds += ["conv1d", "pool1d"] if rank == 3 else []
    kinds += ["conv2d", "pool2d", "adaptive"] if rank == 4 else []
    kind = g.pick(kinds)
    if kind == "unary":
        return {"op": g.pick(UNARY), "args": [latest], "attrs": {}}
    if kind == "binary":
        other_shape = list(shape[g.int(0, rank) :]) if g.coin(0.7) else [1] * rank
        other = {"value": g.int(0, count - 1)} if g.coin(0.3) else _const(other_shape, dtype)
        return {"op": g.pick(BINARY), "args": [latest, other], "attrs": {}}
    if kind == "matmul":
        return {"op": "matmul", "args": _matmul_args(g, shape, dtype, latest), "attrs": {}}
    if kind == "softmax":
        return {"op": "nn.softmax", "args": [latest], "attrs": {"axis": _axis(g, rank)}}
    if kind == "norm":
        op = g.pick(["nn.batch_norm", "nn.layer_norm"])
        extra, attrs = _norm(g, shape, dtype, op)
        return {"op": op, "args": [latest, *extra], "attrs": attrs, "index": 0}
    if kind == "mean":
        axes = sorted({_axis(g, rank) % rank for _ in range(g.int(1, 2))})
        return {"op": "mean", "args": [latest], "attrs": {"axis": axes, "keepdims": g.coin()}}
    if kind == "clip":
        low = g.edge(float(g.rng.uniform(-1, 0)))
        return {"op": "clip", "args": [latest], "attrs": {"min": low, "max": g.edge(1.0)}}
    if kind == "concat":
        return {"op": "concat", "args": [latest, latest], "attrs": {"axis": _axis(g, rank)}}
    if kind in ("conv1d", "conv2d"):
        extra, attrs = _conv(g, shape, dtype, 1 if kind == "conv1d" else 2)
        return {"op": f"nn.{kind}", "args": [latest, *extra], "attrs": attrs}
    if kind in ("pool1d", "pool2d"):
        spatial = 1 if kind == "pool1d" else 2
        attrs = _window(g, spatial, shape[2:])
        return {"op": f"nn.{g.pick(['max', 'avg'])}_{kind}", "args": [latest], "attrs": attrs}
    if kind == "adaptive":
        size = [g.int(1, max(1, shape[2])), g.int(1, max(1, shape[3]))]
        return {"op": "nn.adaptive_avg_pool2d", "args": [latest], "attrs": {"output_size": size}}
    move = g.pick(["permute_dims", "reshape", "strided_slice", "take", "squeeze",
                   "expand_dims", "split", "broadcast_to"])  # fmt: skip
    if move == "permute_dims":
        return {
            "op": move,
            "args": [latest],
            "attrs": {"axes": [int(a) for a in g.rng.permutation(rank)]},
        }  # noqa: E501
    if move == "reshape":
        return {"op": move, "args": [latest], "attrs": _reshape(g, shape)}
    if move == "strided_slice":
        return {"op": move, "args": [latest], "attrs": _slice(g, shape)}
    if move == "take":
        axis = _axis(g, rank)
        n = g.int(1, 6)
        return {"op": move, "args": [latest, {"const": [n], "dtype": "int64",
                "data": f"index<{shape[axis]}"}], "attrs": {"axis": axis}}  # fmt: skip
    if move == "squeeze":
        return {
            "op": move,
            "args": [latest],
            "attrs": {"axis": [i for i, d in enumerate(shape) if d == 1] or None},
        }  # noqa: E501
    if move == "expand_dims":
        return {"op": move, "args": [latest], "attrs": {"axis": g.int(-rank - 1, rank)}}
    if move == "split":
        axis = _axis(g, rank)
        return {"op": move, "args": [latest], "index": 0,
                "attrs": {"indices_or_sections": g.pick([d for d in (1, 2, 3) if shape[axis] % d == 0]), "axis": axis}}  # noqa: E501  # fmt: skip
    return {"op": "broadcast_to", "args": [latest], "attrs": {"shape": [2, *shape]}}


def generate(rng: np.random.Generator, edge_rate: float = 0.08) -> dict[str, Any]:
    """A well-typed program of 1-4 steps (TVM's shape inference accepts every step)."""
    g = Gen(rng, edge_rate)
    dtype = "float16" if g.coin(0.1) else "float32"
    shape = [g.pick(DIMS) for _ in range(g.int(1, 4))]
    program: dict[str, Any] = {"inputs": [{"shape": shape, "dtype": dtype}], "steps": []}
    shapes = [shape]
    for _ in range(g.int(1, 4)):
        if not shapes[-1]:  # a scalar (or a tuple) ends the chain
            break
        for _attempt in range(8):
            step = draw_step(g, shapes[-1], dtype, len(shapes))
            candidate = {**program, "steps": [*program["steps"], step]}
            try:
                out = build(candidate, infer_only=True)
            except Exception:  # noqa: BLE001 - any refusal by TVM: draw the step again
                continue
            if not isinstance(out, list):
                continue
            program, shapes = candidate, [*shapes, out]
            break
    return program


# -- building a program with Relax's constructors ------------------------------------------------
def _operand(arg: Operand, values: list[relax.Expr], rng: np.random.Generator) -> relax.Expr:
    if "value" in arg:
        return values[arg["value"]]
    shape, dtype, kind = arg["const"], arg["dtype"], arg["data"]
    if math.prod(shape) > MAX_RUN_ELEMENTS:
        raise ValueError("constant too large for the harness")
    if kind.startswith("index<"):
        array = rng.integers(0, int(kind[6:]), size=shape).astype(dtype)
    elif kind == "positive":
        array = rng.uniform(0.5, 2.0, size=shape).astype(dtype)
    else:
        array = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    return relax.const(array, dtype)


def _call(op: str, args: list[relax.Expr], attrs: dict[str, Any]) -> relax.Expr:
    namespace, _, name = op.rpartition(".")
    fn: Callable = getattr(relax.op.nn if namespace == "nn" else relax.op, name)
    if op == "clip":
        return fn(args[0], attrs["min"], attrs["max"])
    if op == "strided_slice":
        return fn(args[0], **attrs)
    if op == "concat":
        return fn(args, **attrs)
    return fn(*args, **attrs)


def build(program: dict[str, Any], infer_only: bool = False) -> tvm.IRModule | list[int]:
    """``main`` of the program; with ``infer_only``, the static shape of its result."""
    rng = np.random.default_rng(len(json.dumps(program)))
    params = [relax.Var(f"x{i}", relax.TensorType(v["shape"], v["dtype"]))
              for i, v in enumerate(program["inputs"])]  # fmt: skip
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            values: list[relax.Expr] = list(params)
            for step in program["steps"]:
                args = [_operand(arg, values, rng) for arg in step["args"]]
                value = bb.emit(_call(step["op"], args, step.get("attrs", {})))
                if "index" in step and isinstance(value.ty, tvm.ir.type.TupleType):
                    value = bb.emit(relax.TupleGetItem(value, step["index"]))
                values.append(value)
            out = bb.emit_output(values[-1])
        bb.emit_func_output(out)
    if infer_only:
        return static_shape(out.ty) or []
    return bb.get()
