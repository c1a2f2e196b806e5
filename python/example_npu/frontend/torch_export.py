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
connection's size got rows and columns shifted by one, 0.64 away from PyTorch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


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


def _upsample_nearest2d(node: Any, importer: Any) -> Any:
    """``aten.upsample_nearest2d.vec(x, output_size, scale_factors)`` as PyTorch computes it:
    source index ``floor(dst * in / out)``. With scale factors the output is ``floor(in * s)``;
    PyTorch then maps by ``1 / s``, the same as ``in / out`` whenever ``in * s`` is whole (every
    integer factor)."""
    from tvm import relax

    x = importer.env[node.args[0]]
    size = node.args[1] if len(node.args) > 1 else node.kwargs.get("output_size")
    if not size:
        scales = node.args[2] if len(node.args) > 2 else node.kwargs.get("scale_factors")
        shape = [int(dim) for dim in importer.shape_of(x)]
        scales = scales if isinstance(scales, (list, tuple)) else [scales] * (len(shape) - 2)
        size = [int(extent * scale) for extent, scale in zip(shape[2:], scales, strict=True)]
    return importer.block_builder.emit(
        relax.op.image.resize2d(
            x,
            [int(extent) for extent in size],
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
