"""Checks shared by the randomized QDQ tests: one integer NPU op. A matmul's output is TVM's CPU
build of the float QDQ graph bit for bit, and the integer reference's exact rounding everywhere but
the outputs near a rounding tie, which take TVM's float32 steps (src/kernels/near_ties.h).
Convolutions keep the exact rounding there: they equal the integer reference and lie within 1 LSB
of TVM's build."""

from __future__ import annotations

from collections.abc import Callable

import example_npu
import numpy as np
import tvm
from spec_models import external_symbols, npu_ops, run

# Near-tie outputs are about 0.2% of a layer's; a small layer may hold a few.
NEAR_TIE_SHARE = 0.02


def assert_one_integer_op_bit_exact(
    model: tvm.IRModule,
    x: np.ndarray | list[np.ndarray],
    expected: np.ndarray,
    label: str,
    npu_op: str | None = None,
    breaks_ties: bool = True,
) -> float:
    """Partitions ``model``, which must become one NPU call (of ``npu_op`` when given), and checks
    its output on ``x`` (one input, or a list of them): with ``breaks_ties``, equal to TVM's CPU
    build and within 1 LSB of ``expected`` (the integer reference) in at most a few near-tie
    elements; without, equal to ``expected`` and within 1 LSB of TVM's build. Returns the share of
    elements where TVM's build and the integer reference part, for
    :func:`assert_one_lsb_mismatches_rare`."""
    inputs = x if isinstance(x, list) else [x]
    offloaded = example_npu.partition_for_npu(model)
    assert len(external_symbols(offloaded)) == 1, f"{label}: not offloaded as one QNN op"
    if npu_op is not None:
        assert npu_ops(offloaded) == [npu_op], label
    npu, cpu = run(offloaded, inputs), run(model, inputs)
    exact = np.abs(npu.astype(np.int64) - expected.astype(np.int64))
    if breaks_ties:
        np.testing.assert_array_equal(npu, cpu, err_msg=f"{label}: not TVM's build")
        assert exact.max(initial=0) <= 1, f"{label}: {exact.max()} LSB from the integer reference"
        assert (exact > 0).mean() <= NEAR_TIE_SHARE, f"{label}: {(exact > 0).sum()} re-rounded"
    else:
        np.testing.assert_array_equal(npu, expected, err_msg=label)
        diff = np.abs(npu.astype(np.int64) - cpu.astype(np.int64))
        assert diff.max() <= 1, f"{label}: {diff.max()} LSB from TVM's float QDQ build"
    return float((cpu != expected).mean())


def assert_one_lsb_mismatches_rare(
    one_lsb_share: Callable[[int], float], cases: int, what: str
) -> None:
    """The mean share of elements where TVM's float32 build and the exact rounding part (1 LSB)
    over the randomized cases ``range(cases)`` stays under 2%. ``one_lsb_share(index)`` runs case
    ``index`` through :func:`assert_one_integer_op_bit_exact`; the tests cache it
    (``functools.cache``), so cases the parametrized test already ran in this session are not run
    again, and this check also holds when run alone."""
    fraction = float(np.mean([one_lsb_share(index) for index in range(cases)]))
    print(f"{what} elements where TVM's QDQ build and the exact rounding part: {fraction:.4%}")
    assert fraction < 0.02
