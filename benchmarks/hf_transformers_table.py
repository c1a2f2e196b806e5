"""Prints the Hugging Face table of docs/supported-models.md: models of the ``transformers``
library (5.x, not a dependency of the package or of CI: install it to run this) built from
their config classes with random weights, batch 1, exported with ``torch.export`` (with
transformers' cache pytrees registered, so decoders export with their key / value cache),
imported with :func:`example_npu.frontend.from_exported_program`, partitioned for the NPU and
compared with PyTorch on the first output (the last hidden state). ``--path onnx`` exports the
same models with ``torch.onnx.export`` (the dynamo exporter, onnxscript), loads the file with
:func:`example_npu.load_model` and compares with onnxruntime instead.

    .venv/bin/python benchmarks/hf_transformers_table.py [--path torch|onnx] [--set issue|more]
        [--only NAME ...]

Text models get 128 tokens, the last 20 of them padding in the tokenizer mask. MobileViT gets
PyTorch's default initialisation (see ``mobilevit``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import example_npu
import numpy as np
import tvm
from example_npu.frontend import from_exported_program
from example_npu.partition.report import partition_with_report
from tvm import relax

HEADER = (
    "| model | input | NPU functions | ops on the CPU | max rel diff |\n"
    "| --- | --- | --- | --- | --- |"
)
TOKENS, PADDING = 128, 20


def _text(vocab: int) -> tuple[tuple, dict, str]:
    import torch

    ids = torch.randint(0, vocab, (1, TOKENS))
    mask = torch.ones(1, TOKENS, dtype=torch.long)
    mask[:, TOKENS - PADDING :] = 0
    return (ids,), {"attention_mask": mask}, f"{TOKENS} tokens, {PADDING} padded"


def _image(size: int, channels: int = 3) -> tuple[tuple, dict, str]:
    import torch

    return (torch.randn(1, channels, size, size),), {}, f"1x{channels}x{size}x{size}"


def _models() -> dict[str, Callable[[], tuple]]:
    import torch
    import transformers as hf

    def llama():
        config = hf.LlamaConfig(
            hidden_size=256,
            intermediate_size=688,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            vocab_size=1000,
        )
        return hf.LlamaModel(config), *_text(1000)

    def mobilevit():
        # transformers initialises its convolutions with std 0.02, which shrinks MobileViT's
        # output to ~1e-40 (float32 denormals: PyTorch's own float32 result is 12% off its
        # float64 one); PyTorch's default initialisation keeps it at ~0.07 (8e-7 from float64).
        model = hf.MobileViTModel(hf.MobileViTConfig())
        for module in model.modules():
            if hasattr(module, "reset_parameters"):
                module.reset_parameters()
        return model, *_image(256)

    def whisper_encoder():
        encoder = hf.WhisperModel(hf.WhisperConfig()).encoder  # whisper-tiny's sizes
        return encoder, (torch.randn(1, 80, 3000),), {}, "80 mel x 3000 frames"

    return {
        "BERT-base": lambda: (hf.BertModel(hf.BertConfig()), *_text(30522)),
        "DistilBERT": lambda: (hf.DistilBertModel(hf.DistilBertConfig()), *_text(30522)),
        "GPT-2 small": lambda: (hf.GPT2Model(hf.GPT2Config()), *_text(50257)),
        "Llama (2 layers, hidden 256)": llama,
        "ViT-B/16": lambda: (hf.ViTModel(hf.ViTConfig()), *_image(224)),
        "Whisper-tiny encoder": whisper_encoder,
        "Swin-tiny": lambda: (hf.SwinModel(hf.SwinConfig()), *_image(224)),
        "ConvNeXt-tiny": lambda: (hf.ConvNextModel(hf.ConvNextConfig()), *_image(224)),
        "MobileViT-small": mobilevit,
    }


def _positional(model, names: list[str]):
    """``model`` as a module of positional tensors returning its first output: the ONNX exporter
    takes positional inputs (the tokenizer mask second, named ``names``)."""
    import torch

    class Positional(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, first, *rest):
            return _first_tensor(self.model(first, **dict(zip(names, rest, strict=True))))

    return Positional().eval()


def _more_models() -> dict[str, Callable[[], tuple]]:
    """Families beyond the nine of the issue, small configurations (2 layers where the config
    has a depth), to see what other architectures bring (``--set more``)."""
    import torch
    import transformers as hf

    layers = {"num_hidden_layers": 2}
    decoder = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4}

    def text(model, config, **options):
        return lambda: (model(config(vocab_size=1000, **options)), *_text(1000))

    return {
        "RoBERTa": text(hf.RobertaModel, hf.RobertaConfig, **layers),
        "ALBERT": text(hf.AlbertModel, hf.AlbertConfig, **layers),
        "ELECTRA": text(hf.ElectraModel, hf.ElectraConfig, **layers),
        "Qwen2": text(hf.Qwen2Model, hf.Qwen2Config, num_key_value_heads=2, **decoder, **layers),
        "Mistral": text(
            hf.MistralModel, hf.MistralConfig, num_key_value_heads=2, **decoder, **layers
        ),
        "Phi": text(hf.PhiModel, hf.PhiConfig, **decoder, **layers),
        "GPT-Neo": text(
            hf.GPTNeoModel,
            hf.GPTNeoConfig,
            hidden_size=256,
            num_layers=2,
            num_heads=4,
            attention_types=[[["global", "local"], 1]],
        ),
        "T5 encoder": text(
            hf.T5EncoderModel, hf.T5Config, num_layers=2, d_model=256, d_ff=512, num_heads=4
        ),
        "DeiT": lambda: (hf.DeiTModel(hf.DeiTConfig(**layers)), *_image(224)),
        "BEiT": lambda: (hf.BeitModel(hf.BeitConfig(**layers)), *_image(224)),
        "CLIP vision": lambda: (hf.CLIPVisionModel(hf.CLIPVisionConfig(**layers)), *_image(224)),
        "Segformer": lambda: (hf.SegformerModel(hf.SegformerConfig()), *_image(128)),
        "Wav2Vec2": lambda: (
            hf.Wav2Vec2Model(hf.Wav2Vec2Config(**layers)),
            (torch.randn(1, 16000),),
            {},
            "16000 samples",
        ),
        "ResNet-50": lambda: (hf.ResNetModel(hf.ResNetConfig()), *_image(224)),
    }


def _first_tensor(output):
    while not hasattr(output, "shape"):
        output = output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0]
    return output


def _first(output) -> np.ndarray:
    return _first_tensor(output).numpy()


def _torch_path(model, args, kwargs):
    """(partitioned module, report, reference output) through torch.export."""
    import torch
    from transformers.exporters.exporter_dynamo import register_cache_pytrees_for_model

    register_cache_pytrees_for_model(model)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = _first(model(*args, **kwargs))
        program = torch.export.export(model, args, kwargs)
    partitioned, report = partition_with_report(from_exported_program(program))
    return partitioned, report, reference


def _onnx_path(model, args, kwargs):
    """(partitioned module, report, onnxruntime's output) through an ONNX file."""
    import onnxruntime
    import torch

    wrapped = _positional(model, list(kwargs))
    inputs = (*args, *kwargs.values())
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "model.onnx"
        with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(wrapped, inputs, path, dynamo=True, external_data=False)
        session = onnxruntime.InferenceSession(str(path))
        feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), inputs, strict=True)}
        reference = session.run(None, feeds)[0]
        partitioned, report = partition_with_report(example_npu.load_model(path).mod)
    return partitioned, report, reference


