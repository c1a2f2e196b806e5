"""TFLite int8 models run whole on the NPU with TFLite's integer arithmetic: the committed models
(tests/python/tflite_models.py), fixed and open batch, are one NPU function with nothing on the
CPU, every CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED an integer NPU op, and the outputs are
LiteRT's reference kernels' (``OpResolverType.BUILTIN_REF``) bit for bit and within one step of
its default kernels."""

from __future__ import annotations

from collections import Counter

import example_npu
import numpy as np
import pytest
import tvm
from example_npu.frontend.canonicalize import canonicalize
from tflite_models import (
    EMBEDDING,
    MODELS,
    OPEN_SPATIAL,
    interpreter,
    model_path,
    random_inputs,
    run_litert,
)
from tvm import relax
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
from tvm.relax.transform import FuseOpsByPattern

PRODUCERS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def producer_count(path) -> int:
    runner = interpreter(path)
    runner.allocate_tensors()
    return sum(op["op_name"] in PRODUCERS for op in runner._get_ops_details())


def integer_producers(mod: tvm.IRModule) -> Counter:
    """The quantized conv / matmul composites the NPU patterns match in ``mod``."""
    fused = FuseOpsByPattern(
        get_patterns_with_prefix("example_npu."), bind_constants=True, annotate_codegen=False
    )(canonicalize(mod))
    composites = Counter()
    for func in fused.functions.values():
        if isinstance(func, relax.Function) and func.attrs and "Composite" in func.attrs:
            name = str(func.attrs["Composite"]).removeprefix("example_npu.")
            if name.startswith(("qnn_conv2d", "qnn_matmul", "qnn_dense")):
                composites[name.split("_")[1]] += 1
    return composites


def steps_on_the_npu(path, model, inputs, output_shape=None) -> dict[bool, int]:
    """Checks that ``model`` (loaded from ``path``) is one NPU function with nothing on the CPU
    and every conv / depthwise / FC integer, runs it on ``inputs`` and returns the largest
    difference from LiteRT's reference (True) and default (False) kernels, in steps."""
    assert int(sum(integer_producers(model.mod).values())) == producer_count(path)
    partitioned, report = example_npu.partition_with_report(model.mod)
    assert len(report.npu_functions) == 1 and not report.cpu_ops, report.table()
    vm = relax.VirtualMachine(tvm.compile(partitioned, target="llvm"), tvm.cpu())
    steps = {True: 0, False: 0}
    for x in inputs:
        actual = vm["main"](tvm.runtime.tensor(x)).numpy().astype(int)
        for reference in steps:
            expected = run_litert(path, x, reference).astype(int)
            assert actual.shape == expected.shape == (output_shape or expected.shape)
            steps[reference] = max(steps[reference], int(np.abs(actual - expected).max()))
    return steps


@pytest.mark.parametrize("open_batch", [False, True], ids=["batch1", "open_batch"])
@pytest.mark.parametrize("name", MODELS)
def test_tflite_model_runs_whole_on_the_npu_as_litert(name, open_batch, summary_line):
    path = model_path(name, open_batch)
    steps = steps_on_the_npu(path, example_npu.load_model(path), random_inputs(path, 4, seed=11))
    summary_line(
        f"TFLite {path.name}: 1 NPU function, 0 CPU ops, max steps vs LiteRT reference "
        f"{steps[True]}, default {steps[False]}"
    )
    assert steps[True] == 0
    assert steps[False] <= 1


