"""The glue ops on the NPU, each against TVM's CPU build of the same module.

Data movement (reshape, flatten, squeeze, expand_dims, permute_dims, concat, split,
strided_slice, take, broadcast_to) runs for float32, float16, int8, uint8 and int16 and must be
exact.
The computing glue (mean, adaptive_avg_pool2d, layer_norm, 1-D pooling, maximum / minimum,
clip with any bounds, silu, torch's safe softmax) is float and compared within 1e-5, with NaN
and infinities where the op's rules for them matter.
"""

from __future__ import annotations

import example_npu
import numpy as np
import pytest
import tvm
from example_npu.partition.report import partition_with_report
from tvm import relax

DTYPES = ("float32", "float16", "int8", "uint8", "int16")


def module(params: dict[str, tuple[tuple[int, ...], str]], body) -> tvm.IRModule:
    vars_ = {
        name: relax.Var(name, relax.TensorType(shape, dt)) for name, (shape, dt) in params.items()
    }
    bb = relax.BlockBuilder()
    with bb.function("main", list(vars_.values())):
        with bb.dataflow():
            out = bb.emit_output(body(bb, vars_))
        bb.emit_func_output(out)
    return bb.get()


def run(mod: tvm.IRModule, inputs: list[np.ndarray]) -> list[np.ndarray]:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(x) for x in inputs])
    if hasattr(out, "numpy"):
        return [out.numpy()]
    return [item.numpy() for item in out]


def data(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)
    return (rng.standard_normal(shape) * 3).astype(dtype)


def offloaded_and_compared(mod, inputs, exact=True, rtol=1e-5, atol=1e-5, regions=1) -> None:
    """Every op of mod runs on the NPU, one NPU function per connected region, and the results
    equal TVM's CPU build."""
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops, report.table()
    assert len(report.npu_functions) == regions, report.table()
    for npu, cpu in zip(run(partitioned, inputs), run(mod, inputs), strict=True):
        assert npu.dtype == cpu.dtype and npu.shape == cpu.shape
        if exact:
            np.testing.assert_array_equal(npu, cpu)
        else:
            np.testing.assert_allclose(npu, cpu, rtol=rtol, atol=atol, equal_nan=True)


def _movement_chain(bb, v):
    """Every data-movement op, as views and as materialised copies (several outputs)."""
    op = relax.op
    x, y = v["x"], v["y"]  # (2, 4, 3, 5), (2, 2, 3, 5)
    t = bb.emit(op.permute_dims(x, [0, 2, 1, 3]))  # (2, 3, 4, 5), a view
    flat = bb.emit(op.reshape(t, (2, 60)))  # reshape of a transposed view: a DMA transpose
    cat = bb.emit(op.concat([x, y], axis=1))  # (2, 6, 3, 5)
    halves = bb.emit(op.split(cat, 2, axis=1))
    lower = bb.emit(relax.TupleGetItem(halves, 1))  # (2, 3, 3, 5)
    odd = bb.emit(op.strided_slice(lower, axes=[1, 3], begin=[1, 0], end=[3, 5], strides=[1, 2]))
    row = bb.emit(op.take(odd, relax.const(1, "int64"), axis=0))  # (2, 3, 3)
    squeezed = bb.emit(op.squeeze(bb.emit(op.expand_dims(row, [0])), [0]))
    wide = bb.emit(op.broadcast_to(bb.emit(op.strided_slice(y, [0], [0], [1])), (3, 2, 3, 5)))
    flattened = bb.emit(op.flatten(wide))
    return relax.Tuple([flat, squeezed, flattened, cat])


@pytest.mark.parametrize("dtype", DTYPES)
def test_data_movement_is_exact_for_every_dtype(dtype):
    mod = module({"x": ((2, 4, 3, 5), dtype), "y": ((2, 2, 3, 5), dtype)}, _movement_chain)
    inputs = [data((2, 4, 3, 5), dtype), data((2, 2, 3, 5), dtype, 1)]
    # Three connected regions: the transpose of x, the concat chain, the broadcast of y.
    offloaded_and_compared(mod, inputs, regions=3)


