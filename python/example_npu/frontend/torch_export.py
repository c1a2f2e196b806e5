"""torch.export programs -> Relax through TVM's PyTorch importer, with the fix decoder models need.

``transformers`` (5.x) starts a model's key / value cache (``DynamicLayer``) as an empty 1-D
tensor, ``torch.tensor([])``, and appends each step's keys with
``torch.cat([keys, key_states], dim=-2)``. PyTorch's ``cat`` skips 1-D tensors with no elements
(its legacy rule), so the program concatenates a ``(0,)`` tensor with a 4-D one; TVM's importer
refuses that (``Concat expects all input tensors to have same ndim. However, the input contains
tensors with ndim 1 and 4``), and every GPT-2 / Llama-style model exported with its cache (the
default ``use_cache=True`` with transformers' cache pytrees registered) fails to import.
:func:`skipped_cat_operands_dropped` removes those operands from the program's ``aten.cat`` calls
(exactly what PyTorch computes) while TVM's importer reads it, then puts them back:
:func:`from_exported_program` leaves the user's program as it was.

TVM's importer also lowers ``F.interpolate(mode="nearest")`` (``aten.upsample_nearest2d``) as
``resize2d`` with ``half_pixel`` coordinates rounded to nearest, which is PyTorch's
``nearest-exact``; PyTorch's ``nearest`` picks ``floor(dst * in / out)``, TVM's ``asymmetric``
coordinates with ``floor`` rounding (:func:`_upsample_nearest2d`). The two agree for integer
upscaling (a YOLO neck's 2x) and differ for other sizes: a U-Net decoder resized to an odd skip
connection's size got rows and columns shifted by one, 0.64 away from PyTorch. Given a scale
factor whose ``in * s`` is not whole (2.3, 1.7), PyTorch steps by ``1 / s`` rather than
``in / out``, which no ``resize2d`` expresses: that resize is a ``take`` of PyTorch's rows, then
of its columns.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np


def _skipped_by_cat(node: Any) -> bool:
    """A graph value PyTorch's ``cat`` ignores: a 1-D tensor with no elements."""
    value = getattr(node, "meta", {}).get("val")
    shape = getattr(value, "shape", None)
    return shape is not None and len(shape) == 1 and shape[0] == 0


@contextlib.contextmanager
def skipped_cat_operands_dropped(program: Any) -> Iterator[int]:
    """Within the ``with`` block, every ``aten.cat`` of ``program`` (a
    ``torch.export.ExportedProgram``) is without the empty 1-D operands PyTorch's ``cat`` skips
    (it computes the same); yields how many were removed and gives the user's program back as it
    was on exit. A ``cat`` of nothing but such operands is left as it is. The graph is edited and
    restored rather than copied: a copy would duplicate the model's weights."""
    import torch

    cats = (torch.ops.aten.cat.default, torch.ops.aten.concat.default)
    edited: list[tuple[Any, tuple[Any, ...]]] = []
    removed = 0
    for node in program.graph.nodes:
        if node.op != "call_function" or node.target not in cats:
            continue
        operands = list(node.args[0])
        kept = [operand for operand in operands if not _skipped_by_cat(operand)]
        if kept and len(kept) < len(operands):
            edited.append((node, node.args))
            node.args = (kept, *node.args[1:])
            removed += len(operands) - len(kept)
    if edited:
        program.graph.lint()
        program.graph_module.recompile()
    try:
        yield removed
    finally:
        for node, args in edited:
            node.args = args
        if edited:
            program.graph_module.recompile()


def _pytorch_nearest_sources(in_size: int, out_size: int, scale: float | None) -> np.ndarray:
    """The input index PyTorch's nearest picks for each output index along one axis (its
    ``nearest_idx``, in float32 as it computes): steps of ``1 / scale`` when the caller gave a
    scale factor, else of ``in / out``."""
    dst = np.arange(out_size, dtype=np.int64)
    if out_size == in_size:
        return dst
    if out_size == 2 * in_size:
        return dst // 2
    step = np.float32(1.0 / scale) if scale else np.float32(in_size) / np.float32(out_size)
    return np.minimum(np.floor(dst.astype(np.float32) * step).astype(np.int64), in_size - 1)


def _upsample_nearest2d(node: Any, importer: Any) -> Any:
    """``aten.upsample_nearest2d.vec(x, output_size, scale_factors)`` as PyTorch computes it:
    source index ``floor(dst * in / out)``, a ``resize2d`` with asymmetric coordinates. With
    scale factors the output is ``floor(in * s)`` and PyTorch steps by ``1 / s``: where that
    picks other rows or columns than ``in / out`` would, the resize is a ``take`` of PyTorch's
    indices along each axis."""
    from tvm import relax

    x = importer.env[node.args[0]]
    shape = [int(dim) for dim in importer.shape_of(x)]
    size = node.args[1] if len(node.args) > 1 else node.kwargs.get("output_size")
    scales = [None, None]
    if not size:
        given = node.args[2] if len(node.args) > 2 else node.kwargs.get("scale_factors")
        scales = list(given) if isinstance(given, (list, tuple)) else [given] * (len(shape) - 2)
        size = [int(extent * scale) for extent, scale in zip(shape[2:], scales, strict=True)]
    size = [int(extent) for extent in size]
    sources = [
        _pytorch_nearest_sources(extent, out, scale)
        for extent, out, scale in zip(shape[2:], size, scales, strict=True)
    ]
    by_ratio = [
        _pytorch_nearest_sources(e, out, None) for e, out in zip(shape[2:], size, strict=True)
    ]
    if any((a != b).any() for a, b in zip(sources, by_ratio, strict=True)):
        for axis, indices in enumerate(sources, start=2):
            x = importer.block_builder.emit(relax.op.take(x, relax.const(indices), axis=axis))
        return x
    return importer.block_builder.emit(
        relax.op.image.resize2d(
            x,
            size,
            layout="NCHW",
            method="nearest_neighbor",
            coordinate_transformation_mode="asymmetric",
            rounding_method="floor",
        )
    )


def from_exported_program(program: Any, **kwargs: Any):
    """TVM's ``from_exported_program`` of ``program`` with the skipped ``cat`` operands dropped
    (:func:`skipped_cat_operands_dropped`; ``program`` itself is left unchanged) and PyTorch's
    nearest upsampling (:func:`_upsample_nearest2d`); ``kwargs`` go to TVM's importer (a
    ``custom_convert_map`` of the caller's takes precedence)."""
    from tvm.relax.frontend.torch import from_exported_program as tvm_from_exported_program

    converters = {"upsample_nearest2d.vec": _upsample_nearest2d}
    converters.update(kwargs.pop("custom_convert_map", None) or {})
    with skipped_cat_operands_dropped(program):
        return tvm_from_exported_program(program, custom_convert_map=converters, **kwargs)
