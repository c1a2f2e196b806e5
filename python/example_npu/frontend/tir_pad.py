"""The ONNX importer's non-constant ``Pad``: a ``call_tir`` of ``topi.nn.mirror_pad`` (reflect),
``topi.nn.replicate_pad`` (edge) or ``topi.nn.circular_pad`` (wrap) becomes ``relax.nn.pad``
with that mode, which the NPU pattern matches.

The PrimFunc does not name its widths, only the total per axis (output minus input extent). The
split into before / after is found by building the topi function for each split (balanced
splits first, as models pad symmetrically) and keeping the one structurally equal
(``tvm_ffi.structural_equal``) to the callee: the rewrite is exact by construction. Reflect pads
narrower than their axis and circular pads no wider than it, where every mode reads only input
elements and TVM's ``nn.pad`` legalization computes the same copy.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from functools import lru_cache

import tvm
import tvm_ffi
from tvm import relax, topi

# Candidate splits tried per call at most (a wide pad on several axes would try many).
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


def _splits(totals: list[int]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(before, after) for every split of ``totals``, the most balanced first."""
    per_axis = [range(total + 1) for total in totals]
    befores = sorted(
        itertools.product(*per_axis),
        key=lambda b: sum(abs(2 * v - t) for v, t in zip(b, totals, strict=True)),
    )
    return [(b, tuple(t - v for v, t in zip(b, totals, strict=True))) for b in befores]


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
    if math.prod(t + 1 for t in totals) > MAX_SPLITS:
        return None
    splits = _splits(totals)
    for mode in _TOPI_PADS:
        for before, after in splits:
            if not _mode_allows(mode, shape, before, after):
                continue
            reference = _topi_pad(mode, shape, dtype, before, after)
            if tvm_ffi.structural_equal(prim_func, reference, map_free_vars=True):
                widths = [w for pair in zip(before, after, strict=True) for w in pair]
                return mode, widths
    return None
