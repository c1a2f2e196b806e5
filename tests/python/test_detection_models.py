"""Detection and segmentation networks whole on the NPU through torch.export and the dynamo ONNX
exporter: one NPU call, no op on the CPU, within 1e-4 of PyTorch / onnxruntime. The shapes of
detection_models.py (shrunk) and the full-size YOLOv8-n (with its DFL box decoding), U-Net and
DeepLabV3-MobileNetV2 of detection_full_size.py (at small input resolutions), random weights."""

from __future__ import annotations

import detection_full_size
import detection_models
import example_npu  # noqa: F401  # registers patterns, codegen and runtime
import pytest
from test_zoo_models import run_whole_on_the_npu

MODELS = {model.name: model for model in detection_models.MODELS + detection_full_size.MODELS}
CASES = [(model.name, path) for model in MODELS.values() for path in model.paths]


@pytest.mark.parametrize("name, path", CASES, ids=[f"{name}-{path}" for name, path in CASES])
def test_detection_model_is_one_npu_call(name, path, summary_line):
    model = MODELS[name]
    assert model.max_npu_functions == 1
    _, _, summary = run_whole_on_the_npu(model, path)
    summary_line(f"detection model {summary}")
