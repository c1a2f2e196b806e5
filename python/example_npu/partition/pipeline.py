"""partition_for_npu: the offload pipeline as one explicit pass sequence."""

from __future__ import annotations

from collections.abc import Callable

import tvm
from tvm import relax
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
from tvm.relax.dpl import pattern as dpl
from tvm.relax.transform import (
    FuseOpsByPattern,
    FusionPattern,
    MergeCompositeFunctions,
    RunCodegen,
)

from ..config import NPUConfig
from ..frontend.canonicalize import canonicalize, model_rounding
from .table import PREFIX
from .verdict import target_config


class PartitionError(ValueError):
    """A partitioning step failed; the message names the step, the op and the reason."""


def _callee_description(mod: tvm.IRModule, value: relax.Expr) -> str:
    """What a binding calls, for error messages: a Relax op, or a fused function's patterns."""
    if not isinstance(value, relax.Call):
        return type(value).__name__
    if isinstance(value.op, tvm.ir.Op):
        return value.op.name
    if isinstance(value.op, tvm.ir.GlobalVar) and value.op in mod.get_global_vars():
        func = mod[value.op]
        if func.attrs is not None and "Composite" in func.attrs:
            return f"{value.op.name_hint} (pattern {func.attrs['Composite']})"
        return value.op.name_hint
    return str(value.op)


def _leaking_composites(mod: tvm.IRModule) -> list[str]:
    """Fused pattern functions that return a tuple: a chain that also hands out an intermediate."""
    found = []
    for gv, func in mod.functions.items():
        if not isinstance(func, relax.Function) or func.attrs is None:
            continue
        composite = func.attrs["Composite"] if "Composite" in func.attrs else None
        if composite is not None and isinstance(func.ret_ty, tvm.ir.type.TupleType):
            if "batch_norm" not in str(composite):  # batch_norm returns its 3-tuple by design
                found.append(f"{gv.name_hint} (pattern {composite})")
    return sorted(found)


def _first_use_before_definition(mod: tvm.IRModule) -> str | None:
    """Names the first binding of ``main`` that reads a variable not bound before it."""
    func = mod["main"]
    defined = set(func.params)
    bindings = [b for block in func.body.blocks for b in block.bindings]
    producer = {b.var: b for b in bindings}
    for binding in bindings:
        for var in relax.analysis.free_vars(binding.value):
            if var in defined:
                continue
            reader = f"{binding.var.name} = {_callee_description(mod, binding.value)}"
            if var in producer:
                writer = _callee_description(mod, producer[var].value)
                return f"{reader} reads {var.name}, which {writer} defines only later"
            leaking = _leaking_composites(mod)
            where = f"; it is an intermediate of {', '.join(leaking)}" if leaking else ""
            return f"{reader} reads {var.name}, which no binding of main defines{where}"
        defined.add(binding.var)
    return None


def _root_ops(pattern: dpl.DFPattern) -> set[str] | None:
    """The Relax ops one of which a match's root call has, or None when the root may be anything
    (a wildcard, a tuple, ...)."""
    if isinstance(pattern, dpl.CallPattern):
        op = pattern.op
        if isinstance(op, dpl.ExprPattern) and isinstance(op.expr, tvm.ir.Op):
            return {op.expr.name}
        return None
    if isinstance(pattern, dpl.OrPattern):
        left, right = _root_ops(pattern.left), _root_ops(pattern.right)
        return None if left is None or right is None else left | right
    if isinstance(pattern, dpl.AndPattern):
        left, right = _root_ops(pattern.left), _root_ops(pattern.right)
        return right if left is None else left if right is None else left & right
    if isinstance(pattern, (dpl.AttrPattern, dpl.DataTypePattern, dpl.ShapePattern)):
        return _root_ops(pattern.pattern)
    return None


def _module_ops(mod: tvm.IRModule) -> set[str]:
    """Names of the Relax ops called anywhere in the module's Relax functions (one walk)."""
    ops: set[str] = set()

    def visit(expr: relax.Expr) -> None:
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
            ops.add(expr.op.name)

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return ops