def test_views_feed_compute_inside_one_region():
    """Channel shuffle between convolutions: split, concat, reshape/transpose on the NPU."""
    rng = np.random.default_rng(3)

    def body(bb, v):
        op = relax.op
        w = relax.const(rng.standard_normal((4, 4, 1, 1)).astype("float32"))
        halves = bb.emit(op.split(v["x"], 2, axis=1))
        branch = bb.emit(op.nn.relu(bb.emit(op.nn.conv2d(bb.emit(halves[1]), w))))
        cat = bb.emit(op.concat([bb.emit(halves[0]), branch], axis=1))
        shuffled = bb.emit(
            op.permute_dims(bb.emit(op.reshape(cat, (1, 2, 4, 5, 5))), [0, 2, 1, 3, 4])
        )
        merged = bb.emit(op.reshape(shuffled, (1, 8, 5, 5)))
        pooled = bb.emit(op.mean(merged, axis=[2, 3], keepdims=False))
        return op.matmul(pooled, relax.const(rng.standard_normal((8, 3)).astype("float32")))

    mod = module({"x": ((1, 8, 5, 5), "float32")}, body)
    offloaded_and_compared(mod, [data((1, 8, 5, 5), "float32")], exact=False)


@pytest.mark.parametrize(
    ("axes", "keepdims", "shape"),
    [
        ([2, 3], True, (1, 6, 5, 7)),
        ([-1, -2], False, (2, 3, 4, 4)),
        ([1], False, (3, 9, 2)),
        (None, False, (4, 5)),
    ],
)
def test_mean(axes, keepdims, shape):
    mod = module(
        {"x": (shape, "float32")}, lambda bb, v: relax.op.mean(v["x"], axis=axes, keepdims=keepdims)
    )
    offloaded_and_compared(mod, [data(shape, "float32")], exact=False)


@pytest.mark.parametrize(
    ("layout", "shape", "output"),
    [
        ("NCHW", (1, 5, 6, 6), (1, 1)),
        ("NCHW", (2, 3, 6, 4), (3, 2)),
        ("NHWC", (1, 6, 6, 5), (2, 3)),
        ("NCHW", (1, 3, 7, 7), (2, 2)),  # uneven, overlapping windows
        ("NCHW", (2, 4, 5, 9), (3, 4)),
        ("NHWC", (1, 13, 6, 3), (6, 4)),
    ],
)
def test_adaptive_avg_pool2d(layout, shape, output):
    mod = module(
        {"x": (shape, "float32")},
        lambda bb, v: relax.op.nn.adaptive_avg_pool2d(v["x"], output, layout=layout),
    )
    offloaded_and_compared(mod, [data(shape, "float32")], exact=False)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize(("layout", "shape"), [("NCW", (2, 3, 17)), ("NWC", (1, 17, 4))])
def test_pool1d(kind, layout, shape):
    pool = getattr(relax.op.nn, f"{kind}_pool1d")
    mod = module(
        {"x": (shape, "float32")},
        lambda bb, v: pool(v["x"], pool_size=3, strides=2, padding=(1, 0), layout=layout),
    )
    offloaded_and_compared(mod, [data(shape, "float32")], exact=False)


@pytest.mark.parametrize(("shape", "axes"), [((2, 5, 16), [-1]), ((3, 4, 6), [1, 2])])
def test_layer_norm(shape, axes):
    normalized = tuple(shape[a] for a in sorted(a % len(shape) for a in axes))
    rng = np.random.default_rng(5)
    gamma = relax.const(rng.uniform(0.5, 1.5, normalized).astype("float32"))
    beta = relax.const(rng.standard_normal(normalized).astype("float32"))
    mod = module(
        {"x": (shape, "float32")},
        lambda bb, v: relax.op.nn.layer_norm(v["x"], gamma, beta, axes=axes, epsilon=1e-6),
    )
    offloaded_and_compared(mod, [data(shape, "float32")], exact=False)


SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 2.5, -7.0, 6.0], dtype="float32")


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_follow_tvm_on_nan_and_inf(name):
    op = getattr(relax.op, name)
    mod = module(
        {"a": ((8, 8), "float32"), "b": ((8,), "float32")}, lambda bb, v: op(v["a"], v["b"])
    )
    a = np.repeat(SPECIALS[None, :], 8, axis=0).T.copy()
    offloaded_and_compared(mod, [a, SPECIALS.copy()])


@pytest.mark.parametrize(
    "bounds", [(-np.inf, 6.0), (0.0, np.inf), (0.0, 1.0), (-1.5, 0.5), (-np.inf, np.inf)]
)
def test_clip_with_any_bounds(bounds):
    lo, hi = bounds
    mod = module(
        {"x": ((2, 8), "float32")},
        lambda bb, v: relax.op.clip(v["x"], relax.prim_value(lo), relax.prim_value(hi)),
    )
    x = np.stack([SPECIALS, SPECIALS[::-1]])
    offloaded_and_compared(mod, [x])


def test_hardswish_and_hardsigmoid_chains_run_as_npu_activations():
    """torch.export's hardswish y * clip(clip(y + 3, 0, inf), -inf, 6) / 6 and hardsigmoid
    clip(...) / 6, each after a conv: every op on the NPU, and each conv with its activation is
    one NPU group (y stays on chip while the gate is computed)."""
    rng = np.random.default_rng(9)

    def gate(bb, y):
        op = relax.op
        shifted = bb.emit(op.add(y, relax.const(3.0)))
        low = bb.emit(op.clip(shifted, relax.prim_value(0.0), relax.prim_value(np.inf)))
        return bb.emit(op.clip(low, relax.prim_value(-np.inf), relax.prim_value(6.0)))

    def body(bb, v):
        op = relax.op
        weights = [relax.const(rng.standard_normal((4, 3, 3, 3)).astype("float32")) for _ in "ab"]
        y = bb.emit(op.nn.conv2d(v["x"], weights[0], padding=1))
        hswish = bb.emit(op.divide(bb.emit(op.multiply(y, gate(bb, y))), relax.const(6.0)))
        z = bb.emit(op.nn.conv2d(v["x"], weights[1], padding=1))
        hsigmoid = bb.emit(op.divide(gate(bb, z), relax.const(6.0)))
        return relax.Tuple([hswish, hsigmoid])

    mod = module({"x": ((1, 3, 6, 6), "float32")}, body)
    x = data((1, 3, 6, 6), "float32")
    offloaded_and_compared(mod, [x], exact=False, regions=2)  # sibling convs of one input
    executable = tvm.compile(example_npu.partition_for_npu(mod), target="llvm")
    groups = [node.ops for node in example_npu.profile(executable, tvm.runtime.tensor(x)).nodes]
    assert len(groups) == 2, groups
    assert all(ops[0] == "nn.conv2d" and ops[-1] == "divide" for ops in groups), groups


def test_silu():
    mod = module({"x": ((3, 17), "float32")}, lambda bb, v: relax.op.nn.silu(v["x"]))
    offloaded_and_compared(mod, [data((3, 17), "float32")], exact=False)


def _safe_softmax(bb, v, fill_value: float = 0.0):
    """torch.export's safe softmax, with the masked rows' fill as a parameter."""
    op = relax.op
    x = v["x"]
    softmax = bb.emit(op.nn.softmax(x, axis=-1))
    kept = bb.emit(op.logical_not(bb.emit(op.equal(x, relax.const(-np.inf, "float32")))))
    row_max = bb.emit(op.max(bb.emit(op.astype(kept, "int8")), axis=[-1], keepdims=True))
    masked = bb.emit(op.logical_not(bb.emit(op.astype(row_max, "bool"))))
    fill = bb.emit(op.full_like(softmax, relax.const(fill_value, "float32")))
    return op.where(masked, fill, softmax)


