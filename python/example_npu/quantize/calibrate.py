"""Calibration: run the float model on sample batches and record activation ranges.

An instrumented copy of ``main`` returns the tensors to be quantized (a tuple output), is
compiled once with TVM's CPU build and run per batch. Two ways of turning the values into a
range:

- ``minmax``: the global minimum and maximum over all batches.
- ``percentile``: the ``(100 - p)``-th and ``p``-th percentiles of the values (default
  p = 99.99), so the low and high tails are clipped separately and a rare outlier does not
  stretch the grid. Each batch contributes at most ``_PERCENTILE_SAMPLES`` values per tensor
  (a fixed-seed random subset when it has more). The result stays inside the min/max range.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import tvm
from tvm import relax

METHODS = ("minmax", "percentile")
_PERCENTILE_SAMPLES = 1 << 18


def _tensor_params(func: relax.Function) -> list[tuple[str, tuple[Any, ...], str]]:
    """(name, shape with None for symbolic dims, dtype) of every parameter of ``main``."""
    params = []
    for param in func.params:
        ty = param.ty
        if not isinstance(ty, relax.TensorType) or ty.shape is None:
            raise TypeError(
                f"quantize_model: main's parameter '{param.name}' has type {ty}; only float32 "
                "tensor parameters with a known rank are supported"
            )
        dtype = str(ty.dtype)
        if dtype != "float32":
            raise TypeError(
                f"quantize_model: main's parameter '{param.name}' is {dtype}; quantize_model "
                "takes a float32 model"
            )
        shape = tuple(int(d) if isinstance(d, tvm.tirx.IntImm) else None for d in ty.shape)
        params.append((param.name, shape, dtype))
    return params


def _as_array(value: Any) -> np.ndarray:
    if isinstance(value, tvm.runtime.Tensor):
        return value.numpy()
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def normalize_batches(func: relax.Function, calibration_data: Any) -> list[list[np.ndarray]]:
    """Validates the calibration set against ``main``'s parameters; one array list per batch.

    A batch is one array (single-input models), a sequence of arrays in parameter order, or a
    mapping from parameter name to array.
    """
    params = _tensor_params(func)
    if calibration_data is None:
        raise ValueError("quantize_model: calibration_data is empty (got None)")
    if isinstance(calibration_data, np.ndarray | tvm.runtime.Tensor) or hasattr(
        calibration_data, "detach"
    ):
        raise TypeError(
            "quantize_model: calibration_data must be an iterable of batches, not a single "
            "array; wrap one batch in a list: [batch]"
        )
    if not isinstance(calibration_data, Iterable):
        raise TypeError(
            "quantize_model: calibration_data must be an iterable of batches, got "
            f"{type(calibration_data).__name__}"
        )
    batches = []
    for index, batch in enumerate(calibration_data):
        if isinstance(batch, Mapping):
            missing = [name for name, _, _ in params if name not in batch]
            extra = sorted(set(batch) - {name for name, _, _ in params})
            if missing or extra:
                raise ValueError(
                    f"quantize_model: calibration batch {index} has keys {sorted(batch)}, "
                    f"main's parameters are {[name for name, _, _ in params]}"
                )
            arrays = [_as_array(batch[name]) for name, _, _ in params]
        elif isinstance(batch, Sequence) and not isinstance(batch, str):
            arrays = [_as_array(item) for item in batch]
        else:
            arrays = [_as_array(batch)]
        if len(arrays) != len(params):
            raise ValueError(
                f"quantize_model: calibration batch {index} has {len(arrays)} input(s), main "
                f"takes {len(params)} ({', '.join(name for name, _, _ in params)})"
            )
        for array, (name, shape, dtype) in zip(arrays, params, strict=True):
            if str(array.dtype) != dtype:
                raise ValueError(
                    f"quantize_model: calibration batch {index}, input '{name}': dtype "
                    f"{array.dtype}, main expects {dtype}"
                )
            if array.ndim != len(shape) or any(
                want is not None and want != got
                for want, got in zip(shape, array.shape, strict=True)
            ):
                want = tuple("?" if d is None else d for d in shape)
                raise ValueError(
                    f"quantize_model: calibration batch {index}, input '{name}': shape "
                    f"{tuple(array.shape)}, main expects {want}"
                )
        batches.append(arrays)
    if not batches:
        raise ValueError("quantize_model: calibration_data is empty (no batches)")
    return batches


def _instrumented(mod: tvm.IRModule, tensors: Sequence[relax.Var]) -> tvm.IRModule:
    """A copy of ``mod`` whose ``main`` returns the tuple of ``tensors`` (vars of ``main``).

    Dataflow vars are not visible outside their block, so each block that defines some gets
    one extra output binding per var.
    """
    func = mod["main"]
    wanted = set(tensors)
    exported: dict[relax.Var, relax.Var] = {}
    blocks = []
    for block in func.body.blocks:
        if not isinstance(block, relax.DataflowBlock):
            blocks.append(block)
            continue
        bindings = list(block.bindings)
        for binding in block.bindings:
            var = binding.var
            if var in wanted and isinstance(var, relax.DataflowVar):
                out = relax.Var(f"{var.name}_calib", var.ty)
                bindings.append(relax.VarBinding(out, var))
                exported[var] = out
        blocks.append(relax.DataflowBlock(bindings))
    body = relax.SeqExpr(blocks, relax.Tuple([exported.get(v, v) for v in tensors]))
    ret_ty = relax.TupleType([v.ty for v in tensors])
    new_func = relax.Function(func.params, body, ret_ty, func.is_pure, func.attrs)
    new_func = relax.BlockBuilder().normalize(new_func)
    new_mod = tvm.IRModule(dict(mod.functions.items()))
    new_mod["main"] = new_func
    return new_mod


class _RangeObserver:
    def __init__(self, method: str, percentile: float):
        self.method = method
        self.percentile = percentile
        self.lo = np.inf
        self.hi = -np.inf
        self.samples: list[np.ndarray] = []
        self.rng = np.random.default_rng(0)

    def observe(self, values: np.ndarray) -> None:
        flat = values.reshape(-1)
        if flat.size == 0:
            return
        self.lo = min(self.lo, float(flat.min()))
        self.hi = max(self.hi, float(flat.max()))
        if self.method == "percentile":
            if flat.size > _PERCENTILE_SAMPLES:
                flat = flat[self.rng.integers(0, flat.size, _PERCENTILE_SAMPLES)]
            self.samples.append(flat.astype("float32", copy=True))

    def range(self) -> tuple[float, float]:
        if self.lo > self.hi:  # no values at all (zero-size tensors)
            return 0.0, 0.0
        if self.method == "minmax":
            return self.lo, self.hi
        values = np.concatenate(self.samples)
        lo, hi = np.percentile(values, [100.0 - self.percentile, self.percentile])
        return max(float(lo), self.lo), min(float(hi), self.hi)


def collect_ranges(
    mod: tvm.IRModule,
    batches: Sequence[Sequence[np.ndarray]],
    tensors: Sequence[relax.Var],
    method: str = "minmax",
    percentile: float = 99.99,
) -> dict[relax.Var, tuple[float, float]]:
    """Runs the float ``main`` on every batch; returns the (lo, hi) range of each tensor."""
    tensors = list(dict.fromkeys(tensors))
    if not tensors:
        return {}
    params = list(mod["main"].params)
    from_params = {v: params.index(v) for v in tensors if v in params}
    computed = [v for v in tensors if v not in from_params]
    observers = {v: _RangeObserver(method, percentile) for v in tensors}
    vm = None
    if computed:
        executable = tvm.compile(_instrumented(mod, computed), target="llvm")
        vm = relax.VirtualMachine(executable, tvm.cpu())
    for arrays in batches:
        for var, index in from_params.items():
            observers[var].observe(arrays[index])
        if vm is None:
            continue
        outputs = vm["main"](*[tvm.runtime.tensor(np.ascontiguousarray(a)) for a in arrays])
        for var, value in zip(computed, outputs, strict=True):
            observers[var].observe(value.numpy())
    return {var: observer.range() for var, observer in observers.items()}
