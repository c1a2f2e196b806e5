"""Checks shared by the randomized QDQ tests: one integer NPU op, bit-exact to the integer
reference and within 1 LSB of TVM's CPU build of the float QDQ graph."""

from __future__ import annotations

from collections.abc import Callable

import example_npu
import numpy as np
import tvm
from spec_models import external_symbols, npu_ops, run


def assert_one_integer_op_bit_exact(
    model: tvm.IRModule,
    x: np.ndarray | list[np.ndarray],
    expected: np.ndarray,
    label: str,
    npu_op: str | None = None,
) -> float:
    """Partitions ``model``, which must become one NPU call (of ``npu_op`` when given), checks its
    output on ``x`` (one input, or a list of them) equals ``expected`` (the integer reference)
    and is within 1 LSB of TVM's CPU build of the float QDQ graph; returns the share of elements
    1 LSB away, for :func:`assert_one_lsb_mismatches_rare`."""
    inputs = x if isinstance(x, list) else [x]
    offloaded = example_npu.partition_for_npu(model)
    assert len(external_symbols(offloaded)) == 1, f"{label}: not offloaded as one QNN op"
    if npu_op is not None:
        assert npu_ops(offloaded) == [npu_op], label
    npu = run(offloaded, inputs)
    np.testing.assert_array_equal(npu, expected, err_msg=label)
    diff = np.abs(npu.astype(np.int64) - run(model, inputs).astype(np.int64))
    assert diff.max() <= 1, f"{label}: {diff.max()} LSB from TVM's float QDQ build"
    return float((diff > 0).mean())


def assert_one_lsb_mismatches_rare(
    one_lsb_share: Callable[[int], float], cases: int, what: str
) -> None:
    """The mean share of elements 1 LSB away over the randomized cases ``range(cases)`` stays
    under 2%. ``one_lsb_share(index)`` runs case ``index`` through
    :func:`assert_one_integer_op_bit_exact`; the tests cache it (``functools.cache``), so cases
    the parametrized test already ran in this session are not run again, and this check also
    holds when run alone."""
    fraction = float(np.mean([one_lsb_share(index) for index in range(cases)]))
    print(f"{what} elements 1 LSB away from TVM's float QDQ build: {fraction:.4%}")
    assert fraction < 0.02
