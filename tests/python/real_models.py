"""Real-model architectures (random weights) and their two import paths, shared by tests and
benchmarks.

Each model is the block structure of a torchvision-style network at small channel counts and
spatial sizes: what matters for partitioning is which ops the importers emit and how they
connect, not the width. ``import_torch`` goes through ``torch.export`` and
``from_exported_program``; ``import_onnx`` through ``torch.onnx.export(dynamo=True)`` (needs
onnxscript) and ``tvm.relax.frontend.onnx.from_onnx``. ``torch`` is imported lazily so the module
can be imported (for its names) where only numpy is needed.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tvm
from zoo_models import shufflenet_unit


def _nn():
    import torch
    from torch import nn

    return torch, nn


def _conv_bn(nn, c_in: int, c_out: int, kernel: int, stride: int = 1, groups: int = 1):
    return [
        nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(c_out),
    ]


def _inverted_residual(nn, c_in: int, hidden: int, c_out: int, stride: int, activation, se=None):
    """MobileNet / EfficientNet block: expand 1x1 (when hidden != c_in), depthwise 3x3,
    optional squeeze-excitation se(hidden), project 1x1; a residual add when shapes allow."""
    layers = [] if hidden == c_in else [*_conv_bn(nn, c_in, hidden, 1), activation()]
    layers += [*_conv_bn(nn, hidden, hidden, 3, stride, hidden), activation()]
    if se is not None:
        layers.append(se(hidden))
    layers += _conv_bn(nn, hidden, c_out, 1)

    class InvertedResidual(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(*layers)
            self.residual = stride == 1 and c_in == c_out

        def forward(self, x):
            return x + self.body(x) if self.residual else self.body(x)

    return InvertedResidual()


def resnet_basic() -> object:
    """ResNet-18's stem, a basic block, and a basic block with a strided 1x1 downsample."""
    torch, nn = _nn()

    class BasicBlock(nn.Module):
        def __init__(self, c_in: int, c_out: int, stride: int):
            super().__init__()
            self.body = nn.Sequential(
                *_conv_bn(nn, c_in, c_out, 3, stride), nn.ReLU(), *_conv_bn(nn, c_out, c_out, 3)
            )
            self.down = (
                nn.Sequential(*_conv_bn(nn, c_in, c_out, 1, stride))
                if stride != 1 or c_in != c_out
                else nn.Identity()
            )
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.relu(self.body(x) + self.down(x))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(*_conv_bn(nn, 3, 8, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
            self.layers = nn.Sequential(BasicBlock(8, 8, 1), BasicBlock(8, 16, 2))
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            x = self.pool(self.layers(self.stem(x)))
            return self.fc(torch.flatten(x, 1))

    return ResNet()


def mobilenet_v2() -> object:
    """MobileNetV2: inverted residuals (expand 1x1, depthwise 3x3, project 1x1) with ReLU6."""
    torch, nn = _nn()

    def InvertedResidual(c_in: int, c_out: int, stride: int, expand: int):  # noqa: N802
        return _inverted_residual(nn, c_in, c_in * expand, c_out, stride, nn.ReLU6)

    class MobileNetV2(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                *_conv_bn(nn, 3, 8, 3, 2),
                nn.ReLU6(),
                InvertedResidual(8, 8, 1, 1),
                InvertedResidual(8, 12, 2, 4),
                InvertedResidual(12, 12, 1, 4),
                *_conv_bn(nn, 12, 32, 1),
                nn.ReLU6(),
            )
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(32, 10))

        def forward(self, x):
            x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
            return self.classifier(torch.flatten(x, 1))

    return MobileNetV2()


def _squeeze_excitation(nn, channels: int, squeezed: int, gate: object, activation: object):
    class SqueezeExcitation(nn.Module):
        def __init__(self):
            super().__init__()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc1 = nn.Conv2d(channels, squeezed, 1)
            self.fc2 = nn.Conv2d(squeezed, channels, 1)
            self.activation = activation
            self.gate = gate

        def forward(self, x):
            scale = self.gate(self.fc2(self.activation(self.fc1(self.pool(x)))))
            return x * scale

    return SqueezeExcitation()


def mobilenet_v3() -> object:
    """MobileNetV3-Small: hardswish blocks with squeeze-excitation gated by hardsigmoid."""
    torch, nn = _nn()

    def Block(c_in: int, hidden: int, c_out: int, stride: int, se: bool):  # noqa: N802
        def excitation(channels: int):
            return _squeeze_excitation(nn, channels, channels // 4, nn.Hardsigmoid(), nn.ReLU())

        return _inverted_residual(
            nn, c_in, hidden, c_out, stride, nn.Hardswish, excitation if se else None
        )

    class MobileNetV3(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                *_conv_bn(nn, 3, 8, 3, 2),
                nn.Hardswish(),
                Block(8, 16, 8, 1, True),
                Block(8, 24, 12, 2, True),
                *_conv_bn(nn, 12, 32, 1),
                nn.Hardswish(),
            )
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(
                nn.Linear(32, 32), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(32, 10)
            )

        def forward(self, x):
            return self.classifier(torch.flatten(self.pool(self.features(x)), 1))

    return MobileNetV3()


def efficientnet() -> object:
    """EfficientNet-B0's MBConv: expand 1x1, depthwise, squeeze-excitation, project, SiLU."""
    torch, nn = _nn()

    def MBConv(c_in: int, c_out: int, stride: int, expand: int):  # noqa: N802
        def excitation(channels: int):
            return _squeeze_excitation(nn, channels, max(1, c_in // 4), nn.Sigmoid(), nn.SiLU())

        return _inverted_residual(nn, c_in, c_in * expand, c_out, stride, nn.SiLU, excitation)

    class EfficientNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                *_conv_bn(nn, 3, 8, 3, 2),
                nn.SiLU(),
                MBConv(8, 8, 1, 1),
                MBConv(8, 12, 2, 4),
                MBConv(12, 12, 1, 4),
                *_conv_bn(nn, 12, 32, 1),
                nn.SiLU(),
            )
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(32, 10))

        def forward(self, x):
            return self.classifier(torch.flatten(self.pool(self.features(x)), 1))

    return EfficientNet()


def squeezenet() -> object:
    """SqueezeNet 1.1: fire modules (squeeze 1x1, then 1x1 and 3x3 expands concatenated)."""
    torch, nn = _nn()

    class Fire(nn.Module):
        def __init__(self, c_in: int, squeeze: int, expand: int):
            super().__init__()
            self.squeeze = nn.Sequential(nn.Conv2d(c_in, squeeze, 1), nn.ReLU())
            self.expand1 = nn.Sequential(nn.Conv2d(squeeze, expand, 1), nn.ReLU())
            self.expand3 = nn.Sequential(nn.Conv2d(squeeze, expand, 3, padding=1), nn.ReLU())

        def forward(self, x):
            x = self.squeeze(x)
            return torch.cat([self.expand1(x), self.expand3(x)], 1)

    class SqueezeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 16, 3, 2),
                nn.ReLU(),
                nn.MaxPool2d(3, 2, ceil_mode=True),
                Fire(16, 4, 8),
                Fire(16, 4, 8),
                nn.MaxPool2d(3, 2, ceil_mode=True),
                Fire(16, 8, 16),
            )
            self.classifier = nn.Sequential(
                nn.Dropout(0.5), nn.Conv2d(32, 10, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1)
            )

        def forward(self, x):
            return torch.flatten(self.classifier(self.features(x)), 1)

    return SqueezeNet()


