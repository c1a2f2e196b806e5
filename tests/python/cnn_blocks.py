"""Small CNNs with the block structures of ResNet-18, MobileNetV2/V3, EfficientNet, SqueezeNet
and ShuffleNetV2, written here (no torchvision) at test sizes: 32x32 inputs, a few channels.

Each keeps what makes its family distinctive for a quantized NPU: residual adds, inverted
residuals with ReLU6, hardswish and squeeze-excitation gates, SiLU, fire modules with concat and
ceil-mode pooling, channel split / shuffle. BatchNorm statistics are randomised so folding them
matters. ``export_onnx`` writes the model with torch.onnx (opset 18).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

INPUT_SHAPE = (1, 3, 32, 32)


def conv_bn(
    cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act=None
) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    """ResNet-18's block: two 3x3 convs, identity or 1x1-projection shortcut, add, ReLU."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(
            conv_bn(cin, cout, 3, stride, act=nn.ReLU), conv_bn(cout, cout, 3)
        )
        self.shortcut = (
            conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()
        )

    def forward(self, x):
        return F.relu(self.body(x) + self.shortcut(x))


class ResNet18Like(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 8, 7, 2, act=nn.ReLU), nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(
            BasicBlock(8, 8, 1), BasicBlock(8, 8, 1), BasicBlock(8, 16, 2), BasicBlock(16, 16, 1)
        )
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class InvertedResidual(nn.Module):
    """MobileNetV2: 1x1 expand + ReLU6, 3x3 depthwise + ReLU6, 1x1 linear project, residual."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        self.body = nn.Sequential(
            conv_bn(cin, hidden, 1, act=nn.ReLU6),
            conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
            conv_bn(hidden, cout, 1),
        )
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV2Like(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            conv_bn(3, 8, 3, 2, act=nn.ReLU6),
            InvertedResidual(8, 8, 1, 1),
            InvertedResidual(8, 12, 2, 4),
            InvertedResidual(12, 12, 1, 4),
            conv_bn(12, 32, 1, act=nn.ReLU6),
        )
        self.classifier = nn.Linear(32, classes)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


class SqueezeExcite(nn.Module):
    """Global average pool, 1x1 reduce + activation, 1x1 expand + gate, channel-wise multiply."""

    def __init__(self, channels: int, squeezed: int, act: Callable, gate: Callable):
        super().__init__()
        self.reduce = nn.Conv2d(channels, squeezed, 1)
        self.expand = nn.Conv2d(squeezed, channels, 1)
        self.act, self.gate = act(), gate()

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.expand(self.act(self.reduce(s))))


class MobileNetV3Block(nn.Module):
    """Expand + hardswish, depthwise + hardswish, SE with hardsigmoid, project, residual."""

    def __init__(self, cin: int, hidden: int, cout: int, stride: int, use_se: bool):
        super().__init__()
        layers = [
            conv_bn(cin, hidden, 1, act=nn.Hardswish),
            conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.Hardswish),
        ]
        if use_se:
            layers.append(SqueezeExcite(hidden, max(hidden // 4, 4), nn.ReLU, nn.Hardsigmoid))
        layers.append(conv_bn(hidden, cout, 1))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV3Like(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            conv_bn(3, 8, 3, 2, act=nn.Hardswish),
            MobileNetV3Block(8, 16, 8, 1, use_se=True),
            MobileNetV3Block(8, 24, 12, 2, use_se=False),
            MobileNetV3Block(12, 36, 12, 1, use_se=True),
        )
        self.head = nn.Sequential(nn.Linear(12, 24), nn.Hardswish(), nn.Linear(24, classes))

    def forward(self, x):
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class MBConv(nn.Module):
    """EfficientNet: expand + SiLU, depthwise + SiLU, SE (SiLU, sigmoid), project, residual."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        self.body = nn.Sequential(
            conv_bn(cin, hidden, 1, act=nn.SiLU),
            conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.SiLU),
            SqueezeExcite(hidden, max(cin // 4, 2), nn.SiLU, nn.Sigmoid),
            conv_bn(hidden, cout, 1),
        )
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


class EfficientNetLike(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            conv_bn(3, 8, 3, 2, act=nn.SiLU),
            MBConv(8, 8, 1, 1),
            MBConv(8, 12, 2, 4),
            MBConv(12, 12, 1, 4),
            conv_bn(12, 24, 1, act=nn.SiLU),
        )
        self.classifier = nn.Linear(24, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class Fire(nn.Module):
    """SqueezeNet: 1x1 squeeze + ReLU, then 1x1 and 3x3 expands + ReLU, concatenated."""

    def __init__(self, cin: int, squeeze: int, expand: int):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1 = nn.Conv2d(squeeze, expand, 1)
        self.expand3 = nn.Conv2d(squeeze, expand, 3, padding=1)

    def forward(self, x):
        s = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.expand1(s)), F.relu(self.expand3(s))], 1)


