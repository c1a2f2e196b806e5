"""The ONNX importer's non-constant ``Pad``: a ``call_tir`` of ``topi.nn.mirror_pad`` (reflect),
``topi.nn.replicate_pad`` (edge) or ``topi.nn.circular_pad`` (wrap) becomes ``relax.nn.pad``
with that mode, which the NPU pattern matches.

The PrimFunc does not name its widths, only the total per axis (output minus input extent), but
its one store reads the input at an index per axis that is a function of that axis's output
position alone, and every mode copies the interior: input index ``i`` lands at output position
``before + i``. Evaluating those index expressions at the output positions ``0 .. total + 1``
(one pass, no build) gives ``before``: the position that reads index 0 and is followed by index
1. An axis of extent 1 reads index 0 everywhere and keeps every split as a candidate (as does a
wrap as wide as its axis, which reads index 0 twice). The split read is then confirmed by
building the topi function with it and comparing structurally (``tvm_ffi.structural_equal``) to
the callee: the rewrite is exact by construction. Reflect pads narrower than their axis and
circular pads no wider than it, where every mode reads only input elements and TVM's ``nn.pad``
legalization computes the same copy.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from functools import lru_cache

import tvm
import tvm_ffi
from tvm import relax, topi
from tvm.sym import Analyzer

# Candidate splits confirmed per call at most (only extent-1 axes leave more than one).
MAX_SPLITS = 256

_TOPI_PADS: dict[str, Callable] = {
    "reflect": lambda x, before, after: topi.nn.mirror_pad(x, before, after, "REFLECT"),
    "replicate": topi.nn.replicate_pad,
    "circular": topi.nn.circular_pad,
}


@lru_cache(maxsize=512)
def _topi_pad(
    mode: str, shape: tuple[int, ...], dtype: str, before: tuple[int, ...], after: tuple[int, ...]
) -> tvm.tirx.PrimFunc:
    """The PrimFunc the ONNX importer emits for ``mode`` padding with these widths."""
    x = relax.Var("x", relax.TensorType(shape, dtype))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit_te(_TOPI_PADS[mode], x, list(before), list(after)))
        bb.emit_func_output(out)
    return next(f for gv, f in bb.get().functions.items() if gv.name_hint != "main")


def _store_indices(prim_func: tvm.tirx.PrimFunc) -> tuple[list, list] | None:
    """The output indices (block variables) of ``prim_func``'s one store and the input indices
    of the load it stores, when its body is loops and blocks around that one store (the shape of
    topi's padding functions)."""
    node = prim_func.body
    while not isinstance(node, tvm.tirx.BufferStore):
        if hasattr(node, "block"):  # a block realize
            node = node.block.body
        elif isinstance(node, tvm.tirx.For):
            node = node.body
        else:
            return None
    load = node.value
    if not isinstance(load, tvm.ir.expr.TensorLoad) or len(load.indices) != len(node.indices):
        return None
    if not all(isinstance(var, tvm.tirx.Var) for var in node.indices):
        return None
    return list(node.indices), list(load.indices)


def _befores(
    prim_func: tvm.tirx.PrimFunc, shape: tuple[int, ...], totals: list[int]
) -> list[list[int]] | None:
    """Per axis, the ``before`` widths the store's index expressions allow (see the module
    docstring), the most balanced first; None when the body is not one store of a load."""
    indices = _store_indices(prim_func)
    if indices is None:
        return None
    out_vars, in_indices = indices
    candidates = []
    for axis, (extent, total) in enumerate(zip(shape, totals, strict=True)):

        def source(position: int, axis: int = axis) -> int | None:
            analyzer = Analyzer()
            for other, var in enumerate(out_vars):
                analyzer.bind(var, tvm.tirx.const(position if other == axis else 0, "int64"))
            value = analyzer.simplify(in_indices[axis])
            return int(value) if isinstance(value, tvm.tirx.IntImm) else None

        reads = [source(position) for position in range(total + 2)]
        befores = [
            b for b in range(total + 1) if reads[b] == 0 and (extent == 1 or reads[b + 1] == 1)
        ]
        candidates.append(sorted(befores, key=lambda b, t=total: abs(2 * b - t)))
    return candidates


def _mode_allows(
    mode: str, shape: tuple[int, ...], before: tuple[int, ...], after: tuple[int, ...]
) -> bool:
    """Widths with which topi's function and TVM's ``nn.pad`` legalization copy alike."""
    if mode == "reflect":
        return all(b < s and a < s for s, b, a in zip(shape, before, after, strict=True))
    if mode == "circular":
        return all(b <= s and a <= s for s, b, a in zip(shape, before, after, strict=True))
    return all(s > 0 for s, b, a in zip(shape, before, after, strict=True) if b or a)


def pad_of_call_tir(
    prim_func: tvm.tirx.PrimFunc, shape: tuple[int, ...], dtype: str, out_shape: list[int]
) -> tuple[str, list[int]] | None:
    """(mode, relax ``pad_width``) of ``prim_func`` when it is the importer's padding of a
    ``shape`` / ``dtype`` tensor to ``out_shape``, else None."""
    if len(out_shape) != len(shape):
        return None
    totals = [o - s for o, s in zip(out_shape, shape, strict=True)]
    if any(t < 0 for t in totals) or not any(totals):
        return None
    befores = _befores(prim_func, shape, totals)
    if befores is None or math.prod(len(b) for b in befores) > MAX_SPLITS:
        return None
    for mode in _TOPI_PADS:
        for before in itertools.product(*befores):
            after = tuple(t - b for b, t in zip(before, totals, strict=True))
            if not _mode_allows(mode, shape, before, after):
                continue
            reference = _topi_pad(mode, shape, dtype, before, after)
            if tvm_ffi.structural_equal(prim_func, reference, map_free_vars=True):
                widths = [w for pair in zip(before, after, strict=True) for w in pair]
                return mode, widths
    return None
