"""Structured, seeded mutations of NPU graph JSON, module bytes and NPUConfig JSON.

An input is made from one seed graph: a few structural mutations of the parsed graph (fields
deleted or retyped, extreme or zero shapes, shapes resized consistently so the graph still
validates and the compiler stages run, bad indices and cycles, bad dtypes, attributes and op
names, nodes duplicated, dropped or swapped, NPUConfig fields pushed out of range), sometimes
followed by a text mutation (truncation, bit flips, junk or invalid UTF-8 bytes, deep nesting,
huge numbers). It is then sent as graph JSON, wrapped as module bytes (whose wrapper may be
mutated too), or its NPUConfig alone is sent. Everything is drawn from one numpy Generator, so
(seed, index) reproduces an input exactly.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

EXTREME_INTS = [
    0,
    -1,
    1,
    2,
    3,
    7,
    65537,
    1 << 20,
    (1 << 31) - 1,
    1 << 31,
    (1 << 32) + 1,
    3037000500,
    1 << 40,
    1 << 62,
    (1 << 63) - 1,
    -(1 << 63),
    1 << 64,
    10**30,
]
EXTREME_FLOATS = [0.0, -0.0, -1.0, 1e-45, 1e-300, 0.5, 1.5, 1e30, 3.4e38, 1e300, 1e308]
ANY_VALUES = [
    None,
    True,
    False,
    0,
    -1,
    1.5,
    "",
    "x",
    [],
    {},
    [1, 2],
    {"a": 1},
    1 << 64,
    1e308,
    "\udcff",
    "\u00e9\u4e2d",
    "a" * 5000,
]
DTYPES = [
    "float32",
    "float16",
    "int8",
    "int16",
    "int32",
    "int64",
    "float64",
    "bool",
    "uint8",
    "bfloat16",
    "int4",
    "",
    "float32 ",
    "Float32",
    "\udcff",
]
STRINGS = [
    "NCHW",
    "NHWC",
    "OIHW",
    "HWIO",
    "NCW",
    "NWC",
    "OIW",
    "WIO",
    "",
    "nchw",
    "relu",
    "relu6",
    "none",
    "balanced",
    "low_power",
    "high_performance",
    "output_stationary",
    "weight_stationary",
    "\x00",
    "\udcff",
    "a" * 3000,
]
OPS = [
    "nn.frob",
    "",
    "input",
    "const",
    "qnn.conv2d",
    "qnn.matmul",
    "reshape",
    "permute_dims",
    "nn.softmax",
    "nn.conv2d",
    "nn.max_pool2d",
    "matmul",
    "add",
    "quantize",
    "dequantize",
]
BYTES_FORMAT = "example_npu_json"
# Valid but unusual NPUConfig values: they reach the tiling and scheduling with odd geometry.
PLAUSIBLE_CONFIG = {
    "l1_sram_kb": [4, 8, 16, 33, 64, 1024],
    "l2_cmx_kb": [1, 8, 64],
    "tile_height": [1, 4, 16, 32],
    "tile_width": [1, 4, 16, 32],
    "vector_elements": [1, 3, 8, 16, 64],
    "matrix_engine_dim": [1, 2, 8, 32],
    "vector_unit_width": [1, 7, 64, 4096],
    "dma_channels": [1, 3, 8, 64],
    "max_tiles": [1, 16, 1000],
    "dram_mb": [1, 4, 64],
    "dram_bandwidth_gb_per_s": [0.001, 1.5, 1e6],
    "l2_latency_cycles": [1, 1000000],
    "power_mode": ["low_power", "high_performance"],
    "dataflow": ["output_stationary", "weight_stationary"],
}


@dataclass
class FuzzInput:
    kind: str  # "g" graph JSON, "b" module bytes, "c" NPUConfig JSON
    data: bytes
    description: str


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (sequence of keys / indices) to a value inside nested dicts and lists."""
    paths = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            paths += _paths(item, (*prefix, key))
    elif isinstance(value, list) and len(value) <= 64:
        for i, item in enumerate(value):
            paths += _paths(item, (*prefix, i))
    return paths


