"""Full-integer int8 TFLite models, made the way users make them, for tests and benchmarks.

    python3 tools/make_tflite_models.py                   # the committed test models
    python3 tools/make_tflite_models.py --set extra --out build/tflite-extra
    python3 tools/make_tflite_models.py --list

Each model is a Keras model with seeded random weights (batch-norm statistics randomised too, so
folding them is not a no-op), converted by TensorFlow's ``TFLiteConverter`` with
``optimizations=[tf.lite.Optimize.DEFAULT]``, a seeded representative data set (standard normal
inputs), ``supported_ops=[TFLITE_BUILTINS_INT8]`` and int8 input and output: the recipe of
TensorFlow's post-training integer quantization guide. Every model is written twice: with the
batch fixed to 1 (``NAME.tflite``) and with Keras 3's default open batch dimension
(``NAME_open_batch.tflite``, a ``-1`` in the file's shape signature).

TensorFlow is large and not a dependency of the project: the script runs itself inside
``.venv-tflite`` at the checkout's root, which it creates on first use (``tensorflow-cpu`` 2.21
and ``ai-edge-litert``; about 1.6 GB, 1.5 minutes with a warm pip cache). Tests never run
TensorFlow: they use the committed files in ``tests/python/data/tflite/`` (the ``test`` set,
about 1.3 MB) and LiteRT, which the project's own ``.venv`` has (requirements-dev.txt).

Sets: ``test`` holds the four MLPerf Tiny reference architectures (keyword spotting DS-CNN,
visual wake words MobileNetV1-0.25, CIFAR-10 ResNet-8, the anomaly-detection FC autoencoder) and
Keras' MobileNetV2 (alpha 0.35) at 96x96, small networks of the other int8 ops (``pad_resize``,
``swish_se``, ``leaky_relu``, ``data_movement``, ``reshape_ops``; ``open_spatial`` also leaves
height and width open; ``embedding`` takes int32 ids) and one-op probes
(``hard_swish_probe``,
``leaky_relu_probe``, ``sigmoid_probe``, ``tanh_probe``: a 16x16x1 input holds every int8
value; ``bilinear_*``: RESIZE_BILINEAR in each coordinate mode).
``extra`` holds larger or broader models for local validation and benchmarks: Keras'
MobileNetV2 and EfficientNetB0 at full size, MobileNetV3-Small and -Large (hard-swish,
squeeze-excite; -Large also minimalistic: ReLU, no squeeze-excite), and ``op_mix``, a small
network of the other ops int8 CNNs use (concat of differently scaled branches, pad, bilinear and
nearest resize, logistic, tanh, hard-swish, leaky ReLU, softmax, mean, mul, sub, max pooling).
A model of your own: add a builder to ``MODELS`` (a function of ``keras`` and the batch size
returning a Keras model).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-tflite"
DEFAULT_OUT = ROOT / "tests" / "python" / "data" / "tflite"
# The reference environment: TensorFlow makes the models, LiteRT runs them.
REQUIREMENTS = ("tensorflow-cpu==2.21.0", "ai-edge-litert==2.3.0")
CALIBRATION_SAMPLES = 32
# The size an open height or width takes in the calibration samples.
CALIBRATION_OPEN_SIZE = 10


def ensure_venv(venv: Path = VENV) -> Path:
    """The reference venv's python, created with REQUIREMENTS when it is missing or stale."""
    python = venv / "bin" / "python"
    probe = "import importlib.metadata as m; print(m.version('tensorflow-cpu'))"
    if python.exists():
        found = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
        if found.returncode == 0 and f"tensorflow-cpu=={found.stdout.strip()}" in REQUIREMENTS:
            return python
    print(f"creating {venv} with {', '.join(REQUIREMENTS)}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *REQUIREMENTS], check=True)
    return python


# ---- model builders: (keras, batch_size) -> keras.Model ----------------------------------------


def _conv_bn_relu(keras: Any, x: Any, filters: int, kernel: Any, strides: Any = 1) -> Any:
    x = keras.layers.Conv2D(filters, kernel, strides=strides, padding="same", use_bias=False)(x)
    x = keras.layers.BatchNormalization()(x)
    return keras.layers.Activation("relu")(x)


def _depthwise_separable(keras: Any, x: Any, filters: int, strides: int = 1) -> Any:
    x = keras.layers.DepthwiseConv2D(3, strides=strides, padding="same", use_bias=False)(x)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.Activation("relu")(x)
    return _conv_bn_relu(keras, x, filters, 1)


def kws_dscnn(keras: Any, batch: int | None) -> Any:
    """MLPerf Tiny keyword spotting: DS-CNN on 49x10 MFCC features, 12 classes."""
    inputs = keras.Input((49, 10, 1), batch_size=batch)
    x = _conv_bn_relu(keras, inputs, 64, (10, 4), strides=(2, 2))
    for _ in range(4):
        x = _depthwise_separable(keras, x, 64)
    x = keras.layers.AveragePooling2D(pool_size=(25, 5))(x)
    x = keras.layers.Flatten()(x)
    outputs = keras.layers.Dense(12, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="kws_dscnn")


def vww_mobilenet_v1(keras: Any, batch: int | None) -> Any:
    """MLPerf Tiny visual wake words: MobileNetV1 alpha 0.25 on 96x96 RGB, 2 classes."""
    inputs = keras.Input((96, 96, 3), batch_size=batch)
    x = _conv_bn_relu(keras, inputs, 8, 3, strides=2)
    for filters, strides in [(16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2)]:
        x = _depthwise_separable(keras, x, filters, strides)
    for _ in range(5):
        x = _depthwise_separable(keras, x, 128)
    x = _depthwise_separable(keras, x, 256, 2)
    x = _depthwise_separable(keras, x, 256)
    x = keras.layers.AveragePooling2D(pool_size=x.shape[1:3])(x)
    x = keras.layers.Flatten()(x)
    outputs = keras.layers.Dense(2, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="vww_mobilenet_v1")


def ic_resnet8(keras: Any, batch: int | None) -> Any:
    """MLPerf Tiny image classification: ResNet-8 on 32x32 CIFAR-10 images, 10 classes."""
    inputs = keras.Input((32, 32, 3), batch_size=batch)
    x = _conv_bn_relu(keras, inputs, 16, 3)
    for filters, strides in [(16, 1), (32, 2), (64, 2)]:
        y = _conv_bn_relu(keras, x, filters, 3, strides)
        y = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(y)
        y = keras.layers.BatchNormalization()(y)
        if strides != 1:
            x = keras.layers.Conv2D(filters, 1, strides=strides, padding="same")(x)
        x = keras.layers.Activation("relu")(keras.layers.Add()([x, y]))
    x = keras.layers.AveragePooling2D(pool_size=8)(x)
    x = keras.layers.Flatten()(x)
    outputs = keras.layers.Dense(10, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="ic_resnet8")


def ad_autoencoder(keras: Any, batch: int | None) -> Any:
    """MLPerf Tiny anomaly detection: FC autoencoder 640 -> 128x4 -> 8 -> 128x4 -> 640."""
    inputs = keras.Input((640,), batch_size=batch)
    x = inputs
    for units in [128, 128, 128, 128, 8, 128, 128, 128, 128]:
        x = keras.layers.Dense(units)(x)
        x = keras.layers.BatchNormalization()(x)
        x = keras.layers.Activation("relu")(x)
    outputs = keras.layers.Dense(640)(x)
    return keras.Model(inputs, outputs, name="ad_autoencoder")


def _application(name: str, shape: tuple[int, ...], **options: Any) -> Callable[..., Any]:
    """A keras.applications model with random weights and a fixed or open batch."""

    def build(keras: Any, batch: int | None) -> Any:
        inputs = keras.Input(shape, batch_size=batch)
        return getattr(keras.applications, name)(
            input_tensor=inputs, weights=None, classes=10, **options
        )

    build.__doc__ = f"keras.applications.{name} at {'x'.join(map(str, shape))}, {options}"
    return build


def op_mix(keras: Any, batch: int | None) -> Any:
    """Ops int8 CNNs use besides conv / depthwise / dense: concat of differently scaled
    branches, pad, resize, logistic, tanh, hard-swish, leaky ReLU, mul, sub, mean, softmax."""
    layers = keras.layers
    inputs = keras.Input((24, 24, 3), batch_size=batch)
    x = _conv_bn_relu(keras, inputs, 16, 3, strides=2)  # 12x12
    wide = layers.Conv2D(8, 1)(x)  # an unbounded branch: a larger scale than the gated ones
    gated = layers.Activation("sigmoid")(layers.Conv2D(8, 1)(x))
    squashed = layers.Activation("tanh")(layers.Conv2D(8, 1)(x))
    swished = layers.Activation("hard_swish")(layers.Conv2D(8, 1)(x))
    leaky = layers.LeakyReLU(negative_slope=0.1)(layers.Conv2D(8, 1)(x))
    x = layers.Concatenate()([wide, gated, squashed, swished, leaky])  # 40 channels
    x = layers.Multiply()([x, layers.Activation("sigmoid")(x)])
    x = layers.ZeroPadding2D(((1, 0), (0, 1)))(x)  # 13x13
    x = layers.MaxPooling2D(2, padding="same")(x)  # 7x7
    up = layers.UpSampling2D(2, interpolation="bilinear")(x)
    # UpSampling2D's nearest mode converts to TILE v3, which LiteRT 2.3 cannot run.
    near = layers.Resizing(14, 14, interpolation="nearest")(x)
    x = layers.Add()([up, layers.Subtract()([up, near])])  # up - near alone is nearly 0
    squeeze = layers.GlobalAveragePooling2D(keepdims=True)(x)
    x = layers.Multiply()([x, layers.Activation("sigmoid")(layers.Conv2D(40, 1)(squeeze))])
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(10, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="op_mix")


def pad_resize(keras: Any, batch: int | None) -> Any:
    """Quantized data movement TVM's importer refuses: ZeroPadding2D (PAD) before a max pool,
    a nearest Resizing (RESIZE_NEAREST_NEIGHBOR), each between int8 convs."""
    layers = keras.layers
    inputs = keras.Input((16, 16, 3), batch_size=batch)
    x = _conv_bn_relu(keras, inputs, 8, 3, strides=2)  # 8x8
    x = layers.ZeroPadding2D(((1, 0), (0, 1)))(x)  # 9x9
    x = layers.MaxPooling2D(2, padding="same")(x)  # 5x5
    x = layers.Resizing(10, 10, interpolation="nearest")(x)
    x = layers.Conv2D(8, 3, padding="same")(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(4)(x)
    return keras.Model(inputs, outputs, name="pad_resize")


def swish_se(keras: Any, batch: int | None) -> Any:
    """EfficientNet's block in small: swish (LOGISTIC then MUL of two int8 tensors), a
    squeeze-excite gate (MEAN, convs, LOGISTIC, broadcast MUL) and a residual ADD."""
    layers = keras.layers
    inputs = keras.Input((12, 12, 3), batch_size=batch)
    x = layers.Conv2D(16, 3, padding="same", activation="swish")(inputs)
    y = layers.DepthwiseConv2D(3, padding="same", activation="swish")(x)
    gate = layers.GlobalAveragePooling2D(keepdims=True)(y)
    gate = layers.Conv2D(4, 1, activation="swish")(gate)
    gate = layers.Conv2D(16, 1, activation="sigmoid")(gate)
    y = layers.Conv2D(16, 1)(layers.Multiply()([y, gate]))
    x = layers.GlobalAveragePooling2D()(layers.Add()([x, y]))
    outputs = layers.Dense(4)(x)
    return keras.Model(inputs, outputs, name="swish_se")


def leaky_relu(keras: Any, batch: int | None) -> Any:
    """LEAKY_RELU, which TFLite computes with two integer multipliers (identity and alpha)."""
    layers = keras.layers
    inputs = keras.Input((12, 12, 3), batch_size=batch)
    x = layers.LeakyReLU(negative_slope=0.1)(layers.Conv2D(16, 3, padding="same")(inputs))
    x = layers.LeakyReLU(negative_slope=0.3)(layers.Conv2D(16, 3, strides=2)(x))
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(4)(x)
    return keras.Model(inputs, outputs, name="leaky_relu")


def data_movement(keras: Any, batch: int | None) -> Any:
    """Quantized ops that move int8 values without computing: TRANSPOSE, SPLIT, SPLIT_V, TILE,
    STRIDED_SLICE, SLICE, GATHER (constant indices), PACK and UNPACK (a row flip), between int8
    convs; and a Dense on a 4-D tensor (with an open batch, its RESHAPE target is computed by
    SHAPE -> GATHER -> REDUCE_PROD -> PACK)."""
    import tensorflow as tf

    layers = keras.layers

    def op(function: Callable[..., Any]) -> Callable[..., Any]:
        return layers.Lambda(function)

    inputs = keras.Input((8, 8, 4), batch_size=batch)
    x = _conv_bn_relu(keras, inputs, 6, 3)
    low, high = op(lambda t: tf.split(t, 2, axis=-1))(x)
    narrow, wide = op(lambda t: tf.split(t, [2, 4], axis=-1))(x)
    branches = [
        op(lambda t: tf.transpose(t, [0, 2, 1, 3]))(x),
        op(lambda t: tf.tile(t, [1, 1, 2, 1]))(low)[:, :, :8, :],  # TILE, then a slice back
        op(lambda t: tf.gather(t, [5, 0, 2, 2], axis=-1))(x),
        layers.Reshape((8, 8, 6))(op(lambda ts: tf.stack(ts, axis=3))([high, low])),
        op(lambda t: tf.stack(tf.unstack(t, axis=1)[::-1], axis=1))(narrow),
        layers.Dense(3)(x),  # on a 4-D tensor: with an open batch its reshape is computed
        layers.ZeroPadding2D(((1, 1), (0, 0)))(
            op(lambda t: tf.slice(t, [0, 1, 0, 0], [-1, 6, 8, 4]))(wide)
        ),
    ]
    # The output keeps every position: a misplaced element shows.
    outputs = layers.Conv2D(8, 3, padding="same")(layers.Concatenate()(branches))
    return keras.Model(inputs, outputs, name="data_movement")


def reshape_ops(keras: Any, batch: int | None) -> Any:
    """Quantized ops that re-index int8 values: SQUEEZE and EXPAND_DIMS (a channel axis removed
    and put back), REVERSE_V2 (columns and channels flipped), DEPTH_TO_SPACE and SPACE_TO_DEPTH
    (block 2), between int8 convs."""
    import tensorflow as tf

    layers = keras.layers

    def op(function: Callable[..., Any]) -> Callable[..., Any]:
        return layers.Lambda(function)

    inputs = keras.Input((8, 8, 8), batch_size=batch)
    x = _conv_bn_relu(keras, inputs, 8, 3)
    pooled = layers.Conv2D(1, 1)(x)  # one channel: SQUEEZE drops it, EXPAND_DIMS restores it
    squeezed = op(lambda t: tf.squeeze(t, axis=-1))(pooled)
    restored = op(lambda t: tf.expand_dims(t, axis=-1))(layers.Activation("relu")(squeezed))
    flipped = op(lambda t: tf.reverse(t, axis=[2, 3]))(x)
    deep = op(lambda t: tf.nn.space_to_depth(t, 2))(x)  # 4x4x32
    shallow = op(lambda t: tf.nn.depth_to_space(t, 2))(layers.Conv2D(32, 1)(deep))  # 8x8x8
    merged = layers.Concatenate()([restored, flipped, shallow])
    # The output keeps every position: a misplaced element shows.
    outputs = layers.Conv2D(8, 3, padding="same")(merged)
    return keras.Model(inputs, outputs, name="reshape_ops")


def open_spatial(keras: Any, batch: int | None) -> Any:
    """Height and width open (``-1``, sizes given at load time): a stride-2 SAME conv (its
    padding depends on the size), SQUEEZE and EXPAND_DIMS (the converter keeps them when the
    shape is not static), REVERSE_V2 over rows, DEPTH_TO_SPACE (block 3)."""
    import tensorflow as tf

    layers = keras.layers

    def op(function: Callable[..., Any]) -> Callable[..., Any]:
        return layers.Lambda(function)

    inputs = keras.Input((None, None, 4), batch_size=batch)
    x = _conv_bn_relu(keras, inputs, 8, 3, strides=2)
    squeezed = op(lambda t: tf.squeeze(t, axis=-1))(layers.Conv2D(1, 1)(x))
    restored = op(lambda t: tf.expand_dims(t, axis=-1))(layers.Activation("relu")(squeezed))
    flipped = op(lambda t: tf.reverse(t, axis=[1]))(x)
    merged = layers.Concatenate()([restored, flipped])
    shuffled = op(lambda t: tf.nn.depth_to_space(t, 3))(layers.Conv2D(18, 1)(merged))
    outputs = layers.Conv2D(3, 3, padding="same")(shuffled)
    return keras.Model(inputs, outputs, name="open_spatial")


EMBEDDING_ROWS = 40


def embedding(keras: Any, batch: int | None) -> Any:
    """Keras' Embedding (an int8 table GATHERed by the model's int32 ids, after Keras' fix-up of
    negative ids), a Dense on the 3-D result and a Dense classifier."""
    layers = keras.layers
    ids = keras.Input((6,), batch_size=batch, dtype="int32")
    x = layers.Embedding(EMBEDDING_ROWS, 8)(ids)
    x = layers.Flatten()(layers.Dense(12, activation="relu")(x))
    outputs = layers.Dense(5)(x)
    return keras.Model(ids, outputs, name="embedding")


def _one_op_probe(activation: str, description: str) -> Callable[..., Any]:
    """A model of one activation on a 16x16x1 int8 input: its 256 pixels can hold every int8
    value, so a test compares the op's integer kernel exhaustively."""

    def build(keras: Any, batch: int | None) -> Any:
        inputs = keras.Input((16, 16, 1), batch_size=batch)
        layer = (
            keras.layers.LeakyReLU(negative_slope=0.2)
            if activation == "leaky_relu"
            else keras.layers.Activation(activation)
        )
        return keras.Model(inputs, layer(inputs), name=f"{activation}_probe")

    build.__doc__ = description
    return build


def _bilinear_probe(mode: str) -> Callable[..., Any]:
    """RESIZE_BILINEAR alone, 7x5x4 -> 16x11 (uneven factors), with TFLite's coordinate mode
    ``mode``: half_pixel_centers (Keras' Resizing), align_corners, or neither (asymmetric)."""

    def build(keras: Any, batch: int | None) -> Any:
        import tensorflow as tf

        inputs = keras.Input((7, 5, 4), batch_size=batch)
        if mode == "half_pixel":
            resized = keras.layers.Resizing(16, 11, interpolation="bilinear")(inputs)
        else:
            resized = keras.layers.Lambda(
                lambda t: tf.compat.v1.image.resize_bilinear(
                    t, (16, 11), align_corners=mode == "align_corners"
                )
            )(inputs)
        return keras.Model(inputs, resized, name=f"bilinear_{mode}")

    build.__doc__ = f"RESIZE_BILINEAR alone, 7x5 -> 16x11, {mode}"
    return build


MODELS: dict[str, Callable[[Any, int | None], Any]] = {
    "kws_dscnn": kws_dscnn,
    "vww_mobilenet_v1": vww_mobilenet_v1,
    "ic_resnet8": ic_resnet8,
    "ad_autoencoder": ad_autoencoder,
    "mobilenet_v2_035_96": _application("MobileNetV2", (96, 96, 3), alpha=0.35),
    "mobilenet_v2": _application("MobileNetV2", (224, 224, 3)),
    "efficientnet_b0": _application("EfficientNetB0", (224, 224, 3)),
    "mobilenet_v3_small": _application(
        "MobileNetV3Small", (224, 224, 3), include_preprocessing=False
    ),
    "mobilenet_v3_large": _application(
        "MobileNetV3Large", (224, 224, 3), include_preprocessing=False
    ),
    "mobilenet_v3_large_minimalistic": _application(
        "MobileNetV3Large", (224, 224, 3), include_preprocessing=False, minimalistic=True
    ),
    "op_mix": op_mix,
    "pad_resize": pad_resize,
    "swish_se": swish_se,
    "leaky_relu": leaky_relu,
    "data_movement": data_movement,
    "reshape_ops": reshape_ops,
    "open_spatial": open_spatial,
    "embedding": embedding,
    "hard_swish_probe": _one_op_probe("hard_swish", "HARD_SWISH alone (TFLite's 16-bit kernel)"),
    "leaky_relu_probe": _one_op_probe("leaky_relu", "LEAKY_RELU (alpha 0.2) alone"),
    "sigmoid_probe": _one_op_probe("sigmoid", "LOGISTIC alone (output scale 1/256, fixed)"),
    "tanh_probe": _one_op_probe("tanh", "TANH alone (output scale 1/128, fixed)"),
    "bilinear_half_pixel": _bilinear_probe("half_pixel"),
    "bilinear_align_corners": _bilinear_probe("align_corners"),
    "bilinear_asymmetric": _bilinear_probe("asymmetric"),
}
SETS = {
    "test": [
        "kws_dscnn",
        "vww_mobilenet_v1",
        "ic_resnet8",
        "ad_autoencoder",
        "mobilenet_v2_035_96",
        "pad_resize",
        "swish_se",
        "leaky_relu",
        "data_movement",
        "reshape_ops",
        "open_spatial",
        "embedding",
        "hard_swish_probe",
        "leaky_relu_probe",
        "sigmoid_probe",
        "tanh_probe",
        "bilinear_half_pixel",
        "bilinear_align_corners",
        "bilinear_asymmetric",
    ],
    "extra": [
        "mobilenet_v2",
        "efficientnet_b0",
        "mobilenet_v3_small",
        "mobilenet_v3_large",
        "mobilenet_v3_large_minimalistic",
        "op_mix",
    ],
}


# ---- conversion (runs inside the reference venv) ------------------------------------------------


@dataclass(frozen=True)
class Made:
    name: str
    path: Path
    bytes: int
    input_shape: list[int]


def _randomize_batch_norm(keras: Any, model: Any, seed: int) -> None:
    """Trained-looking batch-norm statistics, so the converter's folding is exercised."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            gamma, beta, mean, variance = layer.get_weights()
            layer.set_weights(
                [
                    rng.uniform(0.5, 1.5, gamma.shape).astype("float32"),
                    rng.normal(0.0, 0.1, beta.shape).astype("float32"),
                    rng.normal(0.0, 0.1, mean.shape).astype("float32"),
                    rng.uniform(0.5, 1.5, variance.shape).astype("float32"),
                ]
            )


def build(name: str, batch: int | None, seed: int) -> Any:
    """MODELS[name] with weights drawn from `seed` (the same for either batch)."""
    import keras

    keras.utils.set_random_seed(seed)
    model = MODELS[name](keras, batch)
    _randomize_batch_norm(keras, model, seed)
    return model


def convert_int8(model: Any, calibration: Any) -> bytes:
    """Full-integer int8 conversion with int8 input and output (TFLite's PTQ recipe)."""
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([sample] for sample in calibration)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    with contextlib.redirect_stdout(io.StringIO()):  # Keras lists the traced signature
        return converter.convert()


def make(name: str, out: Path, seed: int) -> list[Made]:
    """NAME.tflite (batch 1) and NAME_open_batch.tflite, one set of weights and calibration."""
    import numpy as np

    made = []
    for batch, suffix in [(1, ""), (None, "_open_batch")]:
        model = build(name, batch, seed)
        dims = [-1 if d is None else int(d) for d in model.inputs[0].shape[1:]]
        shape = [CALIBRATION_OPEN_SIZE if d < 0 else d for d in dims]
        rng = np.random.default_rng(seed)
        if model.inputs[0].dtype == "int32":  # ids of a table
            size = (CALIBRATION_SAMPLES, 1, *shape)
            calibration = rng.integers(0, EMBEDDING_ROWS, size).astype("int32")
        else:
            calibration = rng.standard_normal((CALIBRATION_SAMPLES, 1, *shape)).astype("float32")
        path = out / f"{name}{suffix}.tflite"
        path.write_bytes(convert_int8(model, calibration))
        made.append(Made(path.stem, path, path.stat().st_size, [batch or -1, *dims]))
        print(f"{path}: {made[-1].bytes:,} bytes", flush=True)
    return made


def write_manifest(out: Path, made: list[Made], seed: int) -> None:
    """MANIFEST.json: how the files were made (versions, seed, command)."""
    import tensorflow as tf

    manifest_path = out / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest.update(
        {
            "made_by": "tools/make_tflite_models.py",
            "tensorflow": tf.__version__,
            "seed": seed,
            "calibration": f"{CALIBRATION_SAMPLES} standard normal samples from the seed",
        }
    )
    models = manifest.setdefault("models", {})
    for item in made:
        models[item.name] = {"input_shape": item.input_shape, "bytes": item.bytes}
    manifest["models"] = dict(sorted(models.items()))
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--set", choices=sorted(SETS), default="test")
    parser.add_argument("--only", nargs="*", help="these models (any of --list) instead of a set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    args = parser.parse_args()
    if args.list:
        for name, builder in MODELS.items():
            sets = [s for s, names in SETS.items() if name in names]
            print(f"{name:<22} [{', '.join(sets)}] {(builder.__doc__ or '').splitlines()[0]}")
        return 0
    names = args.only or SETS[args.set]
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        parser.error(f"unknown models {unknown}; --list shows them")
    if Path(sys.prefix).resolve() != VENV.resolve():
        python = ensure_venv()
        return subprocess.run([str(python), __file__, *sys.argv[1:]]).returncode
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args.out.mkdir(parents=True, exist_ok=True)
    made = [item for name in names for item in make(name, args.out.resolve(), args.seed)]
    write_manifest(args.out, made, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
