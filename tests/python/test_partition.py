"""Partitioning of the specification's modules: which ops land in which composite."""

from __future__ import annotations

import example_npu  # noqa: F401
import pytest
import tvm
from spec_models import SPEC_MODULES, Conv2dReLU, MatmulReLU, MultipleOps, Softmax
from tvm import relax
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
from tvm.relax.transform import FuseOpsByPattern, MergeCompositeFunctions


def composites(mod: tvm.IRModule) -> dict[str, list[str]]:
    """Composite name -> Relax ops inside it, over every function of mod."""
    found: dict[str, list[str]] = {}

    def collect(func: relax.Function) -> None:
        if func.attrs is not None and "Composite" in func.attrs:
            ops: list[str] = []
            relax.analysis.post_order_visit(
                func.body,
                lambda e: (
                    ops.append(e.op.name)
                    if isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.Op)
                    else None
                ),
            )
            found.setdefault(str(func.attrs["Composite"]), []).extend(ops)
        relax.analysis.post_order_visit(
            func.body, lambda e: collect(e) if isinstance(e, relax.Function) else None
        )

    for _, func in mod.functions.items():
        if isinstance(func, relax.Function):
            collect(func)
    return found


def codegen_functions(mod: tvm.IRModule) -> list[relax.Function]:
    return [
        f
        for _, f in mod.functions.items()
        if isinstance(f, relax.Function) and f.attrs is not None and "Codegen" in f.attrs
    ]


def partition(mod: tvm.IRModule, annotate_codegen: bool) -> tvm.IRModule:
    patterns = get_patterns_with_prefix("example_npu")
    mod = FuseOpsByPattern(patterns, bind_constants=False, annotate_codegen=annotate_codegen)(mod)
    return MergeCompositeFunctions()(mod)


EXPECTED = {
    "MatmulReLU": {"example_npu.matmul_relu_fused": ["relax.matmul", "relax.nn.relu"]},
    "Conv2dReLU": {"example_npu.conv2d_relu_fused": ["relax.nn.conv2d", "relax.nn.relu"]},
    "MultipleOps": {
        "example_npu.relu": ["relax.nn.relu", "relax.nn.relu"],
        "example_npu.max_pool2d": ["relax.nn.max_pool2d"],
    },
    "Softmax": {"example_npu.softmax": ["relax.nn.softmax"]},
}


@pytest.mark.parametrize("name", sorted(SPEC_MODULES))
@pytest.mark.parametrize("annotate_codegen", [True, False])
def test_spec_module_ops_land_in_expected_composites(name, annotate_codegen):
    mod = partition(SPEC_MODULES[name], annotate_codegen)
    assert composites(mod) == EXPECTED[name]
    for func in codegen_functions(mod):
        assert func.attrs["Codegen"] == "example_npu"
        assert "global_symbol" in func.attrs


def test_merging_flow_makes_one_region_of_multiple_ops():
    assert len(codegen_functions(partition(MultipleOps, annotate_codegen=False))) == 1


def test_annotating_flow_gives_one_function_per_composite():
    assert len(codegen_functions(partition(MultipleOps, annotate_codegen=True))) == 3


@pytest.mark.parametrize("mod", [MatmulReLU, Conv2dReLU, Softmax])
def test_single_region_modules_become_one_npu_function(mod):
    assert len(codegen_functions(partition(mod, annotate_codegen=False))) == 1


def _qdq_conv() -> tvm.IRModule:
    import numpy as np
    from qdq_models import qdq_module

    rng = np.random.default_rng(0)
    weight = rng.integers(-127, 128, (4, 3, 3, 3)).astype("int8")
    scales = rng.uniform(0.002, 0.02, 4).astype("float32")
    return qdq_module("conv2d", (1, 3, 7, 7), weight, scales, (0.04, 5), (0.2, -3), None, "relu")


def _transformer_block() -> tvm.IRModule:
    from transformer_models import MODELS_BY_NAME, import_torch, instantiate

    return import_torch(*instantiate(MODELS_BY_NAME["llama"]))


@pytest.mark.parametrize(
    "build", [lambda: SPEC_MODULES["MultipleOps"], _qdq_conv, _transformer_block]
)
def test_fusing_only_matchable_patterns_changes_nothing(build):
    """partition_for_npu hands FuseOpsByPattern only the patterns whose root op occurs in the
    module: the fused module is the one all patterns give."""
    from example_npu.frontend.canonicalize import canonicalize
    from example_npu.partition.pipeline import matchable_patterns

    mod = canonicalize(build(), "tvm")
    patterns = get_patterns_with_prefix("example_npu")
    kept = matchable_patterns(mod, patterns)
    assert 0 < len(kept) < len(patterns)
    fused = FuseOpsByPattern(kept, bind_constants=True, annotate_codegen=False)(mod)
    tvm.ir.assert_structural_equal(
        fused, FuseOpsByPattern(patterns, bind_constants=True, annotate_codegen=False)(mod)
    )


def test_float_modules_skip_the_quantized_patterns():
    from example_npu.partition.pipeline import matchable_patterns

    patterns = get_patterns_with_prefix("example_npu")
    names = {p.name for p in matchable_patterns(SPEC_MODULES["MatmulReLU"], patterns)}
    assert "example_npu.matmul_relu_fused" in names
    assert not any(name.startswith("example_npu.qnn") for name in names), names
