"""torchvision's architectures written out by hand (no torchvision dependency), plus the variants
users bring: Inception-style and DenseNet-style concat blocks, a ConvNeXt block, transformer
encoders built from ``nn.TransformerEncoderLayer`` and a 1-D audio CNN.

Each builder follows torchvision's definition (layer order, kernel sizes, strides, paddings,
biases, batch-norm epsilons, ``_make_divisible`` channel rounding, the forward's reshapes) and
takes the knobs torchvision itself has (``num_classes``, stage depths, ...), so the full-size
networks (``benchmarks/zoo_models_table.py``) and the small ones of the CI tests
(``tests/python/test_zoo_models.py``) share one definition. ``torch`` is imported lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


def _nn():
    import torch
    from torch import nn

    return torch, nn


def _make_divisible(value: float, divisor: int = 8) -> int:
    """torchvision's channel rounding (from the TensorFlow MobileNet code)."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _conv_norm_act(nn, c_in, c_out, kernel=3, stride=1, groups=1, act=None, eps=1e-5):
    """torchvision.ops.Conv2dNormActivation: conv (no bias, 'same' padding), BN, activation."""
    layers = [
        nn.Conv2d(c_in, c_out, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(c_out, eps=eps),
    ]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


def _squeeze_excitation(nn, channels: int, squeezed: int, activation, scale_activation):
    """torchvision.ops.SqueezeExcitation: avg pool, 1x1 conv, act, 1x1 conv, gate, scale."""

    class SqueezeExcitation(nn.Module):
        def __init__(self):
            super().__init__()
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc1 = nn.Conv2d(channels, squeezed, 1)
            self.fc2 = nn.Conv2d(squeezed, channels, 1)
            self.activation = activation()
            self.scale_activation = scale_activation()

        def forward(self, x):
            scale = self.fc2(self.activation(self.fc1(self.avgpool(x))))
            return self.scale_activation(scale) * x

    return SqueezeExcitation()


# ResNet ---------------------------------------------------------------------------------------


def resnet(
    bottleneck: bool, layers: Sequence[int] = (2, 2, 2, 2), num_classes: int = 1000, width=64
):
    """torchvision.models.resnet: ResNet-18 is (False, (2, 2, 2, 2)), ResNet-50 (True, (3, 4, 6,
    3)); the stride sits on the 3x3 conv of a bottleneck (ResNet v1.5). ``width`` is the stem's
    channel count, 64 in torchvision (the tests shrink it)."""
    torch, nn = _nn()
    expansion = 4 if bottleneck else 1

    class Block(nn.Module):
        def __init__(self, inplanes: int, planes: int, stride: int, downsample):
            super().__init__()
            if bottleneck:
                self.body = nn.Sequential(
                    nn.Conv2d(inplanes, planes, 1, bias=False),
                    nn.BatchNorm2d(planes),
                    nn.ReLU(inplace=True),
                    nn.Conv2d(planes, planes, 3, stride, 1, bias=False),
                    nn.BatchNorm2d(planes),
                    nn.ReLU(inplace=True),
                    nn.Conv2d(planes, planes * 4, 1, bias=False),
                    nn.BatchNorm2d(planes * 4),
                )
            else:
                self.body = nn.Sequential(
                    nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False),
                    nn.BatchNorm2d(planes),
                    nn.ReLU(inplace=True),
                    nn.Conv2d(planes, planes, 3, 1, 1, bias=False),
                    nn.BatchNorm2d(planes),
                )
            self.downsample = downsample
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.body(x)
            out += identity
            return self.relu(out)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inplanes = width
            self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            self.layer1 = self._make_layer(width, layers[0], 1)
            self.layer2 = self._make_layer(2 * width, layers[1], 2)
            self.layer3 = self._make_layer(4 * width, layers[2], 2)
            self.layer4 = self._make_layer(8 * width, layers[3], 2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(8 * width * expansion, num_classes)

        def _make_layer(self, planes: int, blocks: int, stride: int):
            downsample = None
            if stride != 1 or self.inplanes != planes * expansion:
                downsample = nn.Sequential(
                    nn.Conv2d(self.inplanes, planes * expansion, 1, stride, bias=False),
                    nn.BatchNorm2d(planes * expansion),
                )
            stage = [Block(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes * expansion
            stage += [Block(self.inplanes, planes, 1, None) for _ in range(1, blocks)]
            return nn.Sequential(*stage)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            x = torch.flatten(self.avgpool(x), 1)
            return self.fc(x)

    return ResNet()


# MobileNet ------------------------------------------------------------------------------------

MOBILENET_V2_SETTINGS = (  # t (expansion), c, n (repeats), s
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def mobilenet_v2(settings=MOBILENET_V2_SETTINGS, width_mult=1.0, num_classes=1000):
    """torchvision.models.mobilenet_v2 with its width multiplier (1.0 in the model zoo)."""
    torch, nn = _nn()

    class InvertedResidual(nn.Module):
        def __init__(self, c_in: int, c_out: int, stride: int, expand: int):
            super().__init__()
            hidden = int(round(c_in * expand))
            self.use_res_connect = stride == 1 and c_in == c_out
            layers = []
            if expand != 1:
                layers.append(_conv_norm_act(nn, c_in, hidden, 1, act=nn.ReLU6))
            layers += [
                _conv_norm_act(nn, hidden, hidden, 3, stride, hidden, act=nn.ReLU6),
                nn.Conv2d(hidden, c_out, 1, 1, 0, bias=False),
                nn.BatchNorm2d(c_out),
            ]
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.conv(x) if self.use_res_connect else self.conv(x)

    class MobileNetV2(nn.Module):
        def __init__(self):
            super().__init__()
            c_in = _make_divisible(32 * width_mult)
            last_channel = _make_divisible(1280 * max(1.0, width_mult))
            features = [_conv_norm_act(nn, 3, c_in, stride=2, act=nn.ReLU6)]
            for t, c, n, s in settings:
                c_out = _make_divisible(c * width_mult)
                for i in range(n):
                    features.append(InvertedResidual(c_in, c_out, s if i == 0 else 1, t))
                    c_in = c_out
            features.append(_conv_norm_act(nn, c_in, last_channel, 1, act=nn.ReLU6))
            self.features = nn.Sequential(*features)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last_channel, num_classes))

        def forward(self, x):
            x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
            return self.classifier(torch.flatten(x, 1))

    return MobileNetV2()


MOBILENET_V3_SMALL_SETTINGS = (  # in, kernel, expanded, out, SE, activation, stride
    (16, 3, 16, 16, True, "RE", 2),
    (16, 3, 72, 24, False, "RE", 2),
    (24, 3, 88, 24, False, "RE", 1),
    (24, 5, 96, 40, True, "HS", 2),
    (40, 5, 240, 40, True, "HS", 1),
    (40, 5, 240, 40, True, "HS", 1),
    (40, 5, 120, 48, True, "HS", 1),
    (48, 5, 144, 48, True, "HS", 1),
    (48, 5, 288, 96, True, "HS", 2),
    (96, 5, 576, 96, True, "HS", 1),
    (96, 5, 576, 96, True, "HS", 1),
)


def mobilenet_v3_small(settings=MOBILENET_V3_SMALL_SETTINGS, last_channel=1024, num_classes=1000):
    """torchvision.models.mobilenet_v3_small: hardswish, squeeze-excitation gated by
    hardsigmoid, batch norm with eps 0.001."""
    torch, nn = _nn()

    def norm_act(c_in, c_out, kernel=3, stride=1, groups=1, act=None):
        return _conv_norm_act(nn, c_in, c_out, kernel, stride, groups, act, eps=0.001)

    class InvertedResidual(nn.Module):
        def __init__(self, c_in, kernel, expanded, c_out, se, activation, stride):
            super().__init__()
            act = nn.Hardswish if activation == "HS" else nn.ReLU
            self.use_res_connect = stride == 1 and c_in == c_out
            layers = []
            if expanded != c_in:
                layers.append(norm_act(c_in, expanded, 1, act=act))
            layers.append(norm_act(expanded, expanded, kernel, stride, expanded, act=act))
            if se:
                squeezed = _make_divisible(expanded // 4, 8)
                layers.append(_squeeze_excitation(nn, expanded, squeezed, nn.ReLU, nn.Hardsigmoid))
            layers.append(norm_act(expanded, c_out, 1))
            self.block = nn.Sequential(*layers)

        def forward(self, x):
            result = self.block(x)
            return result + x if self.use_res_connect else result

    class MobileNetV3(nn.Module):
        def __init__(self):
            super().__init__()
            first = settings[0][0]
            layers = [norm_act(3, first, 3, 2, act=nn.Hardswish)]
            layers += [InvertedResidual(*setting) for setting in settings]
            last_in = settings[-1][3]
            layers.append(norm_act(last_in, 6 * last_in, 1, act=nn.Hardswish))
            self.features = nn.Sequential(*layers)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(
                nn.Linear(6 * last_in, last_channel),
                nn.Hardswish(inplace=True),
                nn.Dropout(0.2, inplace=True),
                nn.Linear(last_channel, num_classes),
            )

        def forward(self, x):
            x = torch.flatten(self.avgpool(self.features(x)), 1)
            return self.classifier(x)

    return MobileNetV3()


# EfficientNet ---------------------------------------------------------------------------------

EFFICIENTNET_B0_SETTINGS = (  # expand ratio, kernel, stride, in, out, layers
    (1, 3, 1, 32, 16, 1),
    (6, 3, 2, 16, 24, 2),
    (6, 5, 2, 24, 40, 2),
    (6, 3, 2, 40, 80, 3),
    (6, 5, 1, 80, 112, 3),
    (6, 5, 2, 112, 192, 4),
    (6, 3, 1, 192, 320, 1),
)


def efficientnet_b0(settings=EFFICIENTNET_B0_SETTINGS, num_classes: int = 1000):
    """torchvision.models.efficientnet_b0 (MBConv with SiLU and squeeze-excitation; stochastic
    depth is the identity in eval mode)."""
    torch, nn = _nn()

    class MBConv(nn.Module):
        def __init__(self, expand, kernel, stride, c_in, c_out):
            super().__init__()
            self.use_res_connect = stride == 1 and c_in == c_out
            expanded = _make_divisible(c_in * expand, 8)
            layers = []
            if expanded != c_in:
                layers.append(_conv_norm_act(nn, c_in, expanded, 1, act=nn.SiLU))
            layers += [
                _conv_norm_act(nn, expanded, expanded, kernel, stride, expanded, act=nn.SiLU),
                _squeeze_excitation(nn, expanded, max(1, c_in // 4), nn.SiLU, nn.Sigmoid),
                _conv_norm_act(nn, expanded, c_out, 1),
            ]
            self.block = nn.Sequential(*layers)

        def forward(self, x):
            result = self.block(x)
            return result + x if self.use_res_connect else result

    class EfficientNet(nn.Module):
        def __init__(self):
            super().__init__()
            first = settings[0][3]
            layers = [_conv_norm_act(nn, 3, first, 3, 2, act=nn.SiLU)]
            for expand, kernel, stride, c_in, c_out, repeats in settings:
                stage = [
                    MBConv(
                        expand, kernel, stride if i == 0 else 1, c_in if i == 0 else c_out, c_out
                    )
                    for i in range(repeats)
                ]
                layers.append(nn.Sequential(*stage))
            last_in = settings[-1][4]
            layers.append(_conv_norm_act(nn, last_in, 4 * last_in, 1, act=nn.SiLU))
            self.features = nn.Sequential(*layers)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(
                nn.Dropout(0.2, inplace=True), nn.Linear(4 * last_in, num_classes)
            )

        def forward(self, x):
            x = torch.flatten(self.avgpool(self.features(x)), 1)
            return self.classifier(x)

    return EfficientNet()


# SqueezeNet / ShuffleNet ----------------------------------------------------------------------

SQUEEZENET_1_1_FIRES = (  # (squeeze, expand) per fire module; "M" is a max pool
    (16, 64),
    (16, 64),
    "M",
    (32, 128),
    (32, 128),
    "M",
    (48, 192),
    (48, 192),
    (64, 256),
    (64, 256),
)


def squeezenet1_1(fires=SQUEEZENET_1_1_FIRES, num_classes: int = 1000):
    """torchvision.models.squeezenet1_1."""
    torch, nn = _nn()

    class Fire(nn.Module):
        def __init__(self, c_in: int, squeeze: int, expand: int):
            super().__init__()
            self.squeeze = nn.Conv2d(c_in, squeeze, 1)
            self.squeeze_activation = nn.ReLU(inplace=True)
            self.expand1x1 = nn.Conv2d(squeeze, expand, 1)
            self.expand1x1_activation = nn.ReLU(inplace=True)
            self.expand3x3 = nn.Conv2d(squeeze, expand, 3, padding=1)
            self.expand3x3_activation = nn.ReLU(inplace=True)

        def forward(self, x):
            x = self.squeeze_activation(self.squeeze(x))
            return torch.cat(
                [
                    self.expand1x1_activation(self.expand1x1(x)),
                    self.expand3x3_activation(self.expand3x3(x)),
                ],
                1,
            )

    class SqueezeNet(nn.Module):
        def __init__(self):
            super().__init__()
            layers = [
                nn.Conv2d(3, 64, 3, 2),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(3, 2, ceil_mode=True),
            ]
            channels = 64
            for fire in fires:
                if fire == "M":
                    layers.append(nn.MaxPool2d(3, 2, ceil_mode=True))
                else:
                    layers.append(Fire(channels, *fire))
                    channels = 2 * fire[1]
            self.features = nn.Sequential(*layers)
            self.classifier = nn.Sequential(
                nn.Dropout(0.5),
                nn.Conv2d(channels, num_classes, 1),
                nn.ReLU(inplace=True),
                nn.AdaptiveAvgPool2d((1, 1)),
            )

        def forward(self, x):
            return torch.flatten(self.classifier(self.features(x)), 1)

    return SqueezeNet()


def shufflenet_unit(c_in: int, c_out: int, stride: int):
    """torchvision's ShuffleNetV2 InvertedResidual: split the channels (stride 1) or branch
    twice (stride 2), concat, channel shuffle."""
    torch, nn = _nn()

    def channel_shuffle(x, groups: int):
        batch, num_channels, height, width = x.size()
        x = x.view(batch, groups, num_channels // groups, height, width)
        x = torch.transpose(x, 1, 2).contiguous()
        return x.view(batch, -1, height, width)

    def depthwise(c, stride):
        return nn.Conv2d(c, c, 3, stride, 1, bias=False, groups=c)

    class InvertedResidual(nn.Module):
        def __init__(self):
            super().__init__()
            self.stride = stride
            branch = c_out // 2
            if stride > 1:
                self.branch1 = nn.Sequential(
                    depthwise(c_in, stride),
                    nn.BatchNorm2d(c_in),
                    nn.Conv2d(c_in, branch, 1, 1, 0, bias=False),
                    nn.BatchNorm2d(branch),
                    nn.ReLU(inplace=True),
                )
            else:
                self.branch1 = nn.Sequential()
            self.branch2 = nn.Sequential(
                nn.Conv2d(c_in if stride > 1 else branch, branch, 1, 1, 0, bias=False),
                nn.BatchNorm2d(branch),
                nn.ReLU(inplace=True),
                depthwise(branch, stride),
                nn.BatchNorm2d(branch),
                nn.Conv2d(branch, branch, 1, 1, 0, bias=False),
                nn.BatchNorm2d(branch),
                nn.ReLU(inplace=True),
            )

        def forward(self, x):
            if self.stride == 1:
                x1, x2 = x.chunk(2, dim=1)
                out = torch.cat((x1, self.branch2(x2)), dim=1)
            else:
                out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
            return channel_shuffle(out, 2)

    return InvertedResidual()


def shufflenet_v2(repeats=(4, 8, 4), channels=(24, 116, 232, 464, 1024), num_classes=1000):
    """torchvision.models.shufflenet_v2_x1_0: chunk, branch, concat, channel shuffle."""
    torch, nn = _nn()

    class ShuffleNetV2(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Sequential(
                nn.Conv2d(3, channels[0], 3, 2, 1, bias=False),
                nn.BatchNorm2d(channels[0]),
                nn.ReLU(inplace=True),
            )
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            stages = []
            c_in = channels[0]
            for count, c_out in zip(repeats, channels[1:-1], strict=True):
                units = [shufflenet_unit(c_in, c_out, 2)]
                units += [shufflenet_unit(c_out, c_out, 1) for _ in range(count - 1)]
                stages.append(nn.Sequential(*units))
                c_in = c_out
            self.stage2, self.stage3, self.stage4 = stages
            self.conv5 = nn.Sequential(
                nn.Conv2d(c_in, channels[-1], 1, 1, 0, bias=False),
                nn.BatchNorm2d(channels[-1]),
                nn.ReLU(inplace=True),
            )
            self.fc = nn.Linear(channels[-1], num_classes)

        def forward(self, x):
            x = self.maxpool(self.conv1(x))
            x = self.conv5(self.stage4(self.stage3(self.stage2(x))))
            return self.fc(x.mean([2, 3]))

    return ShuffleNetV2()


# Transformers ---------------------------------------------------------------------------------


def vit(
    image_size=224, patch_size=16, layers=12, heads=12, hidden=768, mlp_dim=3072, num_classes=1000
):
    """torchvision.models.vit_b_16: conv patch embedding, class token, position embedding,
    pre-norm encoder blocks with nn.MultiheadAttention(batch_first=True), GELU MLP."""
    torch, nn = _nn()

    class EncoderBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(hidden, eps=1e-6)
            self.self_attention = nn.MultiheadAttention(
                hidden, heads, dropout=0.0, batch_first=True
            )
            self.dropout = nn.Dropout(0.0)
            self.ln_2 = nn.LayerNorm(hidden, eps=1e-6)
            self.mlp = nn.Sequential(
                nn.Linear(hidden, mlp_dim),
                nn.GELU(),
                nn.Dropout(0.0),
                nn.Linear(mlp_dim, hidden),
                nn.Dropout(0.0),
            )

        def forward(self, x):
            y = self.ln_1(x)
            y, _ = self.self_attention(y, y, y, need_weights=False)
            x = self.dropout(y) + x
            return x + self.mlp(self.ln_2(x))

    class VisionTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            seq_length = (image_size // patch_size) ** 2 + 1
            self.conv_proj = nn.Conv2d(3, hidden, patch_size, patch_size)
            self.class_token = nn.Parameter(torch.zeros(1, 1, hidden))
            self.pos_embedding = nn.Parameter(torch.empty(1, seq_length, hidden).normal_(std=0.02))
            self.dropout = nn.Dropout(0.0)
            self.layers = nn.Sequential(*[EncoderBlock() for _ in range(layers)])
            self.ln = nn.LayerNorm(hidden, eps=1e-6)
            self.heads = nn.Sequential(nn.Linear(hidden, num_classes))

        def forward(self, x):
            n, _, h, w = x.shape
            x = self.conv_proj(x).reshape(n, hidden, (h // patch_size) * (w // patch_size))
            x = x.permute(0, 2, 1)
            x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1)
            x = self.ln(self.layers(self.dropout(x + self.pos_embedding)))
            return self.heads(x[:, 0])

    return VisionTransformer()


def transformer_encoder(norm_first: bool, d_model=256, heads=8, ff=1024, layers=4, classes=10):
    """A text-classifier-style encoder from nn.TransformerEncoderLayer (batch_first, ReLU FFN),
    post-norm (``norm_first=False``, the PyTorch default) or pre-norm, mean-pooled."""
    torch, nn = _nn()

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(
                d_model, heads, ff, dropout=0.1, batch_first=True, norm_first=norm_first
            )
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(d_model, classes)

        def forward(self, x):
            return self.head(self.encoder(x).mean(1))

    return Encoder()


# Blocks users bring ---------------------------------------------------------------------------


def inception(num_classes: int = 1000):
    """GoogLeNet's stem and inception 3a / 3b / 4a (four concatenated branches: 1x1, 1x1->3x3,
    1x1->3x3 (torchvision's 5x5 branch), 3x3 max pool->1x1; conv + BN(eps 0.001) + ReLU)."""
    torch, nn = _nn()

    def basic(c_in, c_out, kernel, stride=1, padding=0):
        return nn.Sequential(
            nn.Conv2d(c_in, c_out, kernel, stride, padding, bias=False),
            nn.BatchNorm2d(c_out, eps=0.001),
            nn.ReLU(inplace=True),
        )

    class Inception(nn.Module):
        def __init__(self, c_in, ch1, ch3red, ch3, ch5red, ch5, pool_proj):
            super().__init__()
            self.branch1 = basic(c_in, ch1, 1)
            self.branch2 = nn.Sequential(basic(c_in, ch3red, 1), basic(ch3red, ch3, 3, padding=1))
            self.branch3 = nn.Sequential(basic(c_in, ch5red, 1), basic(ch5red, ch5, 3, padding=1))
            self.branch4 = nn.Sequential(
                nn.MaxPool2d(3, 1, 1, ceil_mode=True), basic(c_in, pool_proj, 1)
            )

        def forward(self, x):
            branches = [self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)]
            return torch.cat(branches, 1)

    class GoogLeNetHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(
                basic(3, 64, 7, 2, 3),
                nn.MaxPool2d(3, 2, ceil_mode=True),
                basic(64, 64, 1),
                basic(64, 192, 3, padding=1),
                nn.MaxPool2d(3, 2, ceil_mode=True),
            )
            self.inception3a = Inception(192, 64, 96, 128, 16, 32, 32)
            self.inception3b = Inception(256, 128, 128, 192, 32, 96, 64)
            self.maxpool3 = nn.MaxPool2d(3, 2, ceil_mode=True)
            self.inception4a = Inception(480, 192, 96, 208, 16, 48, 64)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512, num_classes)

        def forward(self, x):
            x = self.inception3b(self.inception3a(self.stem(x)))
            x = self.inception4a(self.maxpool3(x))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return GoogLeNetHead()


def densenet(growth=32, block_layers=(6, 12), init_features=64, bn_size=4, num_classes=1000):
    """DenseNet-121's first two dense blocks and transition: every layer (BN, ReLU, 1x1 conv, BN,
    ReLU, 3x3 conv) reads the concat of all earlier features; transitions halve the channels and
    average-pool; the head is BN, ReLU, global average pool, Linear."""
    torch, nn = _nn()

    class DenseLayer(nn.Module):
        def __init__(self, c_in):
            super().__init__()
            self.norm1 = nn.BatchNorm2d(c_in)
            self.relu1 = nn.ReLU(inplace=True)
            self.conv1 = nn.Conv2d(c_in, bn_size * growth, 1, bias=False)
            self.norm2 = nn.BatchNorm2d(bn_size * growth)
            self.relu2 = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, 1, 1, bias=False)

        def forward(self, features):
            x = torch.cat(features, 1)
            x = self.conv1(self.relu1(self.norm1(x)))
            return self.conv2(self.relu2(self.norm2(x)))

    class DenseBlock(nn.ModuleDict):
        def __init__(self, count, c_in):
            super().__init__()
            for i in range(count):
                self.add_module(f"denselayer{i + 1}", DenseLayer(c_in + i * growth))

        def forward(self, x):
            features = [x]
            for layer in self.values():
                features.append(layer(features))
            return torch.cat(features, 1)

    class DenseNet(nn.Module):
        def __init__(self):
            super().__init__()
            layers = [
                nn.Conv2d(3, init_features, 7, 2, 3, bias=False),
                nn.BatchNorm2d(init_features),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(3, 2, 1),
            ]
            channels = init_features
            for i, count in enumerate(block_layers):
                layers.append(DenseBlock(count, channels))
                channels += count * growth
                if i != len(block_layers) - 1:
                    layers += [
                        nn.BatchNorm2d(channels),
                        nn.ReLU(inplace=True),
                        nn.Conv2d(channels, channels // 2, 1, bias=False),
                        nn.AvgPool2d(2, 2),
                    ]
                    channels //= 2
            layers.append(nn.BatchNorm2d(channels))
            self.features = nn.Sequential(*layers)
            self.classifier = nn.Linear(channels, num_classes)

        def forward(self, x):
            x = nn.functional.relu(self.features(x), inplace=True)
            x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, (1, 1)), 1)
            return self.classifier(x)

    return DenseNet()


def convnext(dims=(96, 192), depths=(3, 3), num_classes=1000):
    """ConvNeXt-T's stem and first stages: depthwise 7x7, LayerNorm over channels through a
    permute to NHWC, Linear 4x, GELU, Linear, layer scale, residual; LayerNorm2d + 2x2 conv
    downsampling between stages; the head pools, normalises, flattens and classifies."""
    torch, nn = _nn()

    class LayerNorm2d(nn.LayerNorm):
        def forward(self, x):
            x = x.permute(0, 2, 3, 1)
            x = nn.functional.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
            return x.permute(0, 3, 1, 2)

    class CNBlock(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.block = nn.Sequential(
                nn.Conv2d(dim, dim, 7, padding=3, groups=dim, bias=True),
                Permute((0, 2, 3, 1)),
                nn.LayerNorm(dim, eps=1e-6),
                nn.Linear(dim, 4 * dim),
                nn.GELU(),
                nn.Linear(4 * dim, dim),
                Permute((0, 3, 1, 2)),
            )
            self.layer_scale = nn.Parameter(torch.rand(dim, 1, 1) * 0.1 + 0.05)

        def forward(self, x):
            return self.layer_scale * self.block(x) + x

    class Permute(nn.Module):
        def __init__(self, dims):
            super().__init__()
            self.dims = dims

        def forward(self, x):
            return torch.permute(x, self.dims)

    class ConvNeXt(nn.Module):
        def __init__(self):
            super().__init__()
            layers = [nn.Sequential(nn.Conv2d(3, dims[0], 4, 4), LayerNorm2d(dims[0], eps=1e-6))]
            for i, (dim, depth) in enumerate(zip(dims, depths, strict=True)):
                layers.append(nn.Sequential(*[CNBlock(dim) for _ in range(depth)]))
                if i + 1 < len(dims):
                    layers.append(
                        nn.Sequential(LayerNorm2d(dim, eps=1e-6), nn.Conv2d(dim, dims[i + 1], 2, 2))
                    )
            self.features = nn.Sequential(*layers)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(
                LayerNorm2d(dims[-1], eps=1e-6), nn.Flatten(1), nn.Linear(dims[-1], num_classes)
            )

        def forward(self, x):
            return self.classifier(self.avgpool(self.features(x)))

    return ConvNeXt()


def yolov5_backbone(width=32, classes=80):
    """YOLOv5 v5.0's stem and neck idioms: Focus (space to depth: the four stride-2 slices
    concatenated), Conv = conv + BN(eps 0.001) + SiLU, a C3 block (two 1x1 branches, a residual
    bottleneck, concat), a strided Conv, SPPF (three chained 5x5 max pools concatenated) and a
    1x1 detection conv per anchor set."""
    torch, nn = _nn()

    def conv(c_in, c_out, kernel=1, stride=1):
        return nn.Sequential(
            nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, bias=False),
            nn.BatchNorm2d(c_out, eps=0.001),
            nn.SiLU(),
        )

    class Focus(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = conv(12, width, 3)

        def forward(self, x):
            parts = [x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]]
            return self.conv(torch.cat(parts, 1))

    class C3(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.cv1, self.cv2, self.cv3 = conv(c, c // 2), conv(c, c // 2), conv(c, c)
            self.m = nn.Sequential(conv(c // 2, c // 2), conv(c // 2, c // 2, 3))

        def forward(self, x):
            y = self.cv1(x)
            return self.cv3(torch.cat([y + self.m(y), self.cv2(x)], 1))

    class SPPF(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.cv1, self.cv2 = conv(c, c // 2), conv(2 * c, c)
            self.m = nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.m(x)
            y2 = self.m(y1)
            return self.cv2(torch.cat([x, y1, y2, self.m(y2)], 1))

    class Backbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(
                Focus(),
                conv(width, 2 * width, 3, 2),
                C3(2 * width),
                conv(2 * width, 4 * width, 3, 2),
                SPPF(4 * width),
            )
            self.detect = nn.Conv2d(4 * width, 3 * (5 + classes), 1)

        def forward(self, x):
            return self.detect(self.body(x))

    return Backbone()


def audio_cnn(channels=(32, 64, 128), classes=35):
    """An M5-style keyword-spotting CNN: strided conv1d front end, conv1d + BatchNorm1d + ReLU +
    MaxPool1d stages, AdaptiveAvgPool1d(1), Linear."""
    torch, nn = _nn()

    class AudioCNN(nn.Module):
        def __init__(self):
            super().__init__()
            layers = [
                nn.Conv1d(1, channels[0], 80, stride=16),
                nn.BatchNorm1d(channels[0]),
                nn.ReLU(),
                nn.MaxPool1d(4),
            ]
            c_in = channels[0]
            for c_out in channels[1:]:
                layers += [
                    nn.Conv1d(c_in, c_out, 3),
                    nn.BatchNorm1d(c_out),
                    nn.ReLU(),
                    nn.MaxPool1d(4),
                ]
                c_in = c_out
            self.features = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool1d(1)
            self.fc = nn.Linear(c_in, classes)

        def forward(self, x):
            x = self.pool(self.features(x))
            return self.fc(x.flatten(1))

    return AudioCNN()


# Import paths: torch.export, the dynamo ONNX exporter, the legacy one at an opset.
TORCH, ONNX_DYNAMO = "torch", "onnx"


def onnx_legacy(opset: int) -> str:
    return f"onnx{opset}"


@dataclass(frozen=True)
class ZooModel:
    """A named architecture, its input shape, NPU-function goal and the import paths tried."""

    name: str
    build: Callable[[], object]
    input_shape: tuple[int, ...]
    max_npu_functions: int = 1
    paths: tuple[str, ...] = (TORCH, ONNX_DYNAMO, onnx_legacy(13), onnx_legacy(17))


IMAGE = (1, 3, 224, 224)
# The multi-head attention of PyTorch's legacy exporter needs opset 14.
TRANSFORMER_PATHS = (TORCH, ONNX_DYNAMO, onnx_legacy(14), onnx_legacy(17))
FULL_SIZE: tuple[ZooModel, ...] = (
    ZooModel("resnet18", lambda: resnet(False, (2, 2, 2, 2)), IMAGE),
    ZooModel("resnet50", lambda: resnet(True, (3, 4, 6, 3)), IMAGE),
    ZooModel("mobilenet_v2", mobilenet_v2, IMAGE),
    ZooModel("mobilenet_v3_small", mobilenet_v3_small, IMAGE),
    ZooModel("efficientnet_b0", efficientnet_b0, IMAGE),
    ZooModel("squeezenet1_1", squeezenet1_1, IMAGE),
    ZooModel("shufflenet_v2_x1_0", shufflenet_v2, IMAGE),
    ZooModel("vit_b_16", vit, IMAGE, 3, TRANSFORMER_PATHS),
    ZooModel("resnet18_batch2", lambda: resnet(False, (2, 2, 2, 2)), (2, 3, 224, 224)),
    ZooModel("googlenet_inception", inception, IMAGE),
    ZooModel("densenet_blocks", densenet, IMAGE),
    ZooModel("convnext_blocks", convnext, IMAGE),
    ZooModel(
        "encoder_post_norm", lambda: transformer_encoder(False), (1, 128, 256), 3, TRANSFORMER_PATHS
    ),
    ZooModel(
        "encoder_pre_norm", lambda: transformer_encoder(True), (1, 128, 256), 3, TRANSFORMER_PATHS
    ),
    ZooModel("audio_m5", audio_cnn, (1, 1, 16000)),
    ZooModel("yolov5_backbone", yolov5_backbone, (1, 3, 320, 320)),
)
FULL_SIZE_BY_NAME = {model.name: model for model in FULL_SIZE}

# The same definitions shrunk for CI (fewer channels, blocks and pixels; the block structure and
# what the importers emit for it are what partitioning depends on), each on the import paths
# whose idioms it exercises.
SMALL_IMAGE = (1, 3, 64, 64)
SMALL: tuple[ZooModel, ...] = (
    ZooModel(
        "resnet50_batch2",
        lambda: resnet(True, (1, 1, 1, 1), num_classes=10, width=8),
        (2, 3, 64, 64),
        paths=(TORCH, ONNX_DYNAMO, onnx_legacy(13)),
    ),
    ZooModel(
        "mobilenet_v2",
        lambda: mobilenet_v2(MOBILENET_V2_SETTINGS[:3], width_mult=0.25, num_classes=10),
        SMALL_IMAGE,
        paths=(onnx_legacy(13),),
    ),
    ZooModel(
        "mobilenet_v3_small",
        lambda: mobilenet_v3_small(
            tuple(MOBILENET_V3_SMALL_SETTINGS[i] for i in (0, 1, 3, 4)), 64, num_classes=10
        ),
        SMALL_IMAGE,
        paths=(onnx_legacy(13), onnx_legacy(17)),
    ),
    ZooModel(
        "efficientnet_b0",
        lambda: efficientnet_b0(
            ((1, 3, 1, 16, 8, 1), (6, 3, 2, 8, 12, 2), (6, 5, 2, 12, 16, 1)), num_classes=10
        ),
        SMALL_IMAGE,
        paths=(onnx_legacy(17),),
    ),
    ZooModel(
        "squeezenet1_1",
        lambda: squeezenet1_1(((4, 8), "M", (8, 16)), num_classes=10),
        SMALL_IMAGE,
        paths=(onnx_legacy(13),),
    ),
    ZooModel(
        "shufflenet_v2",
        lambda: shufflenet_v2((1, 2, 1), (8, 16, 32, 64, 64), num_classes=10),
        SMALL_IMAGE,
        paths=(ONNX_DYNAMO, onnx_legacy(13)),
    ),
    ZooModel(
        "vit",
        lambda: vit(32, 8, layers=2, heads=2, hidden=32, mlp_dim=64, num_classes=10),
        (1, 3, 32, 32),
        3,
        TRANSFORMER_PATHS,
    ),
    ZooModel(
        "convnext_blocks",
        lambda: convnext((16, 32), (1, 1), num_classes=10),
        SMALL_IMAGE,
        paths=(ONNX_DYNAMO, onnx_legacy(13)),
    ),
    ZooModel(
        "densenet_blocks",
        lambda: densenet(8, (2, 2), 16, 2, num_classes=10),
        SMALL_IMAGE,
        paths=(TORCH, onnx_legacy(17)),
    ),
    ZooModel("googlenet_inception", lambda: inception(10), SMALL_IMAGE, paths=(onnx_legacy(13),)),
    ZooModel(
        "encoder_post_norm",
        lambda: transformer_encoder(False, 32, 4, 64, 2),
        (1, 16, 32),
        3,
        (TORCH, ONNX_DYNAMO, onnx_legacy(14)),
    ),
    ZooModel(
        "encoder_pre_norm",
        lambda: transformer_encoder(True, 32, 4, 64, 2),
        (1, 16, 32),
        3,
        (TORCH, ONNX_DYNAMO, onnx_legacy(14)),
    ),
    ZooModel(
        "audio_m5", lambda: audio_cnn((8, 16, 16), 10), (1, 1, 4000), paths=(onnx_legacy(13),)
    ),
    ZooModel(
        "yolov5_backbone",
        lambda: yolov5_backbone(8, 3),
        SMALL_IMAGE,
        paths=(TORCH, ONNX_DYNAMO, onnx_legacy(13)),
    ),
)
SMALL_BY_NAME = {model.name: model for model in SMALL}


def import_model(model: ZooModel, path: str, seed: int = 0):
    """(Relax module, input, reference output) of ``model`` through ``path`` with seeded random
    weights: PyTorch's output for the torch path, onnxruntime's for the ONNX ones."""
    import warnings

    import real_models

    module, data = real_models.instantiate(model, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # exporter deprecation chatter
        if path == TORCH:
            mod = real_models.import_torch(module, data)
            return mod, data, real_models.torch_reference(module, data)
        opset = None if path == ONNX_DYNAMO else int(path.removeprefix("onnx"))
        onnx_bytes = real_models.export_onnx(module, data, opset)
    reference = real_models.onnxruntime_reference(onnx_bytes, data)
    return real_models.import_onnx(onnx_bytes, model.input_shape), data, reference