def measure(name: str, build: Callable[[], tuple], path: str = "torch") -> str:
    import torch

    torch.manual_seed(0)
    model, args, kwargs, shape = build()
    model.eval()
    convert = _onnx_path if path == "onnx" else _torch_path
    partitioned, report, reference = convert(model, args, kwargs)
    vm = relax.VirtualMachine(tvm.compile(partitioned, target="llvm"), tvm.cpu())
    inputs = [tvm.runtime.tensor(t.numpy()) for t in (*args, *kwargs.values())]
    out = _first(vm["main"](*inputs))
    relative = float(np.max(np.abs(out - reference)) / np.max(np.abs(reference)))
    cpu = sum(report.cpu_ops.values())
    cpu_text = str(cpu) + (f" ({', '.join(sorted(report.cpu_ops))})" if cpu else "")
    return f"| {name} | {shape} | {len(report.npu_functions)} | {cpu_text} | {relative:.2g} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="model names (default: all)")
    parser.add_argument("--path", choices=("torch", "onnx"), default="torch")
    parser.add_argument(
        "--set", choices=("issue", "more"), default="issue", help="the nine, or other families"
    )
    options = parser.parse_args()
    print(HEADER)
    models = _models() if options.set == "issue" else _more_models()
    for name, build in models.items():
        if not options.only or name in options.only:
            print(measure(name, build, options.path), flush=True)


if __name__ == "__main__":
    main()