def test_safe_softmax_is_one_npu_softmax_that_zeroes_masked_rows():
    mod = module({"x": ((2, 3, 5), "float32")}, _safe_softmax)
    x = data((2, 3, 5), "float32")
    x[0, 1, :] = -np.inf  # a fully masked row: TVM gives 0 (softmax alone would give NaN)
    x[1, 2, 1:3] = -np.inf  # a partly masked row
    offloaded_and_compared(mod, [x], exact=False)


def test_safe_softmax_with_another_fill_value_is_not_matched():
    body = lambda bb, v: _safe_softmax(bb, v, fill_value=0.5)  # noqa: E731
    _, report = partition_with_report(module({"x": ((2, 5), "float32")}, body))
    assert report.cpu_ops["relax.where"] == 1
    assert "filled with something other than 0" in report.cpu_reason("relax.where")


def test_take_with_a_runtime_index_is_a_gather_on_the_npu():
    """A run-time scalar id: one row gathered by DMA, equal to TVM's build."""
    mod = module(
        {"x": ((4, 3), "float32"), "i": ((), "int64")},
        lambda bb, v: relax.op.take(v["x"], v["i"], axis=0),
    )
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops and report.npu_ops["relax.take"] == 1, report.table()
    x, i = data((4, 3), "float32"), np.array(2, dtype="int64")
    np.testing.assert_array_equal(run(partitioned, [x, i])[0], run(mod, [x, i])[0])


def test_take_of_run_time_ids_along_another_axis_stays_on_the_cpu():
    mod = module(
        {"x": ((4, 3), "float32"), "i": ((2,), "int64")},
        lambda bb, v: relax.op.take(v["x"], v["i"], axis=1),
    )
    _, report = partition_with_report(mod)
    assert report.cpu_ops["relax.take"] == 1, report.table()


# Constant index tensors whose rows step evenly: an exported as_strided's gather (arange reshaped
# to the output), every other row, a negative start wrapped or clipped into range.
_EVEN_INDICES = [
    (np.arange(6).reshape(1, 6, 1, 1), "fast", 1),
    (np.arange(1, 6, 2), "fast", 1),
    (np.arange(4).reshape(2, 2), "fast", 0),
    (np.array([-3, -1]), "wrap", 1),
    (np.array([[-5]]), "clip", 2),
]


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("indices, mode, axis", _EVEN_INDICES)
def test_take_with_evenly_increasing_constant_indices_is_a_strided_view(indices, mode, axis, dtype):
    shape = (4, 6, 5)

    def body(bb, v):
        taken = bb.emit(relax.op.take(v["x"], relax.const(indices, "int64"), axis=axis, mode=mode))
        return relax.op.permute_dims(taken)  # a consumer reads the view, then a DMA transpose

    offloaded_and_compared(module({"x": (shape, dtype)}, body), [data(shape, dtype)])


# Other constant indices: one DMA box per run of evenly stepping rows, copied into its slice
# (reflection padding's [1, 0, 1, 2, 3, 2], a permutation, repeated rows: broadcasts of one row,
# e.g. BERT's token-type embedding of constant all-zero ids, 128 of them).
_GATHER_INDICES = [
    np.array([1, 0, 1, 2, 3, 2]),
    np.array([2, 0, 3, 1]),
    np.array([[1, 1], [1, 3]]),
    np.zeros((1, 128), "int64"),
    np.array([3, 3, 3, 0, 1, 2, 2, 2, 2]),
]


