"""Real-model goals through both import paths (models in real_models.py, random weights).

torch path: ``torch.export`` + ``from_exported_program``, compared with PyTorch. ONNX path:
``torch.onnx.export(dynamo=True)`` + ``from_onnx``, compared with onnxruntime. Each CNN must
become one NPU function from its first conv to its classifier, the ViT at most three with every
matmul, softmax, layer_norm and GELU on the NPU; outputs within 1e-4 of the reference; and
anything left on the CPU is named by the partition report (here: nothing is).
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import example_npu  # noqa: F401  # registers patterns, codegen and runtime
import numpy as np
import pytest
import real_models
import tvm
from example_npu.partition.pipeline import PartitionError, partition_for_npu
from example_npu.partition.report import partition_with_report
from tvm import relax

TOLERANCE = 1e-4
REPRODUCER = Path(__file__).resolve().parents[1] / "data" / "mobilenet_v2_prefix16.onnx"


def run(mod: tvm.IRModule, data: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(data))
    return out.numpy() if hasattr(out, "numpy") else out[0].numpy()


def import_model(model: real_models.RealModel, path: str):
    module, data = real_models.instantiate(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.export / onnxscript deprecation chatter
        if path == "torch":
            return (
                real_models.import_torch(module, data),
                data,
                real_models.torch_reference(module, data),
            )
        onnx_bytes = real_models.export_onnx(module, data)
    reference = real_models.onnxruntime_reference(onnx_bytes, data)
    return real_models.import_onnx(onnx_bytes, model.input_shape), data, reference


@pytest.mark.parametrize("path", ["torch", "onnx"])
@pytest.mark.parametrize("name", [model.name for model in real_models.MODELS])
def test_model_runs_whole_on_the_npu(name, path, summary_line):
    model = real_models.MODELS_BY_NAME[name]
    start = time.perf_counter()
    mod, data, reference = import_model(model, path)
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops, f"ops left on the CPU:\n{report.table()}"
    assert 1 <= len(report.npu_functions) <= model.max_npu_functions, report.table()
    if name == "vit":
        for op in ("matmul", "nn.softmax", "nn.layer_norm", "nn.gelu"):
            assert report.npu_ops[f"relax.{op}"] > 0, report.table()
    else:
        convs = report.npu_ops["relax.nn.conv2d"] + report.npu_ops["relax.nn.conv1d"]
        assert convs > 0, report.table()
    out = run(partitioned, data)
    error = float(np.max(np.abs(out - reference)))
    assert out.shape == reference.shape
    assert error <= TOLERANCE, f"max |NPU - {path} reference| = {error:.3g}"
    summary_line(
        f"real model {name} ({path}): {len(report.npu_functions)} NPU function(s), "
        f"{sum(report.npu_ops.values())} ops on the NPU, 0 on the CPU, max |diff| {error:.2g} "
        f"[{time.perf_counter() - start:.1f} s]"
    )


def test_onnx_mobilenet_v2_reproducer_partitions_and_matches_tvm():
    """The file that made MergeCompositeFunctions fail (a conv feeding both the next conv and a
    residual add matched as conv + bias): now one NPU function, equal to TVM's CPU build."""
    import onnx
    from tvm.relax.frontend.onnx import from_onnx

    mod = from_onnx(onnx.load(str(REPRODUCER)), shape_dict={"input": [1, 3, 224, 224]})
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops and len(report.npu_functions) == 1, report.table()
    data = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype("float32")
    np.testing.assert_allclose(run(partitioned, data), run(mod, data), rtol=1e-5, atol=1e-5)


def test_onnx_mobilenet_v2_reproducer_runs_in_the_one_call_per_composite_flow():
    """The spec's quick-start flow (annotate_codegen=True) failed on the same file with
    "DataflowVar ... is not defined"; it needs no canonicalization to work now."""
    import onnx
    from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.relax.transform import FuseOpsByPattern, MergeCompositeFunctions, RunCodegen

    mod = from_onnx(onnx.load(str(REPRODUCER)), shape_dict={"input": [1, 3, 224, 224]})
    patterns = get_patterns_with_prefix("example_npu")
    fused = FuseOpsByPattern(patterns, bind_constants=False, annotate_codegen=True)(mod)
    partitioned = RunCodegen()(MergeCompositeFunctions()(fused))
    data = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype("float32")
    np.testing.assert_allclose(run(partitioned, data), run(mod, data), rtol=1e-5, atol=1e-5)


def _residual_module() -> tvm.IRModule:
    """a = conv(x); b = conv(a); add(a, b): the add looks like conv(x) + bias to the patterns."""
    rng = np.random.default_rng(1)
    x = relax.Var("x", relax.TensorType((1, 4, 6, 6), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            w1 = relax.const(rng.standard_normal((4, 4, 1, 1)).astype("float32"))
            w2 = relax.const(rng.standard_normal((4, 4, 3, 3)).astype("float32"))
            a = bb.emit(relax.op.nn.conv2d(x, w1))
            b = bb.emit(relax.op.nn.conv2d(a, w2, padding=1))
            out = bb.emit_output(relax.op.add(a, b))
        bb.emit_func_output(out)
    return bb.get()


def test_residual_add_is_not_fused_as_a_bias_of_the_conv_it_reads():
    mod = _residual_module()
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops and len(report.npu_functions) == 1
    data = np.random.default_rng(2).standard_normal((1, 4, 6, 6)).astype("float32")
    np.testing.assert_allclose(run(partitioned, data), run(mod, data), rtol=1e-5, atol=1e-5)


def test_a_leaking_match_is_reported_with_the_binding_not_a_tvm_check(monkeypatch):
    """Without the leak check, FuseOpsByPattern builds the ill-formed module TVM then chokes on;
    partition_for_npu names the bindings and the pattern instead of a TVM internal check."""
    import onnx
    from example_npu.partition.checks import compute as checks
    from tvm.relax.frontend.onnx import from_onnx

    mod = from_onnx(onnx.load(str(REPRODUCER)), shape_dict={"input": [1, 3, 224, 224]})
    monkeypatch.setattr(checks, "check_no_leaking_intermediates", lambda context: checks.ACCEPT)
    with pytest.raises(PartitionError) as raised:
        partition_for_npu(mod)
    message = str(raised.value)
    assert "FuseOpsByPattern produced an ill-formed module" in message
    assert "which no binding of main defines" in message
    assert "(pattern example_npu.conv2d_bias_fused)" in message


def test_a_tvm_internal_error_in_a_step_becomes_a_partition_error(monkeypatch):
    from example_npu.partition import pipeline as partition

    def failing(mod):
        raise tvm.error.InternalError("Check failed: (memo_.count(...)) is false")

    monkeypatch.setattr(partition, "MergeCompositeFunctions", lambda: failing)
    with pytest.raises(PartitionError, match="MergeCompositeFunctions failed inside TVM"):
        partition_for_npu(_residual_module())