class SqueezeNetLike(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(16, 4, 8),
            Fire(16, 4, 8),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(16, 6, 12),
        )
        self.classifier = nn.Sequential(nn.Conv2d(24, classes, 1), nn.ReLU())

    def forward(self, x):
        x = self.classifier(self.features(x))
        return torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)


def channel_shuffle(x, groups: int = 2):
    n, c, h, w = x.shape
    return x.view(n, groups, c // groups, h, w).transpose(1, 2).reshape(n, c, h, w)


class ShuffleUnit(nn.Module):
    """ShuffleNetV2: stride 1 splits the channels, stride 2 runs two branches; concat, shuffle."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.stride = stride
        branch = cout // 2
        inner = cin if stride > 1 else branch
        if stride > 1:
            self.left = nn.Sequential(
                conv_bn(cin, cin, 3, stride, groups=cin), conv_bn(cin, branch, 1, act=nn.ReLU)
            )
        self.right = nn.Sequential(
            conv_bn(inner, branch, 1, act=nn.ReLU),
            conv_bn(branch, branch, 3, stride, groups=branch),
            conv_bn(branch, branch, 1, act=nn.ReLU),
        )

    def forward(self, x):
        if self.stride == 1:
            a, b = x.chunk(2, dim=1)
            out = torch.cat([a, self.right(b)], 1)
        else:
            out = torch.cat([self.left(x), self.right(x)], 1)
        return channel_shuffle(out)


class ShuffleNetLike(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 8, 3, 2, act=nn.ReLU), nn.MaxPool2d(3, 2, 1))
        self.stages = nn.Sequential(ShuffleUnit(8, 16, 2), ShuffleUnit(16, 16, 1))
        self.conv = conv_bn(16, 32, 1, act=nn.ReLU)
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        x = self.conv(self.stages(self.stem(x)))
        return self.fc(x.mean((2, 3)))


MODELS: dict[str, Callable[[], nn.Module]] = {
    "resnet18": ResNet18Like,
    "mobilenet_v2": MobileNetV2Like,
    "mobilenet_v3": MobileNetV3Like,
    "efficientnet": EfficientNetLike,
    "squeezenet": SqueezeNetLike,
    "shufflenet": ShuffleNetLike,
}


def build(name: str, seed: int = 0) -> nn.Module:
    """The model in eval mode with seeded weights and randomised BatchNorm statistics."""
    torch.manual_seed(seed)
    model = MODELS[name]()
    generator = torch.Generator().manual_seed(seed + 1)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            c = module.num_features
            module.running_mean.copy_(torch.rand(c, generator=generator) - 0.5)
            module.running_var.copy_(torch.rand(c, generator=generator) + 0.5)
            module.weight.data.copy_(torch.rand(c, generator=generator) + 0.5)
            module.bias.data.copy_(torch.rand(c, generator=generator) * 0.4 - 0.2)
    return model.eval()


def export_onnx(model: nn.Module, path: str) -> None:
    """torch.onnx.export (the dynamo exporter, opset 18) with input "x" and output "y"."""
    example = torch.zeros(INPUT_SHAPE)
    torch.onnx.export(
        model,
        (example,),
        path,
        input_names=["x"],
        output_names=["y"],
        dynamo=True,
        opset_version=18,
        verbose=False,
    )
