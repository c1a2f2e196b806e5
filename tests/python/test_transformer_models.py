"""Transformer architectures as Hugging Face writes them (transformer_models.py, random weights)
through torch.export + from_exported_program (against PyTorch) and the dynamo ONNX exporter +
from_onnx (against onnxruntime): they build (decoder-only models included: their bool cumsum is
legalized), partition into one NPU function, and match the reference."""

from __future__ import annotations

import time
import warnings

import example_npu  # noqa: F401  # registers patterns, codegen and runtime
import numpy as np
import pytest
import transformer_models
import tvm
from example_npu.partition.report import partition_with_report
from tvm import relax

RELATIVE_TOLERANCE = 1e-4


def _run(mod: tvm.IRModule, data: list[np.ndarray]) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    out = vm["main"](*(tvm.runtime.tensor(d) for d in data))
    return out.numpy() if hasattr(out, "numpy") else out[0].numpy()


def _import(model: transformer_models.TransformerModel, path: str):
    """The model's Relax module, its inputs and the reference output (PyTorch / onnxruntime)."""
    module, data = transformer_models.instantiate(model)
    names = [name for name, _, _ in model.inputs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.export / onnxscript deprecation chatter
        if path == "torch":
            mod = transformer_models.import_torch(module, data)
            return mod, data, transformer_models.torch_reference(module, data)
        onnx_bytes = transformer_models.export_onnx(module, data, names)
    reference = transformer_models.onnxruntime_reference(onnx_bytes, names, data)
    return transformer_models.import_onnx(onnx_bytes, names, data), data, reference


@pytest.mark.parametrize("path", ["torch", "onnx"])
@pytest.mark.parametrize("name", [model.name for model in transformer_models.MODELS])
def test_transformer_runs_on_the_npu_and_matches_the_reference(name, path, summary_line):
    start = time.perf_counter()
    mod, data, reference = _import(transformer_models.MODELS_BY_NAME[name], path)
    partitioned, report = partition_with_report(mod)
    assert len(report.npu_functions) == 1, report.table()
    assert not report.cpu_ops, report.table()  # the tokenizer mask's arithmetic too
    model = transformer_models.MODELS_BY_NAME[name]
    gathers = ("take",) if any(kind == "ids" for _, _, kind in model.inputs) else ()
    for op in ("matmul", "nn.softmax", *gathers):  # take: the embedding gather of run-time ids
        assert report.npu_ops[f"relax.{op}"] > 0, report.table()
    out = _run(partitioned, data)
    assert out.shape == reference.shape
    relative = float(np.max(np.abs(out - reference)) / np.max(np.abs(reference)))
    assert relative <= RELATIVE_TOLERANCE, f"relative difference from {path}: {relative:.3g}"
    summary_line(
        f"transformer {name} ({path}): {len(report.npu_functions)} NPU function(s), "
        f"{sum(report.cpu_ops.values())} ops on the CPU, max rel diff {relative:.2g} "
        f"[{time.perf_counter() - start:.1f} s]"
    )


def _embedding_module(rows: int, ids_shape: tuple[int, ...], ids_dtype: str) -> tvm.IRModule:
    """take(table, reshape(astype(ids, int32))) as torch.export writes nn.Embedding, + 1."""
    table = np.random.default_rng(4).standard_normal((rows, 24)).astype("float32")
    ids = relax.Var("ids", relax.TensorType(ids_shape, ids_dtype))
    count = int(np.prod(ids_shape))
    bb = relax.BlockBuilder()
    with bb.function("main", [ids]):
        with bb.dataflow():
            cast = bb.emit(relax.op.astype(ids, "int32"))
            flat = bb.emit(relax.op.reshape(cast, (count,)))
            rows_ = bb.emit(relax.op.take(relax.const(table), flat, axis=0, mode="fast"))
            out = bb.emit_output(relax.op.add(rows_, relax.const(1.0)))
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.parametrize("ids_dtype", ["int64", "int32"])
def test_embedding_gather_of_run_time_ids_is_an_npu_dma_gather(ids_dtype):
    """The ids' cast and reshape and the gather go to the NPU (nothing on the CPU); every row
    equals TVM's build of the same module, over several tiles of ids."""
    mod = _embedding_module(rows=300, ids_shape=(4, 96), ids_dtype=ids_dtype)
    partitioned, report = partition_with_report(mod)
    assert len(report.npu_functions) == 1 and not report.cpu_ops, report.table()
    assert report.npu_ops["relax.take"] == 1, report.table()
    ids = np.random.default_rng(5).integers(0, 300, size=(4, 96)).astype(ids_dtype)
    ids[0, :2] = (0, 299)
    np.testing.assert_array_equal(_run(partitioned, [ids]), _run(mod, [ids]))


def _onnx_gather_module(
    rows: int, ids_shape: tuple[int, ...], added: int | None = None
) -> tvm.IRModule:
    """take(table, where(less(ids, 0), ids + rows, ids)): the ONNX importer's Gather."""
    table = np.random.default_rng(6).standard_normal((rows, 8)).astype("float32")
    ids = relax.Var("ids", relax.TensorType(ids_shape, "int64"))
    bb = relax.BlockBuilder()
    with bb.function("main", [ids]):
        with bb.dataflow():
            negative = bb.emit(relax.op.less(ids, relax.const(0, "int64")))
            count = rows if added is None else added
            wrapped = bb.emit(relax.op.add(ids, relax.const(count, "int64")))
            fixed = bb.emit(relax.op.where(negative, wrapped, ids))
            out = bb.emit_output(relax.op.take(relax.const(table), fixed, axis=0))
        bb.emit_func_output(out)
    return bb.get()


def test_the_onnx_gather_fix_up_of_negative_ids_runs_in_the_gather():
    """Negative ids count from the end, as TVM's build of the fix-up computes; an id below
    -rows is still outside the table: a clear error."""
    mod = _onnx_gather_module(rows=30, ids_shape=(2, 7))
    partitioned, report = partition_with_report(mod)
    assert len(report.npu_functions) == 1 and not report.cpu_ops, report.table()
    ids = np.array([[0, 29, -1, -30, 5, -7, 12], [3, 3, -2, 28, -29, 0, 1]], dtype="int64")
    np.testing.assert_array_equal(_run(partitioned, [ids]), _run(mod, [ids]))
    ids[1, 4] = -31
    vm = relax.VirtualMachine(tvm.compile(partitioned, target="llvm"), tvm.cpu())
    with pytest.raises(Exception, match=r"take: id -31 is outside the 30 rows"):
        vm["main"](tvm.runtime.tensor(ids))


def test_a_gather_fix_up_that_adds_another_count_stays_on_the_cpu():
    _, report = partition_with_report(_onnx_gather_module(rows=30, ids_shape=(4,), added=29))
    assert report.cpu_ops.get("relax.take") == 1, report.table()


@pytest.mark.parametrize("bad", [40, -1, 2**33])
def test_an_id_outside_the_table_is_a_clear_error(bad):
    """TVM's fast-mode take reads out of bounds there; the NPU says which id and table."""
    mod = _embedding_module(rows=40, ids_shape=(1, 8), ids_dtype="int64")
    partitioned, _ = partition_with_report(mod)
    vm = relax.VirtualMachine(tvm.compile(partitioned, target="llvm"), tvm.cpu())
    ids = np.arange(8, dtype="int64").reshape(1, 8)
    ids[0, 5] = bad
    with pytest.raises(Exception, match=rf"take: id {bad} is outside the 40 rows"):
        vm["main"](tvm.runtime.tensor(ids))


def _nan_guarded_softmax_module(shape: tuple[int, ...]) -> tvm.IRModule:
    x = relax.Var("x", relax.TensorType(shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            softmax = bb.emit(relax.op.nn.softmax(x, axis=-1))
            guarded = relax.op.where(relax.op.isnan(softmax), relax.const(0.0), softmax)
            out = bb.emit_output(guarded)
        bb.emit_func_output(out)
    return bb.get()


def test_the_onnx_nan_guard_of_softmax_is_one_npu_op_with_tvm_zeros():
    """where(isnan(softmax(x)), 0, softmax(x)) on rows that are all -inf, hold a NaN or +inf:
    zeros exactly where TVM's build has them (guarded NaNs, exp(-inf)), no NaN, the rest within
    float rounding of TVM's softmax (as the plain softmax)."""
    inf = np.inf
    x = np.random.default_rng(2).standard_normal((2, 4, 6)).astype("float32")
    x[0, 0] = -inf
    x[0, 1, 2] = np.nan
    x[0, 2, 3] = inf
    x[1, 3, :4] = -inf
    mod = _nan_guarded_softmax_module(x.shape)
    partitioned, report = partition_with_report(mod)
    assert len(report.npu_functions) == 1 and not report.cpu_ops, report.table()
    expected = _run(mod, [x])
    actual = _run(partitioned, [x])
    assert np.all(expected[0, 0] == 0.0) and not np.isnan(expected).any()  # the guard's work
    assert not np.isnan(actual).any() and not np.signbit(actual).any()
    np.testing.assert_array_equal(actual == 0, expected == 0)
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-7)


def test_onnx_attention_with_a_boolean_mask_keeps_one_npu_function():
    """scaled_dot_product_attention with a tokenizer mask, exported to ONNX: the exporter's
    isnan guard is part of the NPU softmax and the run-time int64 mask's cast and where are
    float arithmetic on the NPU: nothing stays on the CPU."""
    import io

    import onnx
    import onnxruntime
    import torch
    from tvm.relax.frontend.onnx import from_onnx

    class Attention(torch.nn.Module):
        def forward(self, q, mask):
            allowed = mask[:, None, None, :].bool()
            return torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=allowed)

    q = np.random.default_rng(3).standard_normal((1, 2, 8, 16)).astype("float32")
    mask = np.ones((1, 8), dtype=np.int64)
    mask[:, 6:] = 0
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = (torch.from_numpy(q), torch.from_numpy(mask))
        torch.onnx.export(Attention(), args, buffer, dynamo=True, input_names=["q", "mask"])
    session = onnxruntime.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    reference = session.run(None, {"q": q, "mask": mask})[0]
    mod = from_onnx(
        onnx.load_from_string(buffer.getvalue()),
        shape_dict={"q": list(q.shape), "mask": list(mask.shape)},
        dtype_dict={"q": "float32", "mask": "int64"},
    )
    partitioned, report = partition_with_report(mod)
    assert len(report.npu_functions) == 1, report.table()
    assert not report.cpu_ops, report.table()
    out = _run(partitioned, [q, mask])
    relative = float(np.max(np.abs(out - reference)) / np.max(np.abs(reference)))
    assert relative <= RELATIVE_TOLERANCE, relative
