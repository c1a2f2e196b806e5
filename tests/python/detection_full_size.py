"""Full-size detection and segmentation architectures written out in PyTorch (random weights,
real channel widths and depths, small inputs for CI): YOLOv8-n with its DFL box decoding (no
NMS), the original U-Net (64 to 1024 channels) and DeepLabV3 on a dilated MobileNetV2 backbone.
``torch`` is imported lazily.
"""

from __future__ import annotations

import itertools

from detection_models import PATHS, _nn, yolo_neck
from zoo_models import ZooModel, _conv_norm_act, mobilenet_v2


def yolov8n(classes: int = 80, reg_max: int = 16, strides: tuple[int, ...] = (8, 16, 32)):
    """Ultralytics YOLOv8-n (depth 0.33, width 0.25): Conv (conv + BN + SiLU), C2f, SPPF, the
    FPN / PAN neck and the decoupled head; the head's output decoded as Ultralytics exports it:
    DFL (softmax over ``reg_max`` bins, 1x1 conv with weights 0..reg_max-1), dist2bbox against
    the anchor grid, times the stride, concatenated with the class sigmoids."""
    torch, nn = _nn()

    class Conv(nn.Sequential):
        def __init__(self, c_in, c_out, kernel=1, stride=1):
            super().__init__(
                nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, bias=False),
                nn.BatchNorm2d(c_out, eps=0.001),
                nn.SiLU(),
            )

    class Bottleneck(nn.Module):
        def __init__(self, c, shortcut):
            super().__init__()
            self.cv1, self.cv2, self.add = Conv(c, c, 3), Conv(c, c, 3), shortcut

        def forward(self, x):
            y = self.cv2(self.cv1(x))
            return x + y if self.add else y

    class C2f(nn.Module):
        def __init__(self, c_in, c_out, n=1, shortcut=False):
            super().__init__()
            self.c = c_out // 2
            self.cv1, self.cv2 = Conv(c_in, 2 * self.c), Conv((2 + n) * self.c, c_out)
            self.m = nn.ModuleList(Bottleneck(self.c, shortcut) for _ in range(n))

        def forward(self, x):
            y = list(self.cv1(x).chunk(2, 1))
            y.extend(m(y[-1]) for m in self.m)
            return self.cv2(torch.cat(y, 1))

    class SPPF(nn.Module):
        def __init__(self, c_in, c_out):
            super().__init__()
            hidden = c_in // 2
            self.cv1, self.cv2 = Conv(c_in, hidden), Conv(4 * hidden, c_out)
            self.m = nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            y = [self.cv1(x)]
            y.extend(self.m(y[-1]) for _ in range(3))
            return self.cv2(torch.cat(y, 1))

    class Detect(nn.Module):
        def __init__(self, channels):
            super().__init__()
            c2, c3 = max(16, channels[0] // 4, 4 * reg_max), max(channels[0], min(classes, 100))
            self.cv2 = nn.ModuleList(
                nn.Sequential(Conv(c, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4 * reg_max, 1))
                for c in channels
            )
            self.cv3 = nn.ModuleList(
                nn.Sequential(Conv(c, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, classes, 1))
                for c in channels
            )
            self.dfl = nn.Conv2d(reg_max, 1, 1, bias=False).requires_grad_(False)
            self.dfl.weight.data[:] = torch.arange(reg_max, dtype=torch.float).view(
                1, reg_max, 1, 1
            )

        def forward(self, features):
            outs = [
                torch.cat([box(f), cls(f)], 1)
                for f, box, cls in zip(features, self.cv2, self.cv3, strict=True)
            ]
            anchors, stride_map = [], []
            for f, stride in zip(features, strides, strict=True):
                h, w = f.shape[2:]
                sy, sx = torch.meshgrid(
                    torch.arange(h, dtype=torch.float) + 0.5,
                    torch.arange(w, dtype=torch.float) + 0.5,
                    indexing="ij",
                )
                anchors.append(torch.stack((sx, sy), -1).view(-1, 2))
                stride_map.append(torch.full((h * w, 1), float(stride)))
            anchor_points = torch.cat(anchors).transpose(0, 1).unsqueeze(0)
            stride_tensor = torch.cat(stride_map).transpose(0, 1)
            x = torch.cat([o.flatten(2) for o in outs], 2)
            box, cls = x.split((4 * reg_max, classes), 1)
            b, _, a = box.shape
            bins = box.view(b, 4, reg_max, a).transpose(2, 1).softmax(1)
            distance = self.dfl(bins).view(b, 4, a)
            lt, rb = distance.chunk(2, 1)
            x1y1, x2y2 = anchor_points - lt, anchor_points + rb
            xywh = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * stride_tensor
            return torch.cat((xywh, cls.sigmoid()), 1)

    class YoloV8n(nn.Module):
        def __init__(self):
            super().__init__()
            self.b0 = nn.Sequential(Conv(3, 16, 3, 2), Conv(16, 32, 3, 2), C2f(32, 32, 1, True))
            self.b1 = nn.Sequential(Conv(32, 64, 3, 2), C2f(64, 64, 2, True))
            self.b2 = nn.Sequential(Conv(64, 128, 3, 2), C2f(128, 128, 2, True))
            self.b3 = nn.Sequential(Conv(128, 256, 3, 2), C2f(256, 256, 1, True), SPPF(256, 256))
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.fpn4, self.fpn3 = C2f(384, 128), C2f(192, 64)
            self.down3, self.pan4 = Conv(64, 64, 3, 2), C2f(192, 128)
            self.down4, self.pan5 = Conv(128, 128, 3, 2), C2f(384, 256)
            self.detect = Detect((64, 128, 256))

        def forward(self, x):
            p3 = self.b1(self.b0(x))
            p4 = self.b2(p3)
            return self.detect(list(yolo_neck(torch, self, p3, p4, self.b3(p4))))

    return YoloV8n()


def unet(channels: tuple[int, ...] = (64, 128, 256, 512, 1024), classes: int = 2):
    """The original U-Net (Ronneberger et al., with 'same' padding and BN as in common ports):
    four max-pool levels, 2x2 stride-2 transposed convs up, skip concats, a 1x1 classifier."""
    torch, nn = _nn()

    def double(c_in, c_out):
        return nn.Sequential(
            *_conv_norm_act(nn, c_in, c_out, act=nn.ReLU),
            *_conv_norm_act(nn, c_out, c_out, act=nn.ReLU),
        )

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            c = channels
            self.down = nn.ModuleList(
                [double(3, c[0])] + [double(a, b) for a, b in itertools.pairwise(c)]
            )
            self.pool = nn.MaxPool2d(2)
            self.ups = nn.ModuleList(
                nn.ConvTranspose2d(b, a, 2, 2) for a, b in itertools.pairwise(c)
            )
            self.decoders = nn.ModuleList(double(b, a) for a, b in itertools.pairwise(c))
            self.head = nn.Conv2d(c[0], classes, 1)

        def forward(self, x):
            skips = []
            for i, block in enumerate(self.down):
                x = block(x if i == 0 else self.pool(x))
                skips.append(x)
            x = skips.pop()
            for up, decoder in reversed(list(zip(self.ups, self.decoders, strict=True))):
                x = decoder(torch.cat([skips.pop(), up(x)], 1))
            return self.head(x)

    return UNet()


def deeplabv3_mobilenet_v2(classes: int = 21, rates: tuple[int, ...] = (12, 24, 36)):
    """DeepLabV3 on MobileNetV2 (output stride 16: the last stride-2 stage dilated instead), the
    ASPP head of torchvision (1x1, three atrous 3x3 and an image-pooling branch at 256 channels,
    1x1 projection), a 3x3 conv, the classifier and bilinear upsampling to the input size."""
    torch, nn = _nn()
    backbone = mobilenet_v2().features[:-1]  # up to the 320-channel block
    for block in backbone[14:]:
        for conv in block.modules():
            if isinstance(conv, nn.Conv2d) and conv.kernel_size == (3, 3):
                conv.stride, conv.dilation, conv.padding = (1, 1), (2, 2), (2, 2)

    def cbr(c_in, c_out, kernel=1, dilation=1):
        return nn.Sequential(
            nn.Conv2d(
                c_in, c_out, kernel, padding=dilation * (kernel // 2), dilation=dilation, bias=False
            ),
            nn.BatchNorm2d(c_out),
            nn.ReLU(),
        )

    class DeepLabV3(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = backbone
            self.branches = nn.ModuleList([cbr(320, 256)] + [cbr(320, 256, 3, r) for r in rates])
            self.pooling = nn.Sequential(nn.AdaptiveAvgPool2d(1), cbr(320, 256))
            self.project = cbr(256 * (len(rates) + 2), 256)
            self.head = nn.Sequential(cbr(256, 256, 3), nn.Conv2d(256, classes, 1))

        def forward(self, x):
            f = self.backbone(x)
            pooled = nn.functional.interpolate(
                self.pooling(f), size=f.shape[-2:], mode="bilinear", align_corners=False
            )
            y = self.project(torch.cat([b(f) for b in self.branches] + [pooled], 1))
            y = self.head(y)
            return nn.functional.interpolate(
                y, size=x.shape[-2:], mode="bilinear", align_corners=False
            )

    return DeepLabV3()


MODELS: tuple[ZooModel, ...] = (
    ZooModel("yolov8n", yolov8n, (1, 3, 64, 64), paths=PATHS),
    ZooModel("unet_full", unet, (1, 3, 32, 32), paths=PATHS),
    ZooModel("deeplabv3_mobilenet_v2", deeplabv3_mobilenet_v2, (1, 3, 64, 64), paths=PATHS),
)
