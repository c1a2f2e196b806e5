"""estimate(): the profile of one inference without executing the model.

The NPU compiler already schedules every NPU function on the timing model when the function is
compiled (the cycles depend on shapes and the NPUConfig, never on values), so the profile that
``profile()`` records during a run is known once the module is partitioned. ``estimate()``
partitions and compiles, then collects those profiles in the order ``main`` calls the NPU
functions: the same ``Profile``, and no emulator run, no inputs, no ``tvm.compile``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import tvm
from tvm import relax, tirx

from ..config import NPUConfig
from ..partition.pipeline import partition_for_npu
from .profile import Profile, aggregate_profiles


def bind_input_shapes(mod: tvm.IRModule, input_shapes: Mapping[str, Sequence[int]]) -> tvm.IRModule:
    """Returns ``mod`` with the symbolic dims of ``main``'s parameters bound to ``input_shapes``
    (parameter name -> static shape), so the NPU checks and compiler see static shapes."""
    main = mod["main"]
    params = {param.name: param for param in main.params}
    unknown = sorted(set(input_shapes) - set(params))
    if unknown:
        raise ValueError(
            f"input_shapes names {unknown}, which main does not take: {sorted(params)}"
        )
    bindings: dict[tirx.Var, int] = {}
    for name, shape in input_shapes.items():
        declared = getattr(params[name].ty, "shape", None)
        if not isinstance(declared, relax.ShapeExpr) or len(declared.values) != len(shape):
            raise ValueError(f"input {name}: shape {list(shape)} does not match {declared}")
        for dim, value in zip(declared.values, shape, strict=True):
            if isinstance(dim, tirx.IntImm):
                if int(dim) != int(value):
                    raise ValueError(f"input {name}: shape {list(shape)} does not match {declared}")
            elif isinstance(dim, tirx.Var):
                if bindings.setdefault(dim, int(value)) != int(value):
                    raise ValueError(f"input {name}: {dim} is bound to two sizes")
            else:
                raise ValueError(
                    f"input {name}: dim {dim} is an expression; only plain symbolic dims bind"
                )
    result = tvm.IRModule(dict(mod.functions.items()), attrs=mod.attrs)
    result["main"] = main.bind_symbolic_vars(bindings)
    return result


def _has_symbolic_inputs(mod: tvm.IRModule) -> bool:
    for param in mod["main"].params:
        shape = getattr(param.ty, "shape", None)
        if isinstance(shape, relax.ShapeExpr) and not all(
            isinstance(dim, tirx.IntImm) for dim in shape.values
        ):
            return True
    return False


def _npu_calls(mod: tvm.IRModule, func: relax.Function) -> list[str]:
    """The NPU function symbols ``func`` calls, in execution order (into called Relax
    functions)."""
    symbols: list[str] = []

    def visit(expr: Any) -> None:
        if not isinstance(expr, relax.Call):
            return
        if expr.op == tvm.ir.Op.get("relax.call_dps_packed") and isinstance(
            expr.args[0], relax.ExternFunc
        ):
            symbols.append(str(expr.args[0].global_symbol))
        elif isinstance(expr.op, tvm.ir.GlobalVar) and isinstance(mod[expr.op], relax.Function):
            symbols.extend(_npu_calls(mod, mod[expr.op]))

    relax.analysis.post_order_visit(func.body, visit)
    return symbols


def estimate(
    mod: tvm.IRModule,
    config: NPUConfig | None = None,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> Profile:
    """Partitions ``mod`` for ``config`` (default ``NPUConfig()``), compiles its NPU functions
    and returns the ``Profile`` that ``profile()`` would report for one run of ``main``: cycles,
    energy, bytes per tier, utilization and the per-node table, without executing anything.

    ``input_shapes`` (parameter name -> shape) binds symbolic input dims first. Raises
    ``ValueError`` when nothing of the model runs on the NPU, and whatever partitioning raises
    for a configuration it cannot compile for.
    """
    if input_shapes:
        mod = bind_input_shapes(mod, input_shapes)
    empty = "the model has no NPU subgraph: nothing to estimate"
    if not input_shapes and _has_symbolic_inputs(mod):
        empty += " (main's inputs have symbolic dims, which the NPU rejects: pass input_shapes)"
    return profile_partitioned(partition_for_npu(mod, config=config), empty=empty)


def profile_partitioned(
    partitioned: tvm.IRModule, empty: str = "the model has no NPU subgraph: nothing to estimate"
) -> Profile:
    """The Profile of one run of a module ``partition_for_npu`` returned: the schedule each NPU
    function was compiled with, in the order ``main`` calls them."""
    modules = {
        str(module["get_symbol"]()): module
        for module in partitioned.attrs.get("external_mods", [])
        if module.kind == "example_npu_json"
    }
    recorded = [
        str(modules[symbol]["get_profile"]())
        for symbol in _npu_calls(partitioned, partitioned["main"])
        if symbol in modules
    ]
    return aggregate_profiles(recorded, empty=empty)
