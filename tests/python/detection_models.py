"""Detection and segmentation architectures written out in PyTorch (random weights, shrunk for
CI): a YOLO-style backbone + FPN/PAN neck + detect head, a U-Net, a DeepLab ASPP head and a
VAE-decoder block. Their layer idioms are what partitioning depends on: SiLU convs, nearest 2x
upsampling and skip concats (YOLO), max-pool encoder and transposed-conv decoder (U-Net), atrous
convs, an image-pooling branch and bilinear resizing back to the input size (DeepLab), GroupNorm,
InstanceNorm, leaky ReLU and PReLU (VAE decoder), and a detect head's top-k candidate selection
(sigmoid class scores, best class per anchor, ``torch.topk`` over the anchors: ONNX TopK).
``torch`` is imported lazily.
"""

from __future__ import annotations

from zoo_models import ONNX_DYNAMO, TORCH, ZooModel


def _nn():
    import torch
    from torch import nn

    return torch, nn


def _conv_bn(nn, c_in: int, c_out: int, kernel: int = 3, stride: int = 1, dilation: int = 1):
    return [
        nn.Conv2d(c_in, c_out, kernel, stride, dilation * (kernel // 2), dilation, bias=False),
        nn.BatchNorm2d(c_out),
    ]


def yolo_neck(torch, model, p3, p4, p5):
    """The YOLOv8 neck both YOLO models here share: an FPN (nearest 2x upsample of the coarser
    level, concat, C2f; top-down) then a PAN (stride-2 conv, concat, C2f; bottom-up) over the
    backbone's levels ``p3``, ``p4``, ``p5``. ``model`` has ``up``, ``fpn4``, ``fpn3``,
    ``down3``, ``pan4``, ``down4`` and ``pan5``; returns the head's inputs ``n3, n4, n5``."""
    n4 = model.fpn4(torch.cat([model.up(p5), p4], 1))
    n3 = model.fpn3(torch.cat([model.up(n4), p3], 1))
    n4 = model.pan4(torch.cat([model.down3(n3), n4], 1))
    n5 = model.pan5(torch.cat([model.down4(n4), p5], 1))
    return n3, n4, n5


def yolo(width: int = 8, classes: int = 3):
    """YOLOv8-style: Conv = conv + BN + SiLU, C2f blocks (split, bottlenecks, concat), SPPF, an
    FPN (nearest 2x upsample + concat) and PAN (strided conv + concat) neck, and a decoupled
    detect head per level whose outputs are flattened and concatenated (no NMS)."""
    torch, nn = _nn()

    def conv(c_in, c_out, kernel=1, stride=1):
        return nn.Sequential(*_conv_bn(nn, c_in, c_out, kernel, stride), nn.SiLU())

    class C2f(nn.Module):
        def __init__(self, c_in, c_out):
            super().__init__()
            self.cv1, self.cv2 = conv(c_in, c_out), conv(3 * (c_out // 2), c_out)
            half = c_out // 2
            self.m = nn.Sequential(conv(half, half, 3), conv(half, half, 3))

        def forward(self, x):
            a, b = self.cv1(x).chunk(2, 1)
            return self.cv2(torch.cat([a, b, b + self.m(b)], 1))

    class SPPF(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.cv1, self.cv2, self.m = conv(c, c // 2), conv(2 * c, c), nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.m(x)
            y2 = self.m(y1)
            return self.cv2(torch.cat([x, y1, y2, self.m(y2)], 1))

    w = width

    class Yolo(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(conv(3, w, 3, 2), conv(w, 2 * w, 3, 2), C2f(2 * w, 2 * w))
            self.p4 = nn.Sequential(conv(2 * w, 4 * w, 3, 2), C2f(4 * w, 4 * w))
            self.p5 = nn.Sequential(conv(4 * w, 4 * w, 3, 2), SPPF(4 * w))
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.fpn4, self.fpn3 = C2f(8 * w, 4 * w), C2f(6 * w, 2 * w)
            self.down3, self.pan4 = conv(2 * w, 2 * w, 3, 2), C2f(6 * w, 4 * w)
            self.down4, self.pan5 = conv(4 * w, 4 * w, 3, 2), C2f(8 * w, 4 * w)
            self.box = nn.ModuleList(
                nn.Sequential(conv(c, w, 3), nn.Conv2d(w, 4, 1)) for c in (2 * w, 4 * w, 4 * w)
            )
            self.cls = nn.ModuleList(
                nn.Sequential(conv(c, w, 3), nn.Conv2d(w, classes, 1))
                for c in (2 * w, 4 * w, 4 * w)
            )

        def forward(self, x):
            p3 = self.stem(x)
            p4 = self.p4(p3)
            levels = yolo_neck(torch, self, p3, p4, self.p5(p4))
            outs = [
                torch.cat([box(f), cls(f).sigmoid()], 1).flatten(2)
                for f, box, cls in zip(levels, self.box, self.cls, strict=True)
            ]
            return torch.cat(outs, 2)

    return Yolo()


def unet(base: int = 8, classes: int = 3):
    """U-Net: double 3x3 conv + BN + ReLU blocks, a max-pool encoder, a decoder of 2x2 stride-2
    transposed convs concatenated with the encoder's skips, PReLU in the bottleneck."""
    torch, nn = _nn()

    def double(c_in, c_out, act=nn.ReLU):
        return nn.Sequential(*_conv_bn(nn, c_in, c_out), act(), *_conv_bn(nn, c_out, c_out), act())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            b = base
            self.enc1, self.enc2 = double(3, b), double(b, 2 * b)
            self.pool = nn.MaxPool2d(2)
            self.bottleneck = nn.Sequential(
                *_conv_bn(nn, 2 * b, 4 * b), nn.PReLU(4 * b), *_conv_bn(nn, 4 * b, 4 * b)
            )
            self.up2, self.dec2 = nn.ConvTranspose2d(4 * b, 2 * b, 2, 2), double(4 * b, 2 * b)
            self.up1, self.dec1 = nn.ConvTranspose2d(2 * b, b, 2, 2), double(2 * b, b)
            self.head = nn.Conv2d(b, classes, 1)

        def forward(self, x):
            e1 = self.enc1(x)
            e2 = self.enc2(self.pool(e1))
            y = self.bottleneck(self.pool(e2))
            y = self.dec2(torch.cat([self.up2(y), e2], 1))
            y = self.dec1(torch.cat([self.up1(y), e1], 1))
            return self.head(y)

    return UNet()


def deeplab(width: int = 8, classes: int = 4):
    """DeepLabV3-style: a strided backbone with an atrous conv, an ASPP head (1x1 conv, 3x3 convs
    at dilations 2 and 3, and image pooling: global average, 1x1 conv, bilinear resize back),
    a 1x1 projection and classifier, and bilinear upsampling to the input size."""
    torch, nn = _nn()
    w = width

    def cbr(c_in, c_out, kernel=3, stride=1, dilation=1):
        return nn.Sequential(*_conv_bn(nn, c_in, c_out, kernel, stride, dilation), nn.ReLU())

    class DeepLab(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(
                cbr(3, w, 3, 2), cbr(w, 2 * w, 3, 2), cbr(2 * w, 2 * w, 3, 1, 2)
            )
            self.branches = nn.ModuleList(
                [cbr(2 * w, w, 1), cbr(2 * w, w, 3, 1, 2), cbr(2 * w, w, 3, 1, 3)]
            )
            self.pooling = nn.Sequential(nn.AdaptiveAvgPool2d(1), cbr(2 * w, w, 1))
            self.project = cbr(4 * w, w, 1)
            self.classifier = nn.Conv2d(w, classes, 1)

        def forward(self, x):
            size = x.shape[-2:]
            f = self.backbone(x)
            pooled = nn.functional.interpolate(
                self.pooling(f), size=f.shape[-2:], mode="bilinear", align_corners=False
            )
            y = torch.cat([branch(f) for branch in self.branches] + [pooled], 1)
            y = self.classifier(self.project(y))
            return nn.functional.interpolate(y, size=size, mode="bilinear", align_corners=False)

    return DeepLab()


def vae_decoder(channels: int = 16, groups: int = 4):
    """A VAE-decoder block (Stable Diffusion's decoder idioms): conv in, a ResNet block of
    GroupNorm + SiLU + conv twice with a skip, nearest 2x upsample + conv, then InstanceNorm +
    leaky ReLU and a conv out."""
    torch, nn = _nn()
    c = channels

    class ResnetBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.GroupNorm(groups, c), nn.GroupNorm(groups, c)
            self.conv1, self.conv2 = nn.Conv2d(c, c, 3, 1, 1), nn.Conv2d(c, c, 3, 1, 1)

        def forward(self, x):
            h = self.conv1(nn.functional.silu(self.norm1(x)))
            return x + self.conv2(nn.functional.silu(self.norm2(h)))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv_in, self.block = nn.Conv2d(4, c, 3, 1, 1), ResnetBlock()
            self.up = nn.Sequential(
                nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(c, c, 3, 1, 1)
            )
            self.norm = nn.InstanceNorm2d(c, affine=True)
            self.act = nn.LeakyReLU(0.2)
            self.conv_out = nn.Conv2d(c, 3, 3, 1, 1)

        def forward(self, z):
            h = self.up(self.block(self.conv_in(z)))
            return self.conv_out(self.act(self.norm(h)))

    def build():
        model = Decoder()
        with torch.no_grad():  # non-trivial affine parameters of the norms
            for norm in (model.block.norm1, model.block.norm2, model.norm):
                norm.weight.uniform_(0.5, 1.5)
                norm.bias.uniform_(-0.2, 0.2)
        return model

    return build()


def topk_head(width: int = 8, classes: int = 4, k: int = 10):
    """A detect head's candidate selection before NMS: a conv backbone, per-anchor class logits,
    sigmoid scores, the best class score per anchor, the k best anchors by score (values and
    int64 indices), returned as one float tensor [scores, anchor ids]."""
    torch, nn = _nn()

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(
                *_conv_bn(nn, 3, width, stride=2), nn.SiLU(), *_conv_bn(nn, width, width, stride=2)
            )
            self.cls = nn.Conv2d(width, classes, 1)

        def forward(self, x):
            logits = self.cls(self.backbone(x)).flatten(2)  # (B, classes, anchors)
            best = logits.sigmoid().max(1).values  # (B, anchors)
            scores, anchors = torch.topk(best, k, dim=-1)
            return torch.cat([scores, anchors.float()], -1)

    return Head()


PATHS = (TORCH, ONNX_DYNAMO)
MODELS: tuple[ZooModel, ...] = (
    ZooModel("yolo_fpn_pan", yolo, (1, 3, 64, 64), paths=PATHS),
    ZooModel("unet", unet, (1, 3, 32, 32), paths=PATHS),
    ZooModel("deeplab_aspp", deeplab, (1, 3, 48, 40), paths=PATHS),
    ZooModel("vae_decoder_block", vae_decoder, (1, 4, 16, 16), paths=PATHS),
    ZooModel("topk_detect_head", topk_head, (1, 3, 32, 32), paths=PATHS),
)
