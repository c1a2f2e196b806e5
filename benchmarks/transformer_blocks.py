"""Transformer architectures the benchmarks build (random weights; the project does not depend on
torchvision or transformers): multi-head self-attention, an encoder layer (pre-norm as ViT,
post-norm as BERT, with an optional additive attention bias), a ViT of any width and BERT-base.

bench_models.py times a ViT-Ti/16 (``ViT()``), a ViT-B/16 (``ViT(dim=768, heads=12)``) and
BERT-base (``BertBase()``); bench_compile.py compiles the last two.
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


class BertBase(nn.Module):
    """BERT-base: word + position + type embeddings, 12 post-norm layers of width 768 with the
    additive padding mask, a tanh pooler."""

    def __init__(self, vocab: int = 30522, dim: int = 768, depth: int = 12, heads: int = 12):
        super().__init__()
        self.words = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(512, dim)
        self.types = nn.Embedding(2, dim)
        self.norm = nn.LayerNorm(dim)
        self.layers = nn.ModuleList(
            EncoderBlock(dim, heads, 4 * dim, pre_norm=False) for _ in range(depth)
        )
        self.pooler = nn.Linear(dim, dim)

    def forward(self, input_ids, attention_mask):
        length = input_ids.shape[1]
        positions = torch.arange(length).unsqueeze(0)
        x = self.words(input_ids) + self.types(torch.zeros_like(input_ids))
        x = self.norm(x + self.positions(positions))
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, bias)
        return torch.tanh(self.pooler(x[:, 0]))
