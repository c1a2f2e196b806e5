"""The committed TFLite test models and LiteRT, the reference that runs them.

``tests/python/data/tflite/`` holds full-integer int8 models made by
``tools/make_tflite_models.py`` (TensorFlow's converter with a representative data set; see its
docstring): the four MLPerf Tiny reference architectures, a small MobileNetV2 and ``pad_resize``
(quantized PAD and nearest resize), each with the batch fixed to 1 and with an open batch
dimension. LiteRT (``ai-edge-litert``) runs them with
TFLite's reference kernels (``OpResolverType.BUILTIN_REF``, the bit-exact specification) or its
default kernels (XNNPACK), one thread.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data" / "tflite"
MLPERF_TINY = ("kws_dscnn", "vww_mobilenet_v1", "ic_resnet8", "ad_autoencoder")
MODELS = (*MLPERF_TINY, "mobilenet_v2_035_96", "pad_resize", "swish_se", "leaky_relu")


def model_path(name: str, open_batch: bool = False) -> Path:
    return DATA / f"{name}{'_open_batch' if open_batch else ''}.tflite"


def interpreter(path: Path, reference: bool = True):
    """A LiteRT interpreter of `path`: TFLite's reference kernels, or the default ones."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    resolver = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    return Interpreter(model_path=str(path), experimental_op_resolver_type=resolver, num_threads=1)


def input_quantization(path: Path) -> tuple[tuple[int, ...], float, int]:
    """(shape with the batch set to 1, scale, zero point) of the model's one int8 input."""
    (detail,) = interpreter(path).get_input_details()
    scale, zero_point = detail["quantization"]
    shape = tuple(1 if d < 0 else int(d) for d in detail["shape_signature"])
    return shape, float(scale), int(zero_point)


def random_inputs(path: Path, count: int, seed: int = 0, batch: int = 1) -> list[np.ndarray]:
    """`count` int8 inputs: standard normal values (the calibration distribution) quantized with
    the input's own scale and zero point."""
    shape, scale, zero_point = input_quantization(path)
    rng = np.random.default_rng(seed)
    inputs = []
    for _ in range(count):
        values = rng.standard_normal((batch, *shape[1:]))
        inputs.append(np.clip(np.rint(values / scale) + zero_point, -128, 127).astype("int8"))
    return inputs


def run_litert(path: Path, data: np.ndarray, reference: bool = True) -> np.ndarray:
    """The model's int8 output for `data` (an open batch is resized to data's batch)."""
    runner = interpreter(path, reference)
    (detail,) = runner.get_input_details()
    if tuple(detail["shape"]) != data.shape:
        runner.resize_tensor_input(detail["index"], list(data.shape))
    runner.allocate_tensors()
    runner.set_tensor(detail["index"], data)
    runner.invoke()
    (output,) = runner.get_output_details()
    return runner.get_tensor(output["index"]).copy()
