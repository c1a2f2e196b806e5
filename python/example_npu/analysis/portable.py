"""A picklable snapshot of a Relax IRModule, for sending a model to other processes.

The pinned TVM cannot pickle an IRModule, nor save it as JSON (both end in a crash of its JSON
graph writer), so a sweep could not hand a model to a process pool or a Dask worker. The snapshot
is the module's TVMScript text, whose constants print as ``metadata[...]`` references, plus the
constants' values as numpy arrays in the order the printer numbers them. ``load()`` parses the
text back with those constants; the round trip is checked once, when the snapshot is taken.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import Constant

_METADATA_KIND = "ir.GenericConst"
_REFERENCE = re.compile(r'metadata\["([^"]+)"\]\[(\d+)\]')


def _constants_in_print_order(mod: tvm.IRModule) -> list[Constant]:
    """Tensor constants in order of first use, function by function as the printer walks."""
    constants: list[Constant] = []
    seen: set[Constant] = set()  # TVM objects hash and compare by identity

    def visit(expr: Any) -> None:
        if isinstance(expr, Constant) and hasattr(expr.value, "numpy") and expr not in seen:
            seen.add(expr)
            constants.append(expr)

    for _, func in sorted(mod.functions.items(), key=lambda item: item[0].name_hint):
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func.body, visit)
    return constants


class ModelSnapshot:
    """What it takes to rebuild ``mod`` in another process: TVMScript text and constants."""

    def __init__(self, mod: tvm.IRModule):
        self.text = mod.script()
        references = {(kind, int(index)) for kind, index in _REFERENCE.findall(self.text)}
        kinds = {kind for kind, _ in references} - {_METADATA_KIND}
        if kinds:
            raise ValueError(f"the model holds metadata a snapshot cannot carry: {sorted(kinds)}")
        self.constants = [
            np.ascontiguousarray(c.value.numpy()) for c in _constants_in_print_order(mod)
        ]
        if len(references) != len(self.constants):
            raise ValueError(
                f"the model prints {len(references)} constants but holds {len(self.constants)}"
            )
        digest = hashlib.sha256(self.text.encode())
        for array in self.constants:
            digest.update(array.tobytes())
        self.digest = digest.hexdigest()
        try:
            tvm.ir.assert_structural_equal(self.load(), mod)
        except (ValueError, tvm.error.TVMError) as err:
            raise ValueError(f"the model does not survive a TVMScript round trip: {err}") from err

    def load(self) -> tvm.IRModule:
        """The module, parsed from the snapshot (a new object each call)."""
        # The names the parser binds by default (I, R, T, ...), plus the constants.
        from tvm.script.parser.core.entry import _default_globals

        extra_vars = _default_globals()
        extra_vars["metadata"] = {_METADATA_KIND: [relax.const(a) for a in self.constants]}
        return tvm.script.from_source(self.text, extra_vars=extra_vars)
