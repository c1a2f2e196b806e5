"""Hostile model files for the command line: mutated ONNX, torch.export and TFLite files.

A model file is untrusted input: ``example-npu profile FILE`` must answer any file with a
result (exit 0) or one ``example-npu: error:`` line (exit 2), never a traceback, a crash or a
hang, never run code stored in the file and never read a file the user did not name. The seeds
are small files made here (an ONNX graph written with onnx.helper, a torch.export archive) and
the TFLite files the tests commit. Mutations know the formats: ONNX initializers with huge or
negative dims, external data pointing outside the model's folder, ops swapped for the ones that
allocate (Tile, ConstantOfShape, Expand), boundary attributes; torch.export archives whose
entries are truncated, bit-flipped or replaced by a pickle that would write a marker file (the
target checks that it was not written); and, for every format, truncation and byte flips.

Payload of a fuzz input of kind ``m``: the suffix (".onnx", ".pt2", ".tflite"), a newline, the
file's bytes.
"""

from __future__ import annotations

import io
import pickle
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[2]
TFLITE_DIR = ROOT / "tests" / "python" / "data" / "tflite"
# The file a hostile pickle tries to create; the target fails the input if it exists afterwards.
# A fixed path, so an input's bytes do not depend on the machine's temporary folder.
MARKER = Path(tempfile.gettempdir()) / "example-npu-fuzz" / "pwned-by-model-file"
BOUNDARY = [0, -1, 1 << 31, 1 << 40, (1 << 63) - 1]


def onnx_seed() -> bytes:
    """conv -> relu -> global average pool -> flatten -> gemm, with a Tile and Expand branch."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype("float32"), "w")
    fc = numpy_helper.from_array(rng.standard_normal((4, 5)).astype("float32"), "fc")
    repeats = numpy_helper.from_array(np.array([1, 1, 1, 2], "int64"), "repeats")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Tile", ["r", "repeats"], ["t"]),
        helper.make_node("GlobalAveragePool", ["t"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"], axis=1),
        helper.make_node("MatMul", ["f", "fc"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "seed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        [weight, fc, repeats],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def pt2_seed() -> bytes:
    import torch  # noqa: PLC0415 - torch is only needed to make this seed

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.fc = torch.nn.Linear(4, 5)

        def forward(self, x):
            return self.fc(torch.relu(self.conv(x)).mean((2, 3)))

    torch.manual_seed(0)
    exported = torch.export.export(Net().eval(), (torch.randn(1, 3, 8, 8),))
    buffer = io.BytesIO()
    torch.export.save(exported, buffer)
    return buffer.getvalue()


def seeds() -> list[tuple[str, bytes]]:
    files = [(".onnx", onnx_seed()), (".pt2", pt2_seed())]
    for path in sorted(TFLITE_DIR.glob("*.tflite"))[:3]:
        files.append((".tflite", path.read_bytes()))
    return files


class _Marker:
    """Unpickling this calls ``open(marker, "w")``: proof that the reader ran the file's code."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def hostile_pickle() -> bytes:
    return pickle.dumps(_Marker(str(MARKER)), protocol=2)


def _mutate_onnx(rng: np.random.Generator, data: bytes) -> tuple[bytes, str]:
    model = onnx.load_from_string(data)
    graph = model.graph
    choice = int(rng.integers(5))
    if choice == 0 and graph.initializer:
        init = graph.initializer[int(rng.integers(len(graph.initializer)))]
        dim = int(rng.integers(len(init.dims))) if init.dims else 0
        if init.dims:
            init.dims[dim] = int(BOUNDARY[int(rng.integers(len(BOUNDARY)))])
        step = f"initializer {init.name} dim {dim} -> {list(init.dims)}"
    elif choice == 1 and graph.initializer:
        init = graph.initializer[int(rng.integers(len(graph.initializer)))]
        location = ["../../etc/passwd", "/etc/passwd", "/proc/self/environ", "a/../../b"]
        init.ClearField("raw_data")
        init.ClearField("float_data")
        init.data_location = TensorProto.EXTERNAL
        del init.external_data[:]
        entry = init.external_data.add()
        entry.key, entry.value = "location", location[int(rng.integers(len(location)))]
        step = f"initializer {init.name} external data at {entry.value}"
    elif choice == 2:
        node = graph.node[int(rng.integers(len(graph.node)))]
        node.op_type = ["Tile", "ConstantOfShape", "Expand", "If", "Loop", "Reshape"][
            int(rng.integers(6))
        ]
        step = f"node {node.name or node.output[0]} -> {node.op_type}"
    elif choice == 3:
        repeats = np.array([1, 1, 1, BOUNDARY[int(rng.integers(len(BOUNDARY)))]], "int64")
        for i, init in enumerate(graph.initializer):
            if init.name == "repeats":
                graph.initializer[i].CopyFrom(numpy_helper.from_array(repeats, "repeats"))
        step = f"Tile repeats {repeats.tolist()}"
    else:
        node = graph.node[int(rng.integers(len(graph.node)))]
        for attr in node.attribute:
            if attr.ints:
                attr.ints[int(rng.integers(len(attr.ints)))] = int(
                    BOUNDARY[int(rng.integers(len(BOUNDARY)))]
                )
        step = f"attributes of {node.op_type} pushed to a boundary"
    return model.SerializeToString(), step


def _mutate_zip(rng: np.random.Generator, data: bytes) -> tuple[bytes, str]:
    source = zipfile.ZipFile(io.BytesIO(data))
    names = source.namelist()
    target_name = names[int(rng.integers(len(names)))]
    out = io.BytesIO()
    choice = int(rng.integers(3))
    with zipfile.ZipFile(out, "w") as archive:
        for name in names:
            content = source.read(name)
            if name == target_name:
                if choice == 0:
                    content = hostile_pickle()
                elif choice == 1:
                    content = content[: int(rng.integers(len(content) + 1))]
                elif content:
                    flipped = bytearray(content)
                    flipped[int(rng.integers(len(flipped)))] ^= 1 << int(rng.integers(8))
                    content = bytes(flipped)
            archive.writestr(name, content)
    what = ("a hostile pickle", "truncated", "one bit flipped")[choice]
    return out.getvalue(), f"archive entry {target_name}: {what}"


def _mutate_bytes(rng: np.random.Generator, data: bytes) -> tuple[bytes, str]:
    if rng.random() < 0.5:
        cut = int(rng.integers(len(data) + 1))
        return data[:cut], f"truncated at {cut}"
    flipped = bytearray(data)
    for _ in range(int(rng.integers(1, 9))):
        flipped[int(rng.integers(len(flipped)))] = int(rng.integers(256))
    return bytes(flipped), "bytes overwritten"


def mutate(rng: np.random.Generator, files: list[tuple[str, bytes]]) -> tuple[bytes, str]:
    """One mutated model file as a fuzz payload, and what was done to it."""
    suffix, data = files[int(rng.integers(len(files)))]
    if rng.random() < 0.3:
        data, step = _mutate_bytes(rng, data)
    elif suffix == ".onnx":
        data, step = _mutate_onnx(rng, data)
    elif suffix == ".pt2":
        data, step = _mutate_zip(rng, data)
    else:
        data, step = _mutate_bytes(rng, data)
    return suffix.encode() + b"\n" + data, f"{suffix} file: {step}"
