"""Small model files the CLI tests write: an ONNX CNN (onnx.helper) and a torch.export archive."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_onnx_cnn(path: Path, seed: int = 0) -> Path:
    """conv3x3+bias -> relu -> maxpool -> conv3x3+bias -> relu -> flatten -> gemm -> softmax on
    x[batch, 3, 16, 16], with the batch dimension left open (dim_param "batch")."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        values = rng.standard_normal(shape) / np.sqrt(fan_in)
        return numpy_helper.from_array(values.astype("float32"), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Flatten", ["r2"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    weights = [
        weight("w1", 8, 3, 3, 3),
        weight("b1", 8),
        weight("w2", 16, 8, 3, 3),
        weight("b2", 16),
        weight("wf", 10, 16 * 8 * 8),
        weight("bf", 10),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def write_onnx_mlp(path: Path, dtype: str, seed: int = 0) -> Path:
    """x[batch, 32] -> matmul -> add -> relu -> matmul -> softmax."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    elem = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE}[dtype]
    weights = [
        numpy_helper.from_array(rng.standard_normal(shape).astype(dtype) / 4, name)
        for name, shape in [("w1", (32, 16)), ("b1", (16,)), ("w2", (16, 4))]
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("MatMul", ["r1", "w2"], ["m2"]),
        helper.make_node("Softmax", ["m2"], ["probs"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_mlp",
        [helper.make_tensor_value_info("x", elem, ["batch", 32])],
        [helper.make_tensor_value_info("probs", elem, ["batch", 4])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def onnxruntime_outputs(path: Path, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)


def write_pt2_cnn(path: Path, example: np.ndarray, dynamic_batch: bool) -> np.ndarray:
    """Saves a torch.export archive of a small CNN (conv+relu, maxpool, flatten, linear,
    softmax) and returns PyTorch's output on ``example``. With ``dynamic_batch`` the batch
    dimension is a torch.export.Dim."""
    import torch

    class TinyCNN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.fc = torch.nn.Linear(8 * 8 * 8, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
            return torch.softmax(self.fc(y.flatten(1)), dim=-1)

    torch.manual_seed(0)
    model = TinyCNN().eval()
    if dynamic_batch:
        batch = torch.export.Dim("batch", min=1, max=8)
        trace_input = torch.randn(2, *example.shape[1:])  # a batch of 1 would specialise it
        program = torch.export.export(model, (trace_input,), dynamic_shapes={"x": {0: batch}})
    else:
        program = torch.export.export(model, (torch.from_numpy(example),))
    torch.export.save(program, str(path))
    with torch.no_grad():
        return model(torch.from_numpy(example)).numpy()