@pytest.mark.parametrize("dtype", ["float32", "int16"])
@pytest.mark.parametrize(
    "indices",
    _GATHER_INDICES,
    ids=["reflect", "permutation", "repeats", "one row 128 times", "repeated runs"],
)
def test_take_with_other_constant_indices_copies_each_run_of_rows(indices, dtype):
    shape = (3, 4, 5)

    def body(bb, v):
        taken = bb.emit(relax.op.take(v["x"], relax.const(indices, "int64"), axis=1))
        return relax.op.reshape(taken, (-1,))

    offloaded_and_compared(module({"x": (shape, dtype)}, body), [data(shape, dtype)])


@pytest.mark.parametrize("index_dtype", ["int64", "int32"])
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_take_of_many_constant_rows_of_axis_0_is_a_row_gather(dtype, index_dtype):
    """The ONNX exporter's adaptive pooling windows: 140 constant indices into axis 0, far more
    runs than DMA boxes, gathered as an embedding's rows with the indices as constant ids."""
    indices = np.random.default_rng(3).integers(0, 12, (5, 4, 7)).astype(index_dtype)
    shape = (12, 3, 4)

    def body(bb, v):
        return relax.op.take(v["x"], relax.const(indices), axis=0)

    offloaded_and_compared(module({"x": (shape, dtype)}, body), [data(shape, dtype)])


@pytest.mark.parametrize(
    "indices, reason",
    [
        (np.array([0, 99]), "indices outside axis 1"),
        (np.random.default_rng(0).permutation(40), "runs of evenly stepping rows"),
    ],
    ids=["out of range", "too many runs"],
)
def test_take_with_unreadable_constant_indices_stays_on_the_cpu(indices, reason):
    mod = module(
        {"x": ((4, 40), "float32")},
        lambda bb, v: relax.op.take(v["x"], relax.const(indices, "int64"), axis=1),
    )
    partitioned, report = partition_with_report(mod)
    assert report.cpu_ops["relax.take"] == 1 and reason in report.cpu_reason("relax.take")
    if indices.max() < 40:  # mode fast out of range is undefined in TVM's build
        x = data((4, 40), "float32")
        np.testing.assert_array_equal(run(partitioned, [x])[0], run(mod, [x])[0])


def test_float64_data_movement_stays_on_the_cpu():
    mod = module({"x": ((2, 6), "float64")}, lambda bb, v: relax.op.reshape(v["x"], (3, 4)))
    _, report = partition_with_report(mod)
    assert "float64 has no NPU datapath" in report.cpu_reason("relax.reshape")


def test_slices_of_one_tensor_with_equal_boxes_stay_apart():
    """YOLOv5's Focus: the four stride-2 slices concatenated. The slices are views of one input
    with equal boxes and different offsets; the emulator once shared one arranged tile between
    them (wrong numbers, no fallback)."""
    op = relax.op

    def body(bb, v):
        phases = [(0, 0), (1, 0), (0, 1), (1, 1)]
        parts = [
            bb.emit(op.strided_slice(v["x"], [2, 3], [h, w], [6, 6], [2, 2])) for h, w in phases
        ]
        return op.concat(parts, axis=1)

    for dtype in ("float32", "int8"):
        shape = (1, 3, 6, 6)
        offloaded_and_compared(module({"x": (shape, dtype)}, body), [data(shape, dtype)])


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "uint8", "int8"])
def test_astype_of_integers_to_float32_is_exact_on_the_npu(dtype):
    """Every integer, the extremes and the roundings past 2**24 (ties to even) included, becomes
    the float TVM's build makes of it; the cast of a tokenizer mask feeds float arithmetic."""
    shape = (3, 700)  # several tiles
    x = data(shape, dtype, seed=7)
    info = np.iinfo(dtype)
    edges = [info.min, info.max, 0, 1]
    if info.bits >= 32:
        edges += [2**24 + 1, 2**24 + 3, -(2**25) - 3, 2**31 - 65]
    x.reshape(-1)[: len(edges)] = edges
    mod = module(
        {"x": (shape, dtype)},
        lambda bb, v: relax.op.multiply(relax.op.astype(v["x"], "float32"), relax.const(0.5)),
    )
    partitioned, report = partition_with_report(mod)
    assert not report.cpu_ops and report.npu_ops["relax.astype"] == 1, report.table()
    npu, cpu = run(partitioned, [x])[0], run(mod, [x])[0]
    np.testing.assert_array_equal(npu, cpu)
    np.testing.assert_array_equal(npu, x.astype("float32") * np.float32(0.5))


