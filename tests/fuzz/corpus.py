"""The fuzzer's seed corpus: every NPU graph the codegen produces for the test models.

Nothing here lists ops by hand. The seeds are whatever ``example_npu``'s codegen emits for the
random op cases (tests/python/op_cases.py, a few per family and dtype), the specification's
models, the demo CNN and quantized (QDQ) layers, the integer glue islands of test_qnn_glue.py,
onnxruntime's MatMulInteger (test_integer_matmul.py),
quantize_model's CNNs (integer add, pooling, concat, tables), the specification's
bind_constants=False flow (quantization parameters as runtime arguments), and the real-model
architectures (tests/python/real_models.py) through both import paths, so an op or
pattern added to the table and to the random suite, or an idiom a frontend emits, reaches the
fuzzer without touching it. Run on its own to write the corpus:

    .venv/bin/python tests/fuzz/corpus.py build/fuzz/corpus.json
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import tvm
from tvm import relax
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
from tvm.relax.frontend.onnx import from_onnx
from tvm.relax.transform import FuseOpsByPattern, MergeCompositeFunctions, RunCodegen

TESTS = Path(__file__).resolve().parents[1] / "python"
sys.path.insert(0, str(TESTS))

import example_npu  # noqa: E402
import op_cases  # noqa: E402
import qdq_models  # noqa: E402
import real_models  # noqa: E402
import spec_models  # noqa: E402
import test_integer_matmul  # noqa: E402
import test_qnn_glue  # noqa: E402
from example_npu.codegen import graph as codegen  # noqa: E402
from example_npu.frontend.builtin_models import default_model  # noqa: E402

# Cases per (family, dtype) of the random suite always taken as seeds; later cases are taken
# when they use a Relax op no earlier seed used.
CASES_PER_DTYPE = 2


def relax_ops(mod: tvm.IRModule) -> set[str]:
    ops: set[str] = set()

    def visit(expr: object) -> None:
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
            ops.add(expr.op.name)

    relax.analysis.post_order_visit(mod["main"], visit)
    return ops


def _random_op_modules() -> Iterator[tvm.IRModule]:
    seen: set[str] = set()
    for family in op_cases.FAMILIES:
        taken: dict[str, int] = {}
        for case in op_cases.family_cases(family.name):
            if case.expect == "reject":
                continue
            mod = case.build()
            ops = relax_ops(mod)
            if taken.get(case.dtype, 0) < CASES_PER_DTYPE or not ops <= seen:
                taken[case.dtype] = taken.get(case.dtype, 0) + 1
                seen |= ops
                yield mod


def _qdq_modules() -> Iterator[tvm.IRModule]:
    rng = np.random.default_rng(0)
    for kind, act_dtype, activation in [
        ("conv2d", "int8", "relu"),
        ("matmul", "int16", None),
        ("dense", "int8", "relu6"),
    ]:
        if kind == "conv2d":
            x_shape, w_shape = (1, 3, 8, 8), (4, 3, 3, 3)
        elif kind == "matmul":
            x_shape, w_shape = (2, 5, 16), (16, 6)
        else:
            x_shape, w_shape = (4, 16), (6, 16)
        channels = w_shape[1] if kind == "matmul" else w_shape[0]
        yield qdq_models.qdq_module(
            kind,
            x_shape,
            rng.integers(-127, 128, size=w_shape).astype("int8"),
            rng.uniform(0.01, 0.02, size=channels).astype("float32"),
            (0.05, 3),
            (0.1, -2),
            bias=rng.standard_normal(channels).astype("float32"),
            activation=activation,
            act_dtype=act_dtype,
        )


def _quantized_cnn() -> tvm.IRModule:
    """The demo CNN through quantize_model: QDQ layers, and quantize / dequantize around the
    float ops between them, as a user's PTQ model has them."""
    mod = default_model()
    shape = [int(d) for d in mod["main"].params[0].ty.shape]
    rng = np.random.default_rng(0)
    return example_npu.quantize_model(mod, [rng.standard_normal(shape).astype("float32")])


def _qnn_glue_modules() -> Iterator[tvm.IRModule]:
    """One QDQ island per integer glue kind (requantize, add, pooling, softmax, concat, tables)
    in a seeded dtype (int8, uint8, int16)."""
    for index, kind in enumerate(test_qnn_glue.KINDS):
        yield test_qnn_glue.random_case(kind, np.random.default_rng([0, index]))["model"]


def _quantized_real_models() -> Iterator[tvm.IRModule]:
    """quantize_model's onnxruntime form of the CNNs whose glue runs in integers (residual add,
    hardswish and sigmoid tables, fire concat, channel shuffle)."""
    for name in ("mobilenet_v3", "squeezenet", "shufflenet_v2"):
        module, data = real_models.instantiate(real_models.MODELS_BY_NAME[name])
        yield example_npu.quantize_model(real_models.import_torch(module, data), [data])


def _integer_matmul_modules() -> Iterator[tvm.IRModule]:
    """onnxruntime's MatMulInteger: a run-time zero point (DynamicQuantizeLinear's) and a
    constant one, as TVM's ONNX importer gives them."""
    for model in (
        test_integer_matmul.dynamic_model((1, 6, 32), 16),
        test_integer_matmul.static_zero_point_model(3, 40, 8),
    ):
        yield from_onnx(onnx.load_from_string(model))


def _spec_flow_unbound(mod: tvm.IRModule) -> None:
    """The specification's flow with bind_constants=False: the graphs carry {"arg": input}
    quantization parameters that the runtime binds."""
    patterns = get_patterns_with_prefix("example_npu")
    fused = FuseOpsByPattern(patterns, bind_constants=False, annotate_codegen=True)(
        example_npu.canonicalize_qdq(mod)
    )
    RunCodegen()(MergeCompositeFunctions()(fused))


def _real_model_modules() -> Iterator[tvm.IRModule]:
    """Every real-model architecture as torch.export and as the ONNX importer give it (the
    frontends' idioms: views, concat, safe softmax, fused activation chains, whole networks)."""
    for model in real_models.MODELS:
        module, data = real_models.instantiate(model)
        yield real_models.import_torch(module, data)
        onnx_bytes = real_models.export_onnx(module, data)
        yield real_models.import_onnx(onnx_bytes, model.input_shape)


def _modules() -> Iterator[tvm.IRModule]:
    yield from _random_op_modules()
    yield from spec_models.SPEC_MODULES.values()
    yield default_model()
    yield _quantized_cnn()
    yield from _qdq_modules()
    yield from _qnn_glue_modules()
    yield from _integer_matmul_modules()
    yield from _quantized_real_models()
    yield from _real_model_modules()


def collect_graphs() -> list[dict]:
    """The graphs (JSON-ready dicts) the codegen builds while partitioning every seed model."""
    graphs: list[dict] = []
    original = codegen.create_runtime_module

    def record(graph: dict) -> tvm.runtime.Module:
        graphs.append(copy.deepcopy(graph))
        return original(graph)

    codegen.create_runtime_module = record
    try:
        for mod in _modules():
            example_npu.partition_for_npu(mod)
        _spec_flow_unbound(_quantized_cnn())
    finally:
        codegen.create_runtime_module = original
    return graphs


def main(argv: list[str]) -> int:
    graphs = collect_graphs()
    Path(argv[0]).parent.mkdir(parents=True, exist_ok=True)
    Path(argv[0]).write_text(json.dumps(graphs))
    print(f"{len(graphs)} seed graphs with ops {sorted(ops_of(graphs))}")
    return 0


def ops_of(graphs: list[dict]) -> set[str]:
    return {node["op"] for graph in graphs for node in graph["nodes"]}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
