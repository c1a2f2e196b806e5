"""Transformer architectures written the way Hugging Face ``transformers`` writes them (random
weights, no ``transformers`` dependency), small enough for CI.

What matters for the NPU is which ops the exporters emit: embeddings gathered with run-time ids,
position ids sliced from an ``arange`` buffer, the additive mask from a tokenizer's
``attention_mask``, causal masks built from ``arange`` comparisons and a ``bool`` ``cumsum``
(``transformers``' packed-sequence detection: TVM imports it as a ``bool`` ``cumsum`` its LLVM
build cannot compile), rotary tables, RMSNorm, SiLU-gated MLPs, Swin's zero-width padding,
relative-position bias gathers and shifted-window masks. ``torch`` is imported lazily.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def _nn():
    import torch
    from torch import nn

    return torch, nn


def _attention(torch, q, k, v, heads: int, bias=None):
    """Multi-head scaled dot product with an optional additive bias; q, k, v are (B, L, D)."""
    batch, length, dim = q.shape
    head = dim // heads

    def split(t):
        return t.reshape(batch, length, heads, head).permute(0, 2, 1, 3)

    scores = split(q) @ split(k).transpose(-1, -2) / head**0.5
    if bias is not None:
        scores = scores + bias
    probs = torch.softmax(scores, dim=-1)
    return (probs @ split(v)).permute(0, 2, 1, 3).reshape(batch, length, dim)


def _causal_bias(torch, ids, dtype, attention_mask=None):
    """transformers' causal mask at a fixed length: position ids from ``arange``, a packed-
    sequence check (``(diff(pos) != 1).cumsum(-1)``, a bool cumsum) and ``where`` to a bias; with
    a tokenizer mask, transformers 5's padding mask ``mask.bool()[batch, None, None, kv]``
    (an ``index_tensor`` by ``arange``s) and-ed in at run time."""
    length = ids.shape[1]
    positions = torch.arange(length).unsqueeze(0)
    previous = torch.cat([positions[:, :1] - 1, positions[:, :-1]], dim=-1)
    packed = ((positions - previous) != 1).cumsum(-1)
    same_sequence = packed[:, :, None] == packed[:, None, :]
    causal = positions[:, None, :] <= positions[:, :, None]
    allowed = (causal & same_sequence)[:, None, :, :]
    if attention_mask is not None:
        batch = torch.arange(ids.shape[0])[:, None, None, None]
        kv = torch.arange(length)[None, None, None, :]
        allowed = allowed & attention_mask.bool()[batch, kv]
    zero = torch.zeros((), dtype=dtype)
    return torch.where(allowed, zero, torch.finfo(dtype).min)


def bert_encoder(vocab: int = 40, dim: int = 32, heads: int = 2, layers: int = 2) -> object:
    """BERT: token + position (sliced buffer) + type embeddings, LayerNorm, post-norm encoder
    layers with the additive mask ``(1 - attention_mask) * finfo.min``, a tanh pooler."""
    torch, nn = _nn()

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.ffn = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

        def forward(self, x, bias):
            x = self.norm1(
                x + self.o(_attention(torch, self.q(x), self.k(x), self.v(x), heads, bias))
            )
            return self.norm2(x + self.ffn(x))

    class Bert(nn.Module):
        def __init__(self, max_positions: int = 64):
            super().__init__()
            self.words = nn.Embedding(vocab, dim)
            self.positions = nn.Embedding(max_positions, dim)
            self.types = nn.Embedding(2, dim)
            self.register_buffer(
                "position_ids", torch.arange(max_positions).expand((1, -1)), persistent=False
            )
            self.register_buffer(
                "token_type_ids", torch.zeros(1, max_positions, dtype=torch.long), persistent=False
            )
            self.norm = nn.LayerNorm(dim)
            self.layers = nn.ModuleList(Layer() for _ in range(layers))
            self.pooler = nn.Linear(dim, dim)

        def forward(self, input_ids, attention_mask):
            length = input_ids.shape[1]
            x = self.words(input_ids) + self.types(self.token_type_ids[:, :length])
            x = self.norm(x + self.positions(self.position_ids[:, :length]))
            mask = attention_mask[:, None, None, :].to(x.dtype)
            bias = (1.0 - mask) * torch.finfo(x.dtype).min
            for layer in self.layers:
                x = layer(x, bias)
            return torch.tanh(self.pooler(x[:, 0]))

    return Bert()


def gpt2_decoder(vocab: int = 40, dim: int = 32, heads: int = 2, layers: int = 2) -> object:
    """GPT-2: token + learned position embeddings, pre-norm blocks with the causal mask of
    :func:`_causal_bias`, GELU (tanh) MLP, final LayerNorm and a tied LM head."""
    torch, nn = _nn()

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.mlp = nn.Sequential(
                nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim)
            )

        def forward(self, x, bias):
            q, k, v = self.qkv(self.norm1(x)).split(dim, dim=-1)
            x = x + self.proj(_attention(torch, q, k, v, heads, bias))
            return x + self.mlp(self.norm2(x))

    class GPT2(nn.Module):
        def __init__(self, max_positions: int = 64):
            super().__init__()
            self.words = nn.Embedding(vocab, dim)
            self.positions = nn.Embedding(max_positions, dim)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.norm = nn.LayerNorm(dim)

        def forward(self, input_ids, attention_mask):
            length = input_ids.shape[1]
            x = self.words(input_ids) + self.positions(torch.arange(length).unsqueeze(0))
            bias = _causal_bias(torch, input_ids, x.dtype, attention_mask)
            for block in self.blocks:
                x = block(x, bias)
            return self.norm(x) @ self.words.weight.T

    return GPT2()


def llama_block(dim: int = 32, heads: int = 2, hidden: int = 64) -> object:
    """A Llama decoder layer on embeddings: RMSNorm, rotary embeddings (inv_freq buffer, cos /
    sin of position x frequency, rotate-half by slicing), causal mask, SiLU-gated MLP."""
    torch, nn = _nn()
    head = dim // heads

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.rand(dim) + 0.5)

        def forward(self, x):
            variance = x.pow(2).mean(-1, keepdim=True)
            return self.weight * (x * torch.rsqrt(variance + 1e-6))

    def rotate_half(x):
        return torch.cat((-x[..., head // 2 :], x[..., : head // 2]), dim=-1)

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = RMSNorm(), RMSNorm()
            self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(4))
            self.gate, self.up = (
                nn.Linear(dim, hidden, bias=False),
                nn.Linear(dim, hidden, bias=False),
            )
            self.down = nn.Linear(hidden, dim, bias=False)
            inv_freq = 1.0 / (10000 ** (torch.arange(0, head, 2).float() / head))
            self.register_buffer("inv_freq", inv_freq, persistent=False)

        def forward(self, x):
            batch, length, _ = x.shape
            positions = torch.arange(length).unsqueeze(0).float()
            freqs = (self.inv_freq[None, :, None] @ positions[:, None, :]).transpose(1, 2)
            angles = torch.cat((freqs, freqs), dim=-1)
            cos, sin = angles.cos()[:, None], angles.sin()[:, None]

            def split(t):
                return t.reshape(batch, length, heads, head).transpose(1, 2)

            h = self.norm1(x)
            q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            scores = q @ k.transpose(-1, -2) / head**0.5 + _causal_bias(torch, x, x.dtype)
            attended = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(x.shape)
            x = x + self.o(attended)
            h = self.norm2(x)
            return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))

    return Llama()


def swin_block(dim: int = 16, heads: int = 2, window: int = 4, size: int = 8) -> object:
    """A shifted-window Swin block on (B, H*W, C): zero-width padding to whole windows,
    roll by half a window, window partition, attention with a relative-position bias gathered
    by a constant index buffer plus the shifted-window mask, reverse and MLP."""
    torch, nn = _nn()
    shift = window // 2
    tokens = window * window

    coords = np.stack(np.meshgrid(np.arange(window), np.arange(window), indexing="ij")).reshape(
        2, -1
    )
    relative = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0) + window - 1
    index = relative[..., 0] * (2 * window - 1) + relative[..., 1]

    region = np.zeros((size, size), dtype=np.int64)
    bounds = (slice(0, -window), slice(-window, -shift), slice(-shift, None))
    for count, (h, w) in enumerate((h, w) for h in bounds for w in bounds):
        region[h, w] = count
    windows = region.reshape(size // window, window, size // window, window)
    windows = windows.transpose(0, 2, 1, 3).reshape(-1, tokens)

    class Swin(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.1)
            self.register_buffer("index", torch.from_numpy(index.reshape(-1)), persistent=False)
            self.register_buffer("windows", torch.from_numpy(windows), persistent=False)
            self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

        def forward(self, x):
            batch = x.shape[0]
            h = self.norm1(x).view(batch, size, size, dim)
            h = nn.functional.pad(h, (0, 0, 0, 0, 0, 0))  # already whole windows
            h = torch.roll(h, shifts=(-shift, -shift), dims=(1, 2))
            h = h.view(batch, size // window, window, size // window, window, dim)
            h = h.permute(0, 1, 3, 2, 4, 5).reshape(-1, tokens, dim)
            count = h.shape[0]
            q, k, v = (
                t.reshape(count, tokens, heads, dim // heads).transpose(1, 2)
                for t in self.qkv(h).split(dim, dim=-1)
            )
            bias = self.table[self.index].view(tokens, tokens, heads).permute(2, 0, 1)
            mask = self.windows[:, None, :] - self.windows[:, :, None]
            mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
            scores = q @ k.transpose(-1, -2) / (dim // heads) ** 0.5 + bias[None]
            scores = scores + mask[:, None].to(scores.dtype)
            h = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(count, tokens, dim)
            h = self.proj(h).view(batch, size // window, size // window, window, window, dim)
            h = h.permute(0, 1, 3, 2, 4, 5).reshape(batch, size, size, dim)
            h = torch.roll(h, shifts=(shift, shift), dims=(1, 2)).reshape(batch, size * size, dim)
            x = x + h
            return x + self.mlp(self.norm2(x))

    return Swin()


@dataclass(frozen=True)
class TransformerModel:
    name: str
    build: Callable[[], object]
    # Input name -> (shape, kind): "ids" (int64 in [0, vocab)), "mask" (int64 0/1), "float".
    inputs: tuple[tuple[str, tuple[int, ...], str], ...]


VOCAB = 40
MODELS: tuple[TransformerModel, ...] = (
    TransformerModel(
        "bert", bert_encoder, (("input_ids", (1, 16), "ids"), ("attention_mask", (1, 16), "mask"))
    ),
    TransformerModel(
        "gpt2", gpt2_decoder, (("input_ids", (1, 16), "ids"), ("attention_mask", (1, 16), "mask"))
    ),
    TransformerModel("llama", llama_block, (("x", (1, 16, 32), "float"),)),
    TransformerModel("swin", swin_block, (("x", (1, 64, 16), "float"),)),
)
MODELS_BY_NAME = {model.name: model for model in MODELS}


def instantiate(model: TransformerModel, seed: int = 0) -> tuple[object, list[np.ndarray]]:
    """The module in eval mode with seeded weights, and seeded inputs (a mask ending in padding)."""
    torch, _ = _nn()
    torch.manual_seed(seed)
    module = model.build().eval()
    rng = np.random.default_rng(seed)
    data = []
    for _, shape, kind in model.inputs:
        if kind == "ids":
            data.append(rng.integers(0, VOCAB, size=shape, dtype=np.int64))
        elif kind == "mask":
            mask = np.ones(shape, dtype=np.int64)
            mask[..., shape[-1] * 3 // 4 :] = 0
            data.append(mask)
        else:
            data.append(rng.standard_normal(shape).astype("float32"))
    return module, data


def layered_bert(layers: int, seed: int = 0) -> tuple[object, list[np.ndarray], list[str]]:
    """The BERT-style encoder with ``layers`` layers: (module, seeded inputs, input names)."""
    base = MODELS_BY_NAME["bert"]
    model = TransformerModel("bert", functools.partial(bert_encoder, layers=layers), base.inputs)
    module, data = instantiate(model, seed)
    return module, data, [name for name, _, _ in model.inputs]


def quantized_bert(layers: int, directory, quantize: Callable) -> tuple[bytes, list[np.ndarray]]:
    """``layered_bert(layers)`` exported to ``directory/f.onnx`` and quantized by
    ``quantize(float_path, int8_path, data)`` into ``directory/q.onnx``: (its bytes, inputs)."""
    import warnings

    module, data, names = layered_bert(layers)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # exporter and quantizer chatter
        (directory / "f.onnx").write_bytes(export_onnx(module, data, names))
        quantize(str(directory / "f.onnx"), str(directory / "q.onnx"), data)
    return (directory / "q.onnx").read_bytes(), data


def torch_reference(module: object, data: list[np.ndarray]) -> np.ndarray:
    torch, _ = _nn()
    with torch.no_grad():
        return module(*(torch.from_numpy(d) for d in data)).numpy()


def import_torch(module: object, data: list[np.ndarray]):
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    args = tuple(torch.from_numpy(d) for d in data)
    exported = torch.export.export(module, args)
    return from_exported_program(exported, keep_params_as_input=False)


def export_onnx(module: object, data: list[np.ndarray], names: list[str]) -> bytes:
    import io

    import torch

    buffer = io.BytesIO()
    args = tuple(torch.from_numpy(d) for d in data)
    torch.onnx.export(module, args, buffer, dynamo=True, input_names=names, verbose=False)
    return buffer.getvalue()


def onnxruntime_reference(onnx_bytes: bytes, names: list[str], data: list[np.ndarray]):
    import onnxruntime

    session = onnxruntime.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    return session.run(None, dict(zip(names, data, strict=True)))[0]


def import_onnx(onnx_bytes: bytes, names: list[str], data: list[np.ndarray]):
    import onnx
    from tvm.relax.frontend.onnx import from_onnx

    shapes = {name: list(d.shape) for name, d in zip(names, data, strict=True)}
    dtypes = {name: str(d.dtype) for name, d in zip(names, data, strict=True)}
    return from_onnx(onnx.load_from_string(onnx_bytes), shape_dict=shapes, dtype_dict=dtypes)