@pytest.mark.parametrize(
    ("source", "target"), [("float32", "float16"), ("int64", "int32"), ("float64", "float32")]
)
def test_other_casts_stay_on_the_cpu_with_a_reason(source, target):
    mod = module({"x": ((4, 5), source)}, lambda bb, v: relax.op.astype(v["x"], target))
    _, report = partition_with_report(mod)
    assert report.cpu_ops["relax.astype"] == 1, report.table()
    assert f"astype: {source} -> {target}" in report.cpu_reason("relax.astype")


_SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.0, 20.0], "float32")


@pytest.mark.parametrize(
    "compare", ["greater", "greater_equal", "less", "less_equal", "equal", "not_equal"]
)
def test_a_select_of_a_comparison_runs_on_the_npu(compare):
    """where(x <op> t, x, y): the comparison is a 0 / 1 mask, the select copies the chosen
    element; NaN, infinities and -0.0 in either branch come out as TVM's build gives them."""
    shape = (3, 8)

    def body(bb, v):
        threshold = relax.const(np.array([[1.5], [-0.0], [20.0]], "float32"))
        condition = getattr(relax.op, compare)(v["x"], threshold)
        return relax.op.where(condition, v["x"], v["y"])

    x = np.stack([_SPECIAL, _SPECIAL[::-1], np.roll(_SPECIAL, 3)])
    y = data(shape, "float32")
    y[0, :2] = [np.nan, -np.inf]
    offloaded_and_compared(module({"x": (shape, "float32"), "y": (shape, "float32")}, body), [x, y])


def test_a_select_broadcasts_its_condition_and_branches():
    """A (1, 1, 6, 6) condition over (2, 3, 6, 6) scores, a scalar fill, as in masked attention."""

    def body(bb, v):
        condition = relax.op.less_equal(v["m"], relax.const(0.0, "float32"))
        return relax.op.where(condition, v["s"], relax.const(-np.inf, "float32"))

    params = {"m": ((1, 1, 6, 6), "float32"), "s": ((2, 3, 6, 6), "float32")}
    inputs = [data((1, 1, 6, 6), "float32", 1), data((2, 3, 6, 6), "float32", 2)]
    offloaded_and_compared(module(params, body), inputs)


def test_a_constant_bool_mask_selects_on_the_npu():
    """GPT-Neo's where(causal_mask, scores, finfo.min) with the mask a constant bool tensor."""
    causal = np.tril(np.ones((8, 8), bool)).reshape(1, 1, 8, 8)

    def body(bb, v):
        floor = relax.const(np.finfo("float32").min, "float32")
        return relax.op.where(relax.const(causal), v["s"], floor)

    scores = data((1, 2, 8, 8), "float32")
    scores[0, 0, 0, 1] = np.nan  # masked: the fill shows, not the NaN
    offloaded_and_compared(module({"s": ((1, 2, 8, 8), "float32")}, body), [scores])


def test_a_select_of_integers_stays_on_the_cpu_with_a_reason():
    mod = module(
        {"x": ((4,), "int32")},
        lambda bb, v: relax.op.where(
            relax.op.greater(v["x"], relax.const(0, "int32")), v["x"], relax.const(0, "int32")
        ),
    )
    partitioned, report = partition_with_report(mod)
    assert report.cpu_ops["relax.where"] == 1
    assert "int32 values" in report.cpu_reason("relax.where"), report.table()
    x = np.array([-3, 0, 5, 2**31 - 1], "int32")
    np.testing.assert_array_equal(run(partitioned, [x])[0], run(mod, [x])[0])