def _get(root: Any, path: tuple) -> Any:
    for key in path:
        root = root[key]
    return root


def _set(root: Any, path: tuple, value: Any) -> None:
    _get(root, path[:-1])[path[-1]] = value


class Mutator:
    """Draws inputs from seed graphs with one Generator per input."""

    def __init__(self, seeds: list[dict]):
        self.seeds = seeds
        self.ops = sorted({n.get("op", "") for g in seeds for n in g["nodes"]} | set(OPS))

    # -- helpers -------------------------------------------------------------------------
    def pick(self, rng: np.random.Generator, options: list) -> Any:
        return options[int(rng.integers(len(options)))]

    def nodes(self, graph: dict) -> list:
        nodes = graph.get("nodes")
        return nodes if isinstance(nodes, list) and nodes else []

    def some_node(self, rng, graph: dict) -> dict | None:
        nodes = [n for n in self.nodes(graph) if isinstance(n, dict)]
        return self.pick(rng, nodes) if nodes else None

    # -- structural mutations of a parsed graph ------------------------------------------
    def delete_field(self, rng, graph):
        paths = [p for p in _paths(graph) if p and isinstance(_get(graph, p[:-1]), dict)]
        path = self.pick(rng, paths)
        del _get(graph, path[:-1])[path[-1]]
        return f"delete {path}"

    def retype(self, rng, graph):
        path = self.pick(rng, [p for p in _paths(graph) if p])
        value = self.pick(rng, ANY_VALUES)
        _set(graph, path, copy.deepcopy(value))
        return f"retype {path} = {str(value)[:20]!r}"

    def extreme_dim(self, rng, graph):
        node = self.some_node(rng, graph)
        if node is None or not isinstance(node.get("shape"), list):
            return self.retype(rng, graph)
        shape = node["shape"]
        choice = rng.integers(3)
        if choice == 0 and shape:
            shape[int(rng.integers(len(shape)))] = self.pick(rng, EXTREME_INTS)
        elif choice == 1:
            shape.insert(int(rng.integers(len(shape) + 1)), self.pick(rng, [1, 0, 2, 1 << 31]))
        elif shape:
            shape.pop(int(rng.integers(len(shape))))
        return f"shape of {node.get('name')} -> {shape}"

    def resize_consistently(self, rng, graph, to: int | None = None):
        """Replaces one dim value by another in every shape it occurs in,
        so that shape inference still agrees and the compiler and emulator run on it."""
        shapes = [n["shape"] for n in self.nodes(graph)
                  if isinstance(n, dict) and isinstance(n.get("shape"), list)]  # fmt: skip
        dims = sorted({d for shape in shapes for d in shape if isinstance(d, int) and d > 1})
        if not dims:
            return self.extreme_dim(rng, graph)
        old = self.pick(rng, dims)
        new = (
            to
            if to is not None
            else self.pick(
                rng, [0, 1, 2, 3, 17, 1000, 4099, 65536, 1 << 20, 3037000500, 1 << 31, 1 << 40]
            )
        )
        for node in self.nodes(graph):
            if isinstance(node, dict) and isinstance(node.get("shape"), list):
                node["shape"] = [new if d == old else d for d in node["shape"]]
        return f"resize dim {old} -> {new} everywhere"

    def zero_dim(self, rng, graph):
        return self.resize_consistently(rng, graph, to=0)

    def bad_index(self, rng, graph):
        nodes = self.nodes(graph)
        count = len(nodes)
        target = self.pick(rng, ["inputs", "arg_nodes", "heads"])
        value = int(rng.integers(-3, count + 4))
        if target == "inputs":
            node = self.some_node(rng, graph)
            if node is None or not isinstance(node.get("inputs"), list) or not node["inputs"]:
                return self.retype(rng, graph)
            node["inputs"][int(rng.integers(len(node["inputs"])))] = value
            return f"inputs of {node.get('name')} -> {node['inputs']}"
        entries = graph.get(target)
        if not isinstance(entries, list):
            return self.retype(rng, graph)
        action = rng.integers(4)
        if action == 0 and entries:
            entries[int(rng.integers(len(entries)))] = value
        elif action == 1:
            entries.append(value if rng.random() < 0.5 else (entries[0] if entries else 0))
        elif action == 2:
            entries.clear()
        else:
            entries.extend(entries * int(rng.integers(1, 4)))
        return f"{target} -> {entries[:8]}"

    def cycle(self, rng, graph):
        nodes = self.nodes(graph)
        ops = [i for i, n in enumerate(nodes) if isinstance(n, dict) and n.get("inputs")]
        if not ops:
            return self.bad_index(rng, graph)
        i = self.pick(rng, ops)
        later = int(rng.integers(i, len(nodes)))
        if isinstance(nodes[i]["inputs"], list):
            nodes[i]["inputs"][0] = later
        return f"node {i} reads node {later}"

    def bad_dtype(self, rng, graph):
        node = self.some_node(rng, graph)
        if node is None:
            return self.retype(rng, graph)
        node["dtype"] = self.pick(rng, DTYPES)
        return f"dtype of {node.get('name')} -> {node['dtype']!r}"

    def bad_attr(self, rng, graph):
        nodes = [
            n
            for n in self.nodes(graph)
            if isinstance(n, dict) and isinstance(n.get("attrs"), dict) and n["attrs"]
        ]
        if not nodes:
            return self.retype(rng, graph)
        attrs = self.pick(rng, nodes)["attrs"]
        key = self.pick(rng, sorted(attrs))
        value = attrs[key]
        if isinstance(value, bool):
            attrs[key] = self.pick(rng, [not value, 1, "true", None])
        elif isinstance(value, int):
            attrs[key] = self.pick(rng, EXTREME_INTS)
        elif isinstance(value, float):
            attrs[key] = self.pick(rng, EXTREME_FLOATS + [float(self.pick(rng, EXTREME_INTS))])
        elif isinstance(value, str):
            attrs[key] = self.pick(rng, STRINGS)
        elif isinstance(value, list):
            if value and rng.random() < 0.7:
                numbers = EXTREME_FLOATS if isinstance(value[0], float) else EXTREME_INTS
                value[int(rng.integers(len(value)))] = self.pick(rng, numbers)
            elif rng.random() < 0.5:
                value.append(self.pick(rng, [0, 1, 5]))
            elif value:
                value.pop()
        else:
            attrs[key] = self.pick(rng, ANY_VALUES)
        return f"attr {key} -> {str(attrs.get(key))[:40]}"

    def swap_op(self, rng, graph):
        node = self.some_node(rng, graph)
        if node is None:
            return self.retype(rng, graph)
        node["op"] = self.pick(rng, self.ops)
        return f"op of {node.get('name')} -> {node['op']!r}"

    def reshuffle(self, rng, graph):
        nodes = self.nodes(graph)
        if not nodes:
            return self.retype(rng, graph)
        action = rng.integers(4)
        i, j = int(rng.integers(len(nodes))), int(rng.integers(len(nodes)))
        if action == 0:
            nodes.insert(j, copy.deepcopy(nodes[i]))
            return f"duplicate node {i} at {j}"
        if action == 1:
            nodes.pop(i)
            return f"drop node {i}"
        if action == 2:
            nodes[i], nodes[j] = nodes[j], nodes[i]
            return f"swap nodes {i}, {j}"
        # A long chain of copies of the last node: big graphs, slow passes.
        last = nodes[-1]
        # At most ~4 MB of JSON: the point is many nodes, not a huge input.
        copies = min(int(self.pick(rng, [100, 2000, 20000])), (4 << 20) // len(json.dumps(last)))
        for _ in range(copies):
            node = copy.deepcopy(last)
            if isinstance(node, dict) and isinstance(node.get("inputs"), list) and node["inputs"]:
                node["inputs"][0] = len(nodes) - 1
            nodes.append(node)
        if isinstance(graph.get("heads"), list):
            graph["heads"] = [len(nodes) - 1]
        return f"append {copies} copies of the last node"

    def bad_config(self, rng, graph):
        config = graph.get("npu_config")
        if not isinstance(config, dict):
            graph["npu_config"] = self.pick(rng, ANY_VALUES)
            return "npu_config retyped"
        self.mutate_config(rng, config)
        return f"npu_config -> {json.dumps(config)[:80]}"

    def plausible_config(self, rng, graph):
        config = graph.get("npu_config")
        if not isinstance(config, dict):
            config = graph["npu_config"] = {}
        for _ in range(int(rng.integers(1, 4))):
            key = self.pick(rng, sorted(PLAUSIBLE_CONFIG))
            config[key] = self.pick(rng, PLAUSIBLE_CONFIG[key])
        return f"npu_config -> {json.dumps(config)[:120]}"

    def mutate_config(self, rng, config: dict) -> None:
        action = rng.integers(5)
        keys = sorted(config) or ["l1_sram_kb"]
        key = self.pick(rng, keys)
        if action == 0:
            config.pop(key, None)
        elif action == 1:
            config[self.pick(rng, ["unknown", "l1_sram", "\udcff", ""])] = 1
        elif action == 2:
            config[key] = self.pick(rng, ANY_VALUES)
        else:
            value = config.get(key)
            pool = EXTREME_FLOATS if isinstance(value, float) else EXTREME_INTS
            config[key] = self.pick(rng, pool if rng.random() < 0.8 else STRINGS)

    def rename(self, rng, graph):
        target = self.some_node(rng, graph) if rng.random() < 0.7 else graph
        key = "name" if target is not graph else "symbol"
        if target is None:
            return self.retype(rng, graph)
        target[key] = self.pick(rng, ["", "\udcff", "\u00e9", "a" * 100000, "x\x00y", "y"])
        return f"{key} -> {str(target[key])[:10]!r}"

    STRUCTURAL: tuple[str, ...] = (
        "delete_field",
        "retype",
        "extreme_dim",
        "resize_consistently",
        "resize_consistently",
        "zero_dim",
        "bad_index",
        "cycle",
        "bad_dtype",
        "bad_attr",
        "bad_attr",
        "bad_attr",
        "swap_op",
        "reshuffle",
        "bad_config",
        "bad_config",
        "plausible_config",
        "plausible_config",
        "plausible_config",
        "rename",
    )

    # -- text mutations ------------------------------------------------------------------
    def mutate_text(self, rng, data: bytes) -> tuple[bytes, str]:
        action = int(rng.integers(6))
        at = int(rng.integers(len(data) + 1))
        if action == 0:
            return data[:at], f"truncate at {at}"
        if action == 1:
            flipped = bytearray(data)
            for _ in range(int(rng.integers(1, 9))):
                if flipped:
                    i = int(rng.integers(len(flipped)))
                    flipped[i] ^= 1 << int(rng.integers(8))
            return bytes(flipped), "bit flips"
        if action == 2:
            junk = self.pick(
                rng,
                [
                    b"\xff",
                    b"\x00",
                    b"\xc3\x28",
                    b"\xed\xa0\x80",
                    b"\xf4\x90\x80\x80",
                    b'"',
                    b"{",
                    b"]",
                    b"\\u",
                    b"\\udcff",
                ],
            )
            return data[:at] + junk + data[at:], f"insert {junk!r} at {at}"
        if action == 3:
            depth = int(self.pick(rng, [31, 32, 33, 1000, 100000]))
            return data[:at] + b"[" * depth + b"1" + b"]" * depth + data[at:], f"nest {depth}"
        if action == 4:
            number = self.pick(
                rng,
                [
                    b"1" + b"0" * 400,
                    b"-0",
                    b"1e999",
                    b"-1e999",
                    b"NaN",
                    b"Infinity",
                    b"0x10",
                    b"1.5e-400",
                    b"00",
                ],
            )
            digits = [i for i, c in enumerate(data) if 48 <= c <= 57]
            if not digits:
                return data[:at], "truncate"
            i = self.pick(rng, digits)
            return data[:i] + number + data[i + 1 :], f"number {number[:10]!r} at {i}"
        end = min(len(data), at + int(rng.integers(1, 200)))
        return data[:at] + data[at:end] * int(rng.integers(2, 5)) + data[end:], "repeat slice"

    # -- whole inputs --------------------------------------------------------------------
    def make(self, rng: np.random.Generator) -> FuzzInput:
        seed_index = int(rng.integers(len(self.seeds)))
        graph = copy.deepcopy(self.seeds[seed_index])
        steps = [f"seed {seed_index}"]
        mode = rng.random()
        if mode < 0.15:  # NPUConfig JSON alone
            config = graph.get("npu_config") if isinstance(graph.get("npu_config"), dict) else {}
            for _ in range(int(rng.integers(1, 4))):
                self.mutate_config(rng, config)
            data = json.dumps(config).encode()
            if rng.random() < 0.3:
                data, step = self.mutate_text(rng, data)
                steps.append(step)
            return FuzzInput("c", data, "; ".join(steps + [data[:120].decode(errors="replace")]))
        for _ in range(int(rng.integers(1, 4))):
            name = self.pick(rng, list(self.STRUCTURAL))
            try:
                steps.append(getattr(self, name)(rng, graph))
            except (TypeError, KeyError, IndexError, AttributeError, ValueError):
                steps.append(f"{name} (not applicable after the steps before)")
        data = json.dumps(graph).encode()
        if rng.random() < 0.25:
            data, step = self.mutate_text(rng, data)
            steps.append(step)
        kind = "g"
        if mode < 0.35 or not _is_utf8(data):
            kind = "b"
            data, step = self.wrap_bytes(rng, data)
            steps.append(step)
        return FuzzInput(kind, data, "; ".join(steps))

    def wrap_bytes(self, rng, graph_text: bytes) -> tuple[bytes, str]:
        """Module bytes around a graph (as SaveToBytes writes them), maybe with a bad wrapper."""
        placeholder = "@@graph@@"
        wrapper: dict[str, Any] = {"format": BYTES_FORMAT, "version": 1, "graph": placeholder}
        step = "bytes"
        action = rng.random()
        if action < 0.2:
            key = self.pick(rng, ["format", "version", "graph"])
            wrapper[key] = self.pick(rng, ANY_VALUES + [2, 0, "example_npu", 1.0])
            step = f"bytes with {key} retyped"
        elif action < 0.25:
            wrapper.pop(self.pick(rng, ["format", "version", "graph"]))
            step = "bytes with a field missing"
        text = json.dumps(wrapper).encode()
        # The graph goes in as a JSON string, byte for byte (invalid UTF-8 stays invalid).
        text = text.replace(
            b'"' + placeholder.encode() + b'"', b'"' + _raw_json_string(graph_text) + b'"'
        )
        if rng.random() < 0.15:
            text, text_step = self.mutate_text(rng, text)
            step += f", {text_step}"
        return text, step


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _raw_json_string(data: bytes) -> bytes:
    """data as the inside of a JSON string: quotes, backslashes and control bytes escaped, every
    other byte (including invalid UTF-8) kept as it is."""
    out = bytearray()
    for byte in data:
        if byte in (0x22, 0x5C):
            out += b"\\" + bytes([byte])
        elif byte < 0x20:
            out += b"\\u%04x" % byte
        else:
            out.append(byte)
    return bytes(out)
