"""Every supported operator computes exactly what TVM computes, on seeded random cases.

The cases, tolerances and expectations are described in op_cases.py. One test per op family
runs all of the family's cases and reports every failing case with its seed, its description
and the command that reruns it. The offloaded/partial/rejected counts per family and dtype, and
the composites per pattern, go to build/random_ops_summary.{md,json}, to the junit properties of
each family test, and to pytest's terminal summary.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import example_npu  # noqa: F401  # registers patterns, codegen and runtime
import op_cases
import pytest
from example_npu import NPUConfig

SUMMARY_DIR = Path(__file__).resolve().parents[2] / "build"
RESULTS: dict[str, list[op_cases.CaseResult]] = {}

# Single-op pattern rows this suite must see offloaded at least once (every family has
# standalone calls of them). quantize and dequantize are rejected by design until the integer
# kernels land. Fused rows (conv2d_relu_fused, matmul_relu_fused and any added later) are
# exercised by the *_bias_act families and counted in the summary, but not required: which
# fused row claims a chain depends on the table's priorities, not on the NPU's correctness.
REQUIRED_PATTERNS = frozenset(
    {
        "add",
        "subtract",
        "multiply",
        "divide",
        "relu",
        "relu6",
        "gelu",
        "gelu_tanh",
        "sigmoid",
        "tanh",
        "softmax",
        "batch_norm",
        "max_pool2d",
        "avg_pool2d",
        "matmul",
        "dense",
        "conv1d",
        "conv2d",
        "depthwise_conv2d",
    }
)


def _registered_short_names() -> set[str]:
    return {name.removeprefix("example_npu.") for name in example_npu.REGISTERED_PATTERNS}


def _write_summary(config: pytest.Config) -> dict:
    results = [result for family in RESULTS.values() for result in family]
    summary = op_cases.summarize(results)
    text = op_cases.summary_markdown(summary)
    SUMMARY_DIR.mkdir(exist_ok=True)
    (SUMMARY_DIR / "random_ops_summary.md").write_text(text)
    (SUMMARY_DIR / "random_ops_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    config.stash[op_cases.SUMMARY_KEY] = text
    return summary


def _run_family(
    family: str, config: NPUConfig | None = None, every: int = 1
) -> tuple[list[op_cases.CaseResult], list[str]]:
    results, failures = [], []
    for case in op_cases.family_cases(family)[::every]:
        try:
            result = op_cases.run_case(case, config)
        except Exception as err:  # noqa: BLE001  # a crash fails this case, reported with its seed
            message = str(err).strip().splitlines()
            failures.append(
                f"{case.header}\n    {type(err).__name__}: {message[0] if message else ''}"
                f"\n    rerun: {case.reproduce}"
            )
            continue
        results.append(result)
        if result.problems:
            details = "\n    ".join(result.problems)
            failures.append(f"{case.header}\n    {details}\n    rerun: {case.reproduce}")
    return results, failures


@pytest.mark.parametrize("family", [family.name for family in op_cases.FAMILIES])
def test_random_cases_match_tvm(family, record_property, request):
    results, failures = _run_family(family)
    RESULTS[family] = results
    summary = _write_summary(request.config)
    outcomes = Counter(result.outcome for result in results)
    record_property("seed", op_cases.base_seed())
    record_property("cases", len(results) + len(failures))
    for outcome in ("offloaded", "partial", "rejected"):
        record_property(outcome, outcomes[outcome])
    record_property("by_dtype", json.dumps(summary["families"].get(family, {})))
    assert not failures, (
        f"{len(failures)} {family} case(s) failed ({op_cases.ENV_SEED}={op_cases.base_seed()}):\n"
        + "\n".join(failures)
    )
    if any(result.case.expect == "offload" for result in results):
        assert any(result.outcome == "offloaded" for result in results), (
            f"no {family} case was offloaded"
        )


def test_every_pattern_and_op_offloads_in_some_case(request):
    """Across all families (run here if the family tests were deselected)."""
    for family in op_cases.FAMILIES:
        if family.name not in RESULTS:
            RESULTS[family.name], failures = _run_family(family.name)
            assert not failures, "\n".join(failures)
    summary = _write_summary(request.config)
    missing = sorted(
        name
        for name in REQUIRED_PATTERNS & _registered_short_names()
        if name not in summary["patterns"]
    )
    assert not missing, f"patterns never offloaded: {missing}"
    offloaded_ops = Counter()
    for family in RESULTS.values():
        for result in family:
            if result.case.dtype == "float32":
                offloaded_ops.update(result.offloaded_ops)
    assert sorted(op_cases.TABLE_OPS - set(offloaded_ops)) == []
    # Several hundred cases per run (fewer only when EXAMPLE_NPU_RANDOM_SCALE asks for it).
    assert sum(len(family) for family in RESULTS.values()) >= 300 * op_cases.case_scale()


@pytest.mark.parametrize("family", [family.name for family in op_cases.FAMILIES])
def test_random_cases_match_tvm_with_a_tiny_l1(family, monkeypatch):
    """Every 4th case again on a 16 KB L1: more tiles, halos and split reductions, same numbers.

    These runs also turn DMA forwarding and the fused requantization off, so every transfer moves
    its bytes through the emulated L1 and every quantized tile's requantization runs as its own
    step (the default runs above forward contiguous transfers and fuse requantization).
    """
    monkeypatch.setenv("EXAMPLE_NPU_FORWARD_DMA", "0")
    monkeypatch.setenv("EXAMPLE_NPU_FUSE_REQUANTIZE", "0")
    _, failures = _run_family(family, NPUConfig(l1_sram_kb=16), every=4)
    assert not failures, f"{len(failures)} {family} case(s) failed with a 16 KB L1:\n" + "\n".join(
        failures
    )
