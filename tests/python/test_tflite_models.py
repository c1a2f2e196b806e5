"""The committed TFLite test models (tests/python/tflite_models.py) are what they claim to be:
full-integer int8 files, batch fixed or open, that LiteRT runs with its reference and default
kernels."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tflite_models import DATA, MODELS, interpreter, model_path, random_inputs, run_litert


@pytest.mark.parametrize("open_batch", [False, True], ids=["batch1", "open_batch"])
@pytest.mark.parametrize("name", MODELS)
def test_committed_model_is_full_integer_with_its_batch(name, open_batch):
    path = model_path(name, open_batch)
    manifest = json.loads((DATA / "MANIFEST.json").read_text())["models"][path.stem]
    runner = interpreter(path)
    runner.allocate_tensors()
    (model_input,) = runner.get_input_details()
    (model_output,) = runner.get_output_details()
    assert [int(d) for d in model_input["shape_signature"]] == manifest["input_shape"]
    assert model_input["dtype"] == np.int8 and model_output["dtype"] == np.int8
    # Every tensor an op computes is int8 (int32 only for shape arithmetic).
    dtype = {detail["index"]: detail["dtype"] for detail in runner.get_tensor_details()}
    dtypes = {dtype[i] for op in runner._get_ops_details() for i in op["outputs"]}
    assert dtypes <= {np.int8, np.int32}, dtypes


@pytest.mark.parametrize("name", MODELS)
def test_litert_reference_and_default_kernels_run_the_open_batch(name):
    """An open batch runs at batch 3 and gives each image what batch 1 gives it."""
    path = model_path(name, open_batch=True)
    (batch,) = random_inputs(path, 1, seed=1, batch=3)
    for reference in (True, False):
        together = run_litert(path, batch, reference)
        alone = [run_litert(path, batch[i : i + 1], reference) for i in range(3)]
        np.testing.assert_array_equal(together, np.concatenate(alone))