def matchable_patterns(mod: tvm.IRModule, patterns: list[FusionPattern]) -> list[FusionPattern]:
    """The patterns whose root op occurs in ``mod``, in their priority order. FuseOpsByPattern
    tries every pattern at every binding; a float model never matches the quantized chains
    (ViT-B/16: 113 patterns -> 19, FuseOpsByPattern 0.6 -> 0.3 s CPU, the same result)."""
    present = _module_ops(mod)
    return [p for p in patterns if (ops := _root_ops(p.pattern)) is None or ops & present]


def _run_step(name: str, step: Callable[[tvm.IRModule], tvm.IRModule], mod: tvm.IRModule):
    """Runs one pass; a TVM internal failure, or a ValueError of the NPU compiler (the model
    does not fit the NPUConfig, such as max_tiles), becomes a PartitionError naming the step."""
    try:
        return step(mod)
    except tvm.error.InternalError as err:
        raise PartitionError(
            f"example_npu: {name} failed inside TVM ({_first_line(err)}); please report the model"
        ) from err
    except ValueError as err:
        raise PartitionError(f"example_npu: {name}: {_first_line(err)}") from err


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _check_well_formed(name: str, mod: tvm.IRModule) -> None:
    if relax.analysis.check_well_formed(mod):
        return
    where = _first_use_before_definition(mod)
    raise PartitionError(
        f"example_npu: {name} produced an ill-formed module"
        + (f": {where}" if where else "")
        + "; the pattern named there must not match this region"
    )


def partition_for_npu(
    mod: tvm.IRModule,
    *,
    config: NPUConfig | None = None,
    bind_constants: bool = True,
    rounding: str | None = None,
) -> tvm.IRModule:
    """Offloads every supported region of ``mod["main"]`` to the NPU.

    The module is first canonicalized: frontend idioms such as the ONNX importer's ``Clip``
    lowering become the Relax ops the patterns match, and QDQ graphs take the one form the
    integer patterns match (see :mod:`example_npu.canonicalize`).
    Adjacent supported ops are then merged into one NPU function per region (so the NPU compiler
    sees, e.g., relu -> max_pool2d -> relu as one subgraph with on-chip intermediates), codegen
    runs, and the returned module is ready for ``tvm.compile(mod, target="llvm")``. Calls the
    checks reject stay in Relax and are compiled for the CPU. With ``bind_constants`` (default)
    weights stay inside the NPU functions and reach the runtime through TVM's constant loader.
    ``config`` (default: the specification's NPU) is what the NPU compiler tiles for and what the
    profile models; the checks plan for its memories, and it is forwarded as
    ``RunCodegen(target_options={"example_npu": ...})``.

    ``rounding`` is the integer arithmetic of the NPU's quantized ops: "tvm" (bit-equal to TVM's
    CPU build of the QDQ graph) or "tflite" (TFLite's integer kernels: fixed-point
    requantization, rounded average pooling, ...). By default it is the module's
    ``example_npu.rounding`` attribute, which ``load_model`` sets to "tflite" for ``.tflite``
    files, else "tvm".

    Every step's failure inside TVM is raised as :class:`PartitionError` with the step's name, and
    a step that leaves an ill-formed module is reported with the binding it broke.
    """
    config = config or NPUConfig()
    rounding = model_rounding(mod, rounding)
    options = {"example_npu": {"npu_config": config.to_json(), "rounding": rounding}}
    patterns = get_patterns_with_prefix(PREFIX + ".")
    # The checks decide what fits on chip for this NPU, not the default one.
    with target_config(config):
        mod = _run_step("canonicalize", lambda m: canonicalize(m, rounding), mod)
        fuse = FuseOpsByPattern(
            matchable_patterns(mod, patterns), bind_constants=bind_constants, annotate_codegen=False
        )
        mod = _run_step("FuseOpsByPattern", fuse, mod)
        _check_well_formed("FuseOpsByPattern", mod)
        mod = _run_step("MergeCompositeFunctions", MergeCompositeFunctions(), mod)
        return _run_step("RunCodegen", RunCodegen(target_options=options), mod)
