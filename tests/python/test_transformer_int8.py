"""An int8 transformer as onnxruntime quantizes it: the BERT-style encoder of
transformer_models.py through the dynamo ONNX exporter and ``quantize_static`` (QDQ, per-channel
int8 weights, int8 activations, calibrated on random token ids), imported with ``from_onnx``.
Checked against TVM's CPU build of the same QDQ graph: the NPU's output is bit-equal."""

from __future__ import annotations

from collections import Counter

import example_npu  # noqa: F401  # registers patterns, codegen and runtime
import numpy as np
import onnx
import pytest
import transformer_models
import tvm
from example_npu.partition.report import partition_with_report
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
from spec_models import npu_ops
from tvm import relax

LAYERS = 2
SAMPLES = 3


class TokenCalibration(CalibrationDataReader):
    """Random token ids with the model's own attention mask."""

    def __init__(self, data: list[np.ndarray], count: int = 8, vocab: int = 40):
        rng = np.random.default_rng(1)
        self.batches = iter(
            {
                "input_ids": rng.integers(0, vocab, data[0].shape, dtype=np.int64),
                "attention_mask": data[1],
            }
            for _ in range(count)
        )

    def get_next(self):
        return next(self.batches, None)


@pytest.fixture(scope="module")
def int8_bert(tmp_path_factory):
    """(the imported QDQ module, its inputs, the onnx node counts)."""
    onnx_bytes, data = transformer_models.quantized_bert(
        LAYERS,
        tmp_path_factory.mktemp("int8_bert"),
        lambda float_path, int8_path, data: quantize_static(
            float_path,
            int8_path,
            TokenCalibration(data),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
        ),
    )
    names = ["input_ids", "attention_mask"]
    nodes = Counter(node.op_type for node in onnx.load_from_string(onnx_bytes).graph.node)
    return transformer_models.import_onnx(onnx_bytes, names, data), data, nodes


def test_int8_bert_is_bit_equal_to_tvms_build(int8_bert, summary_line):
    mod, data, nodes = int8_bert
    partitioned, report = partition_with_report(mod)
    assert len(report.npu_functions) == 1, report.table()
    assert not report.cpu_ops, report.table()  # the int32 LayerNorm biases fold
    ops = Counter(npu_ops(partitioned))
    # Every MatMul and Gemm is an integer matmul: the Linear layers' and attention's q.k^T, p.v.
    assert ops["qnn.matmul"] == nodes["MatMul"] + nodes["Gemm"], ops
    assert "matmul" not in ops, ops
    machines = [relax.VirtualMachine(tvm.compile(m, "llvm"), tvm.cpu()) for m in (partitioned, mod)]
    rng = np.random.default_rng(7)
    for _ in range(SAMPLES):
        inputs = [rng.integers(0, 40, data[0].shape, dtype=np.int64), data[1]]
        npu, cpu = (vm["main"](*map(tvm.runtime.tensor, inputs)).numpy() for vm in machines)
        np.testing.assert_array_equal(npu, cpu)
    summary_line(
        f"int8 BERT-style ({LAYERS} layers, onnxruntime QDQ): 1 NPU function, "
        f"0 CPU ops, {ops['qnn.matmul']} integer matmuls "
        f"(attention's included), bit-equal to TVM's CPU build on {SAMPLES} inputs"
    )
