"""Detection and segmentation networks (detection_models.py, random weights) whole on the NPU
through torch.export and the dynamo ONNX exporter: one NPU call, no op on the CPU, within 1e-4
of PyTorch / onnxruntime."""

from __future__ import annotations

import time

import detection_models
import example_npu  # noqa: F401  # registers patterns, codegen and runtime
import numpy as np
import pytest
import zoo_models
from example_npu.partition.report import partition_with_report
from test_zoo_models import run

TOLERANCE = 1e-4
CASES = [(model.name, path) for model in detection_models.MODELS for path in model.paths]


@pytest.mark.parametrize("name, path", CASES, ids=[f"{name}-{path}" for name, path in CASES])
def test_detection_model_is_one_npu_call(name, path, summary_line):
    model = detection_models.MODELS_BY_NAME[name]
    start = time.perf_counter()
    mod, data, reference = zoo_models.import_model(model, path)
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops, f"ops left on the CPU:\n{report.table()}"
    assert len(report.npu_functions) == 1, report.table()
    out = run(partitioned, data)
    assert out.shape == reference.shape
    error = float(np.max(np.abs(out - reference)))
    assert error <= TOLERANCE, f"max |NPU - {path} reference| = {error:.3g}"
    summary_line(
        f"detection model {name} ({path}, {'x'.join(map(str, model.input_shape))}): "
        f"1 NPU function, {sum(report.npu_ops.values())} ops, max |diff| {error:.2g} "
        f"[{time.perf_counter() - start:.1f} s]"
    )