def shufflenet_v2() -> object:
    """ShuffleNetV2: channel split, a branch, concat and channel shuffle (reshape/transpose), in
    torchvision's units (zoo_models.shufflenet_unit)."""
    _, nn = _nn()

    class ShuffleNetV2(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(*_conv_bn(nn, 3, 8, 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
            self.stage = nn.Sequential(shufflenet_unit(8, 16, 2), shufflenet_unit(16, 16, 1))
            self.last = nn.Sequential(*_conv_bn(nn, 16, 32, 1), nn.ReLU())
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            x = self.last(self.stage(self.stem(x)))
            return self.fc(x.mean([2, 3]))

    return ShuffleNetV2()


def vit() -> object:
    """A pre-norm ViT: conv patch embedding, class token, position embedding, encoder blocks
    (LayerNorm, multi-head self-attention, LayerNorm, MLP with GELU), head on the class token."""
    torch, nn = _nn()

    class EncoderBlock(nn.Module):
        def __init__(self, dim: int, heads: int, mlp: int):
            super().__init__()
            self.ln_1 = nn.LayerNorm(dim, eps=1e-6)
            self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.ln_2 = nn.LayerNorm(dim, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

        def forward(self, x):
            y = self.ln_1(x)
            y, _ = self.attention(y, y, y, need_weights=False)
            x = x + y
            return x + self.mlp(self.ln_2(x))

    class ViT(nn.Module):
        def __init__(self, image: int = 16, patch: int = 4, dim: int = 32, layers: int = 2):
            super().__init__()
            self.dim = dim
            self.conv_proj = nn.Conv2d(3, dim, patch, patch)
            tokens = (image // patch) ** 2 + 1
            self.class_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
            self.pos_embedding = nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
            self.layers = nn.Sequential(*[EncoderBlock(dim, 4, 2 * dim) for _ in range(layers)])
            self.ln = nn.LayerNorm(dim, eps=1e-6)
            self.head = nn.Linear(dim, 10)

        def forward(self, x):
            n = x.shape[0]
            x = self.conv_proj(x).reshape(n, self.dim, -1).permute(0, 2, 1)
            x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1)
            x = self.ln(self.layers(x + self.pos_embedding))
            return self.head(x[:, 0])

    return ViT()


def audio_cnn() -> object:
    """A 1-D audio CNN: conv1d + batch norm + ReLU + 1-D max pooling stages, global average
    pooling over time, and a linear classifier."""
    torch, nn = _nn()

    def stage(c_in: int, c_out: int):
        return [
            nn.Conv1d(c_in, c_out, 3, padding=1),
            nn.BatchNorm1d(c_out),
            nn.ReLU(),
            nn.MaxPool1d(2),
        ]

    class AudioCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv1d(1, 8, 9, stride=4, padding=4),
                nn.ReLU(),
                nn.AvgPool1d(2),
                *stage(8, 16),
                *stage(16, 16),
            )
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            return self.fc(self.features(x).mean(-1))

    return AudioCNN()


@dataclass(frozen=True)
class RealModel:
    """A named architecture, its input shape and the NPU-function goal for it."""

    name: str
    build: Callable[[], object]
    input_shape: tuple[int, ...]
    max_npu_functions: int = 1


MODELS: tuple[RealModel, ...] = (
    RealModel("resnet", resnet_basic, (1, 3, 32, 32)),
    RealModel("mobilenet_v2", mobilenet_v2, (1, 3, 32, 32)),
    RealModel("mobilenet_v3", mobilenet_v3, (1, 3, 32, 32)),
    RealModel("efficientnet", efficientnet, (1, 3, 32, 32)),
    RealModel("squeezenet", squeezenet, (1, 3, 48, 48)),
    RealModel("shufflenet_v2", shufflenet_v2, (1, 3, 32, 32)),
    RealModel("vit", vit, (1, 3, 16, 16), max_npu_functions=3),
    RealModel("audio_cnn", audio_cnn, (1, 1, 512)),
)
MODELS_BY_NAME = {model.name: model for model in MODELS}


def instantiate(model: RealModel, seed: int = 0) -> tuple[object, np.ndarray]:
    """The model in eval mode with seeded random weights (and non-trivial batch-norm
    statistics), and a seeded input."""
    torch, nn = _nn()
    torch.manual_seed(seed)
    module = model.build().eval()
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, nn.modules.batchnorm._BatchNorm):
                sub.running_mean.uniform_(-0.2, 0.2, generator=generator)
                sub.running_var.uniform_(0.5, 1.5, generator=generator)
                sub.weight.uniform_(0.5, 1.5, generator=generator)
                sub.bias.uniform_(-0.2, 0.2, generator=generator)
    data = np.random.default_rng(seed).standard_normal(model.input_shape).astype("float32")
    return module, data


def torch_reference(module: object, data: np.ndarray) -> np.ndarray:
    torch, _ = _nn()
    with torch.no_grad():
        return module(torch.from_numpy(data)).numpy()


def import_torch(module: object, data: np.ndarray) -> tvm.IRModule:
    """torch.export + from_exported_program (weights bound as constants)."""
    torch, _ = _nn()
    from tvm.relax.frontend.torch import from_exported_program

    exported = torch.export.export(module, (torch.from_numpy(data),))
    return from_exported_program(exported, keep_params_as_input=False)


def export_onnx(module: object, data: np.ndarray, opset: int | None = None) -> bytes:
    """torch.onnx.export to an in-memory ONNX model: the dynamo exporter (``opset`` None), or
    the legacy TorchScript exporter (``dynamo=False``) at ``opset``."""
    torch, _ = _nn()
    buffer = io.BytesIO()
    args = (torch.from_numpy(data),)
    if opset is not None:
        torch.onnx.export(
            module, args, buffer, dynamo=False, opset_version=opset, input_names=["input"]
        )
        return buffer.getvalue()
    program = torch.onnx.export(module, args, dynamo=True, input_names=["input"], verbose=False)
    program.save(buffer)
    return buffer.getvalue()


def import_onnx(onnx_bytes: bytes, input_shape: tuple[int, ...]) -> tvm.IRModule:
    import onnx
    from tvm.relax.frontend.onnx import from_onnx

    return from_onnx(onnx.load_from_string(onnx_bytes), shape_dict={"input": list(input_shape)})


def onnxruntime_reference(onnx_bytes: bytes, data: np.ndarray) -> np.ndarray:
    import onnxruntime

    session = onnxruntime.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: data})[0]
