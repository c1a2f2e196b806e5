"""torch.export programs -> Relax through TVM's PyTorch importer, with the fix decoder models need.

``transformers`` (5.x) starts a model's key / value cache (``DynamicLayer``) as an empty 1-D
tensor, ``torch.tensor([])``, and appends each step's keys with
``torch.cat([keys, key_states], dim=-2)``. PyTorch's ``cat`` skips 1-D tensors with no elements
(its legacy rule), so the program concatenates a ``(0,)`` tensor with a 4-D one; TVM's importer
refuses that (``Concat expects all input tensors to have same ndim. However, the input contains
tensors with ndim 1 and 4``), and every GPT-2 / Llama-style model exported with its cache (the
default ``use_cache=True`` with transformers' cache pytrees registered) fails to import.
:func:`drop_skipped_cat_operands` removes those operands from the program's ``aten.cat`` calls,
which is exactly what PyTorch computes; :func:`from_exported_program` does that, then calls TVM's
importer.
"""

from __future__ import annotations

from typing import Any


def _skipped_by_cat(node: Any) -> bool:
    """A graph value PyTorch's ``cat`` ignores: a 1-D tensor with no elements."""
    value = getattr(node, "meta", {}).get("val")
    shape = getattr(value, "shape", None)
    return shape is not None and len(shape) == 1 and shape[0] == 0


def drop_skipped_cat_operands(program: Any) -> int:
    """Removes the empty 1-D operands PyTorch's ``cat`` skips from every ``aten.cat`` of
    ``program`` (a ``torch.export.ExportedProgram``, edited in place: it computes the same);
    returns how many were removed. A ``cat`` of nothing but such operands is left as it is."""
    import torch

    removed = 0
    cats = (torch.ops.aten.cat.default, torch.ops.aten.concat.default)
    for node in program.graph.nodes:
        if node.op != "call_function" or node.target not in cats:
            continue
        operands = list(node.args[0])
        kept = [operand for operand in operands if not _skipped_by_cat(operand)]
        if kept and len(kept) < len(operands):
            node.args = (kept, *node.args[1:])
            removed += len(operands) - len(kept)
    if removed:
        program.graph.lint()
        program.graph_module.recompile()
    return removed


def from_exported_program(program: Any, **kwargs: Any):
    """TVM's ``from_exported_program`` of ``program`` after :func:`drop_skipped_cat_operands`;
    ``kwargs`` go to TVM's importer."""
    from tvm.relax.frontend.torch import from_exported_program as tvm_from_exported_program

    drop_skipped_cat_operands(program)
    return tvm_from_exported_program(program, **kwargs)