@pytest.mark.parametrize("size", [(9, 7), (12, 10)], ids=["9x7", "12x10"])
@pytest.mark.parametrize("open_batch", [False, True], ids=["batch1", "open_batch"])
def test_open_height_and_width_take_the_sizes_given(open_batch, size, summary_line):
    """A file with height and width open, loaded at two sizes: SQUEEZE, EXPAND_DIMS,
    REVERSE_V2 and DEPTH_TO_SPACE run on the NPU, and the stride-2 SAME conv pads for the size
    given. TVM's converters read the file's placeholder 1x1: its DEPTH_TO_SPACE fails, and a
    stride-2 SAME conv's padding is silently wrong for even sizes (243 steps off on a probe
    before the reader gave the converters the real shapes)."""
    path = model_path(OPEN_SPATIAL, open_batch)
    ops = {op["op_name"] for op in interpreter(path)._get_ops_details()}
    assert {"SQUEEZE", "EXPAND_DIMS", "REVERSE_V2", "DEPTH_TO_SPACE"} <= ops
    (detail,) = interpreter(path).get_input_details()
    shape = (1, *size, 4)
    model = example_npu.load_model(path, {detail["name"]: shape})
    output_shape = (1, *(3 * -(-d // 2) for d in size), 3)  # stride 2 (SAME), then block 3
    inputs = random_inputs(path, 4, seed=11, shape=shape)
    steps = steps_on_the_npu(path, model, inputs, output_shape)
    summary_line(
        f"TFLite {path.name} at {size[0]}x{size[1]}: 1 NPU function, 0 CPU ops, max steps vs "
        f"LiteRT reference {steps[True]}, default {steps[False]}"
    )
    assert steps[True] == 0
    assert steps[False] <= 1


@pytest.mark.parametrize("open_batch", [False, True], ids=["batch1", "open_batch"])
def test_a_gather_of_int8_rows_by_run_time_ids(open_batch, summary_line):
    """Keras' Embedding: GATHER of an int8 table by the model's int32 ids (negative ids
    wrapped by Keras' fix-up, as LiteRT computes) runs on the NPU's row gather, and an id
    outside the table is a ValueError where LiteRT's kernel fails too (TVM's take would read
    out of bounds)."""
    path = model_path(EMBEDDING, open_batch)
    assert "GATHER" in {op["op_name"] for op in interpreter(path)._get_ops_details()}
    model = example_npu.load_model(path)
    rng = np.random.default_rng(5)
    inputs = [rng.integers(-40, 40, (1, 6)).astype("int32") for _ in range(8)]
    steps = steps_on_the_npu(path, model, inputs)
    summary_line(
        f"TFLite {path.name}: 1 NPU function, 0 CPU ops, max steps vs LiteRT reference "
        f"{steps[True]}, default {steps[False]}"
    )
    assert steps[True] == 0
    assert steps[False] <= 1
    partitioned = example_npu.partition_for_npu(model.mod)
    vm = relax.VirtualMachine(tvm.compile(partitioned, target="llvm"), tvm.cpu())
    for bad in (40, -41):
        ids = np.zeros((1, 6), "int32")
        ids[0, 4] = bad
        with pytest.raises(RuntimeError, match="gather index out of bounds"):
            run_litert(path, ids)
        with pytest.raises(ValueError, match=f"take: id {bad} is outside the 40 rows"):
            vm["main"](tvm.runtime.tensor(ids))


def test_rounding_switch_overrides_the_model_file():
    """partition_for_npu(rounding="tvm") on a TFLite model: TVM's arithmetic, not TFLite's, so
    at least one output differs from the default (TFLite) partition of the same module."""
    path = model_path("ic_resnet8")
    model = example_npu.load_model(path)
    assert str(model.mod.attrs["example_npu.rounding"]) == "tflite"
    inputs = random_inputs(path, 4, seed=5)
    outputs = {}
    for rounding in ("tflite", "tvm"):
        mod = example_npu.partition_for_npu(model.mod, rounding=rounding)
        vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
        outputs[rounding] = [vm["main"](tvm.runtime.tensor(x)).numpy() for x in inputs]
    for x, actual in zip(inputs, outputs["tflite"], strict=True):
        np.testing.assert_array_equal(actual, run_litert(path, x))
    assert any(
        not np.array_equal(a, b) for a, b in zip(outputs["tflite"], outputs["tvm"], strict=True)
    )
    with pytest.raises(ValueError, match="rounding must be one of tvm, tflite"):
        example_npu.partition_for_npu(model.mod, rounding="nearest")
