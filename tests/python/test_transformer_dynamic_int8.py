"""A transformer as onnxruntime's ``quantize_dynamic`` writes it: the BERT-style encoder of
transformer_models.py through the dynamo ONNX exporter and ``quantize_dynamic`` (uint8
activations quantized at run time by ``DynamicQuantizeLinear``, int8 weights, ``MatMulInteger``
with the float dequantizing multiply after it), imported with ``from_onnx``.

What runs where (docs/quantization/integer-inference.md): every ``MatMulInteger`` is an integer
matmul on the NPU (its run-time zero point read from the call), and so is every float op and the
run-time min / max / scale / zero point arithmetic of ``DynamicQuantizeLinear`` (its ``round``
included); its float -> uint8 ``quantize`` (scale and zero point not constants) and the cast of
the zero point to uint8 stay on the CPU. Checked: the partition and its reasons, the output
within 1e-6 of TVM's CPU build of the same graph and of onnxruntime's (where its int8 kernels are
exact: onnxruntime_int8.py)."""

from __future__ import annotations

from collections import Counter

import example_npu  # noqa: F401  # registers patterns, codegen and runtime
import numpy as np
import onnx
import onnxruntime_int8
import pytest
import transformer_models
import tvm
from example_npu.partition.report import partition_with_report
from onnxruntime.quantization import quantize_dynamic
from tvm import relax

LAYERS = 2
SAMPLES = 3


@pytest.fixture(scope="module")
def dynamic_bert(tmp_path_factory):
    """(the quantized ONNX bytes, the imported module, its inputs, the onnx node counts)."""
    onnx_bytes, data = transformer_models.quantized_bert(
        LAYERS,
        tmp_path_factory.mktemp("dynamic_bert"),
        lambda float_path, int8_path, _: quantize_dynamic(float_path, int8_path),
    )
    names = ["input_ids", "attention_mask"]
    nodes = Counter(node.op_type for node in onnx.load_from_string(onnx_bytes).graph.node)
    return onnx_bytes, transformer_models.import_onnx(onnx_bytes, names, data), data, nodes


def test_dynamic_int8_bert_runs_its_integer_matmuls_on_the_npu(dynamic_bert, summary_line):
    onnx_bytes, mod, data, nodes = dynamic_bert
    assert nodes["MatMulInteger"] > 0 and nodes["DynamicQuantizeLinear"] > 0, nodes
    partitioned, report = partition_with_report(mod)
    table = report.table()
    # Every MatMulInteger (an int32 matmul of zero-point-shifted operands) is on the NPU.
    assert "relax.matmul" not in report.cpu_ops and "relax.subtract" not in report.cpu_ops, table
    # Each DynamicQuantizeLinear's float -> uint8 quantize and uint8 cast stay on the CPU.
    assert set(report.cpu_ops) == {"relax.quantize", "relax.astype"}, table
    for op in report.cpu_ops:
        assert report.cpu_ops[op] == nodes["DynamicQuantizeLinear"], table
    assert "scale and zero point must be constants" in table, table
    assert report.npu_functions, table
    machines = [relax.VirtualMachine(tvm.compile(m, "llvm"), tvm.cpu()) for m in (partitioned, mod)]
    names = ["input_ids", "attention_mask"]
    rng = np.random.default_rng(7)
    largest = to_cpu = 0.0
    for _ in range(SAMPLES):
        inputs = [rng.integers(0, 40, data[0].shape, dtype=np.int64), data[1]]
        npu, cpu = (vm["main"](*map(tvm.runtime.tensor, inputs)).numpy() for vm in machines)
        # The float ops (LayerNorm, softmax, GELU) on the NPU round differently in the last bits.
        np.testing.assert_allclose(npu, cpu, atol=1e-6)
        to_cpu = max(to_cpu, float(np.max(np.abs(npu - cpu))))
        if not onnxruntime_int8.int8_kernels_exact():
            continue  # its uint8 x int8 sums saturate on this CPU: TVM's build is the reference
        reference = transformer_models.onnxruntime_reference(onnx_bytes, names, inputs)
        np.testing.assert_allclose(npu, reference, atol=1e-5)
        largest = max(largest, float(np.max(np.abs(npu - reference))))
    summary_line(
        f"quantize_dynamic BERT-style ({LAYERS} layers): {len(report.npu_functions)} NPU "
        f"functions, the {nodes['MatMulInteger']} MatMulInteger on the NPU, "
        f"{sum(report.cpu_ops.values())} CPU ops (the run-time uint8 quantize), max |diff| "
        f"{to_cpu:.2g} vs TVM's CPU build, "
        + (
            f"{largest:.2g} vs onnxruntime"
            if onnxruntime_int8.int8_kernels_exact()
            else "onnxruntime's kernels saturate on this CPU"
        )
        + f" on {SAMPLES} inputs"
    )
