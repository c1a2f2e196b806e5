"""Measures a Hugging Face BERT-base (``transformers`` 5.x, not a dependency of the package or of
CI: install it to run this; config defaults, random weights, batch 1, 128 tokens, the last 20
padding) exported with ``torch.onnx.export`` (dynamo), quantized by onnxruntime's
``quantize_dynamic`` (``MatMulInteger`` with run-time ``DynamicQuantizeLinear`` activations),
loaded with :func:`example_npu.load_model` and partitioned for the NPU. Prints the NPU functions,
the ops left on the CPU (with the partitioner's reasons), the share of the model's MatMuls that are
integer (in the ONNX graph and on the NPU), the time of the first inference (which compiles the
NPU functions for its run-time zero points) and of later ones against onnxruntime's, and the
largest difference from onnxruntime.

    .venv/bin/python benchmarks/hf_bert_dynamic_int8.py [--layers N]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

import example_npu
import numpy as np
import onnx
import onnxruntime
import tvm
from example_npu.partition.report import partition_with_report
from onnxruntime.quantization import quantize_dynamic
from tvm import relax

TOKENS, PADDING = 128, 20


def main() -> None:
    import torch
    import transformers as hf

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    options = parser.parse_args()
    torch.manual_seed(0)
    model = hf.BertModel(hf.BertConfig(num_hidden_layers=options.layers)).eval()
    ids = torch.randint(0, model.config.vocab_size, (1, TOKENS))
    mask = torch.ones(1, TOKENS, dtype=torch.long)
    mask[:, TOKENS - PADDING :] = 0

    class Hidden(torch.nn.Module):
        def forward(self, input_ids, attention_mask):
            return model(input_ids, attention_mask=attention_mask).last_hidden_state

    with tempfile.TemporaryDirectory() as scratch:
        float_path, int8_path = Path(scratch) / "f.onnx", Path(scratch) / "q.onnx"
        with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Hidden(),
                (ids, mask),
                float_path,
                dynamo=True,
                external_data=False,
                input_names=["input_ids", "attention_mask"],
            )
            quantize_dynamic(str(float_path), str(int8_path))
        nodes = Counter(node.op_type for node in onnx.load(int8_path).graph.node)
        feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
        reference = onnxruntime.InferenceSession(str(int8_path)).run(None, feeds)[0]
        start = time.perf_counter()
        partitioned, report = partition_with_report(example_npu.load_model(int8_path).mod)
        vm = relax.VirtualMachine(tvm.compile(partitioned, target="llvm"), tvm.cpu())
        compile_seconds = time.perf_counter() - start
        session = onnxruntime.InferenceSession(str(int8_path))
        ort_seconds = min(_seconds(lambda: session.run(None, feeds)) for _ in range(5))
    inputs = [tvm.runtime.tensor(t) for t in feeds.values()]
    # The first call compiles each NPU function for the zero points DynamicQuantizeLinear
    # computes (src/graph/runtime_params.h); later calls with those values reuse the programs.
    first = _seconds(lambda: vm["main"](*inputs))
    seconds = min(_seconds(lambda: vm["main"](*inputs)) for _ in range(3))
    # Other token ids: other activations, other run-time zero points.
    others = []
    for seed in range(3):
        generator = torch.Generator().manual_seed(seed + 1)
        other = torch.randint(0, model.config.vocab_size, (1, TOKENS), generator=generator)
        tensors = [tvm.runtime.tensor(other.numpy()), inputs[1]]
        others.append(_seconds(lambda tensors=tensors: vm["main"](*tensors)))
        others.append(_seconds(lambda tensors=tensors: vm["main"](*tensors)))
    out = vm["main"](*inputs).numpy()
    integer = nodes["MatMulInteger"]
    print(f"ONNX nodes: {dict(nodes.most_common())}")
    print(report.table())
    print(
        f"BERT-base {options.layers} layers, quantize_dynamic: "
        f"{len(report.npu_functions)} NPU functions, {sum(report.cpu_ops.values())} CPU ops; "
        f"{integer} of {integer + nodes['MatMul']} ONNX MatMuls integer (MatMulInteger); "
        f"matmuls on the NPU {report.npu_ops['relax.matmul']}, on the CPU "
        f"{report.cpu_ops['relax.matmul']}; "
        f"compile {compile_seconds:.0f} s, first inference {first:.2f} s, then {seconds:.3f} s, "
        f"other inputs {', '.join(f'{t:.2f}' for t in others)} s "
        f"(onnxruntime {ort_seconds:.3f} s); "
        f"max |diff| vs onnxruntime {np.max(np.abs(out - reference)):.3g} "
        f"(max |out| {np.max(np.abs(reference)):.3g})"
    )


def _seconds(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
