"""``.tflite`` files through ``load_model``: the imported Relax program, built by TVM for the CPU,
computes what LiteRT computes on the committed models (tests/python/tflite_models.py), with an
open batch set to 1 or to what ``input_shapes`` gives; corrupt files are one-line errors."""

from __future__ import annotations

from pathlib import Path

import example_npu
import numpy as np
import pytest
import tvm
from example_npu import ModelFileError
from tflite_models import MODELS, model_path, random_inputs, run_litert
from tvm import relax


def cpu_outputs(mod: tvm.IRModule, inputs: list[np.ndarray]) -> list[np.ndarray]:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return [vm["main"](tvm.runtime.tensor(x)).numpy() for x in inputs]


@pytest.mark.parametrize("open_batch", [False, True], ids=["batch1", "open_batch"])
@pytest.mark.parametrize("name", MODELS)
def test_imported_model_computes_what_litert_computes(name, open_batch):
    """TVM's CPU build of the import is within 1 step of LiteRT's reference kernels (TVM's own
    float requantization rounds differently; the NPU's TFLite arithmetic is tested elsewhere),
    with LiteRT's output shape (FULLY_CONNECTED's keep_num_dims=False flattens)."""
    path = model_path(name, open_batch)
    model = example_npu.load_model(path)
    (spec,) = model.inputs
    assert spec.dtype == "int8" and spec.shape[0] == 1
    inputs = random_inputs(path, 2, seed=3)
    for x, actual in zip(inputs, cpu_outputs(model.mod, inputs), strict=True):
        expected = run_litert(path, x)
        assert actual.shape == expected.shape and actual.dtype == expected.dtype
        assert np.abs(actual.astype(int) - expected.astype(int)).max() <= 1


@pytest.mark.parametrize("model_name", ["kws_dscnn", "data_movement", "reshape_ops"])
def test_an_open_batch_takes_the_batch_input_shapes_gives(model_name):
    """data_movement and reshape_ops at batch 3: TVM's converters build TILE / DEPTH_TO_SPACE
    / SPACE_TO_DEPTH from the file's placeholder batch (1) unless the reader gives them the
    shapes of the Relax values."""
    path = model_path(model_name, open_batch=True)
    name = example_npu.load_model(path).inputs[0].name
    (batch,) = random_inputs(path, 1, seed=4, batch=3)
    model = example_npu.load_model(path, {name: batch.shape})
    assert model.inputs[0].shape == batch.shape
    (actual,) = cpu_outputs(model.mod, [batch])
    expected = run_litert(path, batch)
    assert actual.shape == expected.shape and expected.shape[0] == 3
    assert np.abs(actual.astype(int) - expected.astype(int)).max() <= 1


def test_a_fixed_batch_is_not_resized():
    path = model_path("kws_dscnn")
    name = example_npu.load_model(path).inputs[0].name
    with pytest.raises(ModelFileError, match="does not fit the shape 1x49x10x1"):
        example_npu.load_model(path, {name: (2, 49, 10, 1)})


def _corrupt(data: bytes) -> dict[str, bytes]:
    flipped = data[:100] + bytes(b ^ 0x5A for b in data[100:400]) + data[400:]
    return {
        "not a flatbuffer": b"hello, world" * 8,
        "identifier only": b"\0\0\0\0TFL3",
        "no subgraph": b"\0\0\0\0TFL3" + b"\xff" * 64,
        "truncated": data[: len(data) // 2],
        "corrupt offsets": flipped,
    }


@pytest.mark.parametrize("case", list(_corrupt(b"")))
def test_a_corrupt_file_is_a_one_line_model_file_error(case, tmp_path):
    path = tmp_path / "model.tflite"
    path.write_bytes(_corrupt(model_path("kws_dscnn").read_bytes())[case])
    with pytest.raises(ModelFileError) as error:
        example_npu.load_model(path)
    message = str(error.value)
    assert "\n" not in message and "model.tflite" in message
    assert "TFLite" in message


def test_reading_tflite_without_the_parser_says_how_to_install_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "tflite", None)  # as if tflite were not installed
    with pytest.raises(ModelFileError, match=r"pip install 'example-npu\[tflite\]'"):
        example_npu.load_model(Path(model_path("kws_dscnn")))


@pytest.mark.parametrize("index", [6, -1, 1 << 20])
def test_a_gather_index_out_of_bounds_is_a_model_file_error(index, tmp_path):
    """data_movement's GATHER takes channels [5, 0, 2, 2] of 6. TVM lowers GATHER to a take
    that reads out of bounds for a bad index (and its own check lets index 6 through): the
    reader refuses the file instead."""
    data = model_path("data_movement").read_bytes()
    good = np.array([5, 0, 2, 2], "int32").tobytes()
    assert data.count(good) == 1
    path = tmp_path / "model.tflite"
    path.write_bytes(data.replace(good, np.array([5, 0, index, 2], "int32").tobytes()))
    with pytest.raises(ModelFileError, match="GATHER .* out of bounds"):
        example_npu.load_model(path)


def test_a_reshape_target_computed_from_shapes_becomes_constant():
    """With an open batch, Keras' Dense on a 4-D tensor reshapes to a target computed by
    SHAPE -> GATHER -> REDUCE_PROD -> PACK (two open dimensions in the file): the reader
    computes it from the static shapes, so the program has only constant reshapes."""
    model = example_npu.load_model(model_path("data_movement", open_batch=True))
    targets = []

    def visit(expr):
        if isinstance(expr, relax.Call) and getattr(expr.op, "name", "") == "relax.reshape":
            targets.append(expr.args[1])

    relax.analysis.post_order_visit(model.mod["main"], visit)
    assert targets and all(isinstance(t, relax.ShapeExpr) for t in targets)
    assert any(list(map(int, t.values)) == [64, 6] for t in targets)
