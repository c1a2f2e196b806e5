"""The committed TFLite test models and LiteRT, the reference that runs them.

``tests/python/data/tflite/`` holds full-integer int8 models made by
``tools/make_tflite_models.py`` (TensorFlow's converter with a representative data set; see its
docstring): the four MLPerf Tiny reference architectures, a small MobileNetV2, small networks of
other int8 ops and one-op probes, each with the batch fixed to 1 and with an open batch
dimension. LiteRT (``ai-edge-litert``) runs them with
TFLite's reference kernels (``OpResolverType.BUILTIN_REF``, the bit-exact specification) or its
default kernels (XNNPACK), one thread.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data" / "tflite"
MLPERF_TINY = ("kws_dscnn", "vww_mobilenet_v1", "ic_resnet8", "ad_autoencoder")
# One activation on a 16x16x1 input: 256 pixels, so one input holds every int8 value.
ONE_OP_PROBES = ("hard_swish_probe", "leaky_relu_probe")
# Ops TFLite defines by a 256-entry table of the float function (LOGISTIC, TANH).
FLOAT_TABLE_PROBES = ("sigmoid_probe", "tanh_probe")
MODELS = (
    *MLPERF_TINY,
    "mobilenet_v2_035_96",
    "pad_resize",
    "swish_se",
    "leaky_relu",
    "data_movement",
    "reshape_ops",
    *ONE_OP_PROBES,
    *FLOAT_TABLE_PROBES,
    "bilinear_half_pixel",
    "bilinear_align_corners",
    "bilinear_asymmetric",
)
# Height and width open as well (sizes given to load_model); not in MODELS, which load as is.
OPEN_SPATIAL = "open_spatial"
# int32 ids into an int8 table (Keras' Embedding, 40 rows); not in MODELS, whose input is int8.
EMBEDDING = "embedding"


def model_path(name: str, open_batch: bool = False) -> Path:
    return DATA / f"{name}{'_open_batch' if open_batch else ''}.tflite"


def interpreter(path: Path, reference: bool = True):
    """A LiteRT interpreter of `path`: TFLite's reference kernels, or the default ones."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    resolver = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    content = reference_runnable(path.read_bytes()) if reference else path.read_bytes()
    return Interpreter(model_content=content, experimental_op_resolver_type=resolver, num_threads=1)


# (builtin code, version the converter writes, version LiteRT's reference resolver registers)
_REFERENCE_VERSIONS = (
    (69, 3, 2),  # TILE: version 3 marks an int8 input
    (5, 2, 1),  # DEPTH_TO_SPACE: version 2 marks an int8 input
)


def reference_runnable(data: bytes) -> bytes:
    """``data`` with the op versions LiteRT 2.3's reference resolver lacks lowered to ones it
    registers: it has TILE up to version 2 and DEPTH_TO_SPACE up to version 1, the converter
    writes their int8 forms as versions 3 and 2, and the kernel behind every version is the same
    (it copies elements of any type). The default
    resolver registers version 3 and runs the file as it is."""
    import struct

    import tflite

    patched = bytearray(data)
    model = tflite.Model.GetRootAsModel(patched, 0)
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        for builtin, written, registered in _REFERENCE_VERSIONS:
            if code.BuiltinCode() == builtin and code.Version() == written:
                field = code._tab.Offset(8)  # OperatorCode.version, the table's third field
                struct.pack_into("<i", patched, code._tab.Pos + field, registered)
    return bytes(patched)


def every_int8(path: Path) -> np.ndarray:
    """One input of a one-op probe holding each int8 value once."""
    shape, _, _ = input_quantization(path)
    return np.arange(-128, 128, dtype=np.int8).reshape(shape)


def with_scales(
    path: Path,
    out: Path,
    input_scale: float,
    output_scale: float | None = None,
    input_zero_point: int | None = None,
) -> Path:
    """A copy of the one-op probe ``path`` whose input and output scales are replaced (the
    float32 values patched in the flatbuffer; each occurs once), written to ``out``: the same op
    at other quantization parameters, for exhaustive kernel tests without TensorFlow. The output
    scale stays when ``output_scale`` is None (LOGISTIC and TANH fix it); ``input_zero_point``
    replaces the input's zero point (an int64, also unique in a one-op probe)."""
    data = path.read_bytes()
    runner = interpreter(path)
    (model_input,), (model_output,) = runner.get_input_details(), runner.get_output_details()
    patches = [(np.float32(model_input["quantization"][0]), np.float32(input_scale))]
    if output_scale is not None:
        patches.append((np.float32(model_output["quantization"][0]), np.float32(output_scale)))
    if input_zero_point is not None:
        patches.append((np.int64(model_input["quantization"][1]), np.int64(input_zero_point)))
    for old, new in patches:
        assert data.count(old.tobytes()) == 1, f"{path.name}: {old} not unique in the file"
        data = data.replace(old.tobytes(), new.tobytes())
    out.write_bytes(data)
    return out


def input_quantization(path: Path) -> tuple[tuple[int, ...], float, int]:
    """(shape with the batch set to 1, scale, zero point) of the model's one int8 input."""
    (detail,) = interpreter(path).get_input_details()
    scale, zero_point = detail["quantization"]
    shape = tuple(1 if d < 0 else int(d) for d in detail["shape_signature"])
    return shape, float(scale), int(zero_point)


def random_inputs(
    path: Path, count: int, seed: int = 0, batch: int = 1, shape: tuple[int, ...] | None = None
) -> list[np.ndarray]:
    """`count` int8 inputs of the model's shape (or `shape`, for a file with open dimensions):
    standard normal values (the calibration distribution) quantized with the input's own scale
    and zero point."""
    declared, scale, zero_point = input_quantization(path)
    shape = shape or (batch, *declared[1:])
    rng = np.random.default_rng(seed)
    inputs = []
    for _ in range(count):
        values = rng.standard_normal(shape)
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
