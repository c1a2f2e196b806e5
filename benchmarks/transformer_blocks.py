"""Transformer architectures the benchmarks build (random weights; the project does not depend on
torchvision or transformers): multi-head self-attention, an encoder layer (pre-norm as ViT,
post-norm as BERT, with an optional additive attention bias) and a ViT of any width.

bench_models.py times a ViT-Ti/16 (``ViT()``), bench_compile.py compiles a ViT-B/16
(``ViT(dim=768, heads=12)``) and a BERT-base made of the same encoder layers.
"""

from __future__ import annotations

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, bias=None):
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        if bias is not None:
            scores = scores + bias
        attn = torch.softmax(scores, -1)
        return self.proj(torch.matmul(attn, v).transpose(1, 2).reshape(b, n, d))


class EncoderBlock(nn.Module):
    """A transformer encoder layer with a GELU MLP of width ``mlp``: pre-norm (ViT) or post-norm
    (BERT); ``bias`` is added to the attention scores (BERT's padding mask)."""

    def __init__(self, dim: int, heads: int, mlp: int, pre_norm: bool = True):
        super().__init__()
        self.pre_norm = pre_norm
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x, bias=None):
        if self.pre_norm:
            x = x + self.attn(self.norm1(x), bias)
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self.attn(x, bias))
        return self.norm2(x + self.mlp(x))


class ViT(nn.Module):
    """ViT/16 on 224x224 images (16x16 patches, a class token): ViT-Ti/16 by default (width 192,
    12 blocks of 3 heads); ViT-B/16 is ``ViT(dim=768, heads=12)``. The MLP is 4x wide unless
    ``mlp`` says otherwise."""

    def __init__(
        self,
        dim: int = 192,
        depth: int = 12,
        heads: int = 3,
        classes: int = 1000,
        mlp: int | None = None,
    ):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 16, 16)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, 197, dim) * 0.02)
        width = mlp or 4 * dim
        self.blocks = nn.Sequential(*[EncoderBlock(dim, heads, width) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])
