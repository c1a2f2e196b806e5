"""quantize_model: calibration, the QDQ rewrite, its numerics, errors, and an int8 accuracy demo.

The QDQ form checked here is the contract with the NPU's quantized patterns: per layer
``dequantize(x_q)`` and ``dequantize(W_q int8 const, axis=<output channel>)`` feed the float
conv2d / matmul, then the optional float bias add and relu / clip(0, 6), then one ``quantize``.
"""

from __future__ import annotations

import time
from collections import Counter

import example_npu
import numpy as np
import pytest
import tvm
from example_npu.partition.report import partition_with_report
from example_npu.quantize.calibrate import _RangeObserver
from example_npu.quantize.scheme import activation_params, weight_params
from spec_models import npu_ops
from tvm import relax

BATCH = 2


def _const(rng, *shape, scale=0.3):
    return relax.const((rng.standard_normal(shape) * scale).astype("float32"))


def cnn_module(seed: int = 0) -> tvm.IRModule:
    """conv+bias(reshaped)+relu -> maxpool -> conv+bias+relu6 -> reshape -> matmul [K, N] + bias
    (bias first) + relu -> Linear (permute_dims(W [N, K])) + bias; float output."""
    rng = np.random.default_rng(seed)
    x = relax.Var("x", relax.TensorType((BATCH, 3, 12, 12), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, _const(rng, 8, 3, 3, 3), padding=(1, 1, 1, 1)))
            b = bb.emit(relax.op.reshape(_const(rng, 8, scale=0.1), (1, 8, 1, 1)))
            y = bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(y, b))))
            y = bb.emit(relax.op.nn.max_pool2d(y, (2, 2), strides=(2, 2)))
            y = bb.emit(relax.op.nn.conv2d(y, _const(rng, 4, 8, 3, 3, scale=0.2), padding=1))
            y = bb.emit(relax.op.add(y, _const(rng, 1, 4, 1, 1, scale=0.1)))
            y = bb.emit(relax.op.clip(y, 0, 6))
            y = bb.emit(relax.op.reshape(y, (BATCH, 4 * 6 * 6)))
            y = bb.emit(relax.op.matmul(y, _const(rng, 144, 16, scale=0.15)))
            y = bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(_const(rng, 16, scale=0.1), y))))
            w = bb.emit(relax.op.permute_dims(_const(rng, 10, 16), [1, 0]))
            y = bb.emit(relax.op.add(bb.emit(relax.op.matmul(y, w)), _const(rng, 10, scale=0.1)))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return bb.get()


def nhwc_module(seed: int = 1) -> tvm.IRModule:
    """An NHWC conv2d with an HWIO weight (output-channel axis 3) + relu, returning floats."""
    rng = np.random.default_rng(seed)
    x = relax.Var("x", relax.TensorType((BATCH, 10, 10, 3), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            conv = relax.op.nn.conv2d(
                x,
                _const(rng, 3, 3, 3, 6),
                padding=1,
                data_layout="NHWC",
                kernel_layout="HWIO",
            )
            out = bb.emit_output(relax.op.nn.relu(bb.emit(conv)))
        bb.emit_func_output(out)
    return bb.get()


def branches_module(seed: int = 2) -> tvm.IRModule:
    """One input read by two matmul layers whose outputs meet in a float add."""
    rng = np.random.default_rng(seed)
    x = relax.Var("x", relax.TensorType((4, 32), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.nn.relu(bb.emit(relax.op.matmul(x, _const(rng, 32, 8)))))
            b = bb.emit(relax.op.matmul(x, _const(rng, 32, 8)))
            out = bb.emit_output(relax.op.add(a, b))
        bb.emit_func_output(out)
    return bb.get()


def blocks_module(seed: int = 3) -> tvm.IRModule:
    """Layers in a binding block, a dataflow block, and a binding block again."""
    rng = np.random.default_rng(seed)
    x = relax.Var("x", relax.TensorType((4, 16), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(relax.op.nn.relu(bb.emit(relax.op.matmul(x, _const(rng, 16, 8)))))
        with bb.dataflow():
            y = bb.emit_output(relax.op.nn.relu(bb.emit(relax.op.matmul(y, _const(rng, 8, 8)))))
        bb.emit_func_output(bb.emit(relax.op.matmul(y, _const(rng, 8, 4))))
    return bb.get()


def batches(mod: tvm.IRModule, count: int, seed: int = 10) -> list[np.ndarray]:
    shape = [int(d) for d in mod["main"].params[0].ty.shape]
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype("float32") for _ in range(count)]


def run(mod: tvm.IRModule, data: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(data)).numpy()


def bindings(mod: tvm.IRModule) -> dict:
    return {b.var: b.value for block in mod["main"].body.blocks for b in block.bindings}


def calls(mod: tvm.IRModule, op: str) -> list[relax.Call]:
    return [
        value
        for value in bindings(mod).values()
        if isinstance(value, relax.Call) and value.op.name == f"relax.{op}"
    ]


def op_of(values: dict, expr) -> str | None:
    value = values.get(expr)
    return value.op.name.removeprefix("relax.") if isinstance(value, relax.Call) else None


def users(values: dict, var) -> list:
    return [v for v, value in values.items() if var in relax.analysis.free_vars(value)]


def check_layer(values: dict, call: relax.Call, weight_axis: int, channels: int, act_dtype="int8"):
    """One quantized layer in the contract's shape; returns the ops after the producer."""
    x_dq = values[call.args[0]]
    assert op_of(values, call.args[0]) == "dequantize"
    assert int(x_dq.attrs.axis) == -1 and str(x_dq.attrs.out_dtype) == "float32"
    assert op_of(values, x_dq.args[0]) == "quantize"
    assert x_dq.args[1].value.numpy().shape == () and str(x_dq.args[1].ty.dtype) == "float32"
    assert str(x_dq.args[2].ty.dtype) == act_dtype and x_dq.args[2].value.numpy().shape == ()

    weight = call.args[1]
    if op_of(values, weight) == "permute_dims":
        weight = values[weight].args[0]
    w_dq = values[weight]
    assert op_of(values, weight) == "dequantize"
    assert isinstance(w_dq.args[0], tvm.ir.expr.Constant)
    assert str(w_dq.args[0].ty.dtype) == "int8"
    assert int(w_dq.attrs.axis) == weight_axis
    scale, zero_point = w_dq.args[1].value.numpy(), w_dq.args[2].value.numpy()
    assert scale.dtype == np.float32 and scale.shape == (channels,)
    assert zero_point.dtype == np.int8 and zero_point.shape == (channels,)
    assert not zero_point.any()

    chain, var = [], next(v for v, value in values.items() if value.same_as(call))
    while True:
        (user,) = users(values, var)
        chain.append(op_of(values, user))
        if chain[-1] == "quantize":
            assert str(values[user].attrs.out_dtype) == act_dtype
            return chain
        var = user


def test_structure_follows_the_qdq_contract():
    mod = cnn_module()
    qmod = example_npu.quantize_model(mod, batches(mod, 3))
    relax.analysis.well_formed(qmod)
    values = bindings(qmod)
    ops = Counter(op_of(values, v) for v in values)
    # quantize: the input, 4 layer outputs, and the maxpool and reshape units = 7; dequantize:
    # 4 layer inputs, 4 weights, 4 int32 biases, the maxpool and reshape inputs, the output = 15.
    assert ops["quantize"] == 7 and ops["dequantize"] == 15
    assert ops["nn.conv2d"] == 2 and ops["matmul"] == 2

    conv1, conv2 = calls(qmod, "nn.conv2d")
    matmul, dense = calls(qmod, "matmul")
    assert check_layer(values, conv1, 0, 8) == ["add", "nn.relu", "quantize"]
    assert check_layer(values, conv2, 0, 4) == ["add", "clip", "quantize"]
    assert check_layer(values, matmul, 1, 16) == ["add", "nn.relu", "quantize"]
    assert check_layer(values, dense, 0, 10) == ["add", "quantize"]
    # biases are onnxruntime's: int32 under dequantize (scale x_scale * w_scale, zero point 0),
    # reshaped to (1, C, 1, 1) for the convolutions
    for add, channels in zip(calls(qmod, "add"), (8, 4, 16, 10), strict=True):
        bias = add.args[1]
        if op_of(values, bias) == "reshape":
            assert [int(d) for d in values[bias].args[1].values] == [1, channels, 1, 1]
            bias = values[bias].args[0]
        bias_dq = values[bias]
        assert op_of(values, bias) == "dequantize" and str(bias_dq.args[0].ty.dtype) == "int32"
        assert bias_dq.args[1].value.numpy().shape == (channels,)
        assert not bias_dq.args[2].value.numpy().any()
    # the first op quantizes the float input; the result is float32
    first = qmod["main"].body.blocks[0].bindings[0].value
    assert first.op.name == "relax.quantize" and first.args[0].same_as(qmod["main"].params[0])
    assert str(qmod["main"].ret_ty.dtype) == "float32"
    # no float32 weight is left: every large constant is int8
    for call in calls(qmod, "nn.conv2d") + calls(qmod, "matmul"):
        assert not any(isinstance(arg, tvm.ir.expr.Constant) for arg in call.args)
    # the input module is unchanged
    assert not calls(mod, "quantize")


def test_per_tensor_weights_and_hwio_axis():
    mod = nhwc_module()
    qmod = example_npu.quantize_model(mod, batches(mod, 2), per_channel=False)
    relax.analysis.well_formed(qmod)
    values = bindings(qmod)
    (conv,) = calls(qmod, "nn.conv2d")
    w_dq = values[conv.args[1]]
    assert int(w_dq.attrs.axis) == 3
    assert w_dq.args[1].value.numpy().shape == () and w_dq.args[2].value.numpy().shape == ()

    qmod = example_npu.quantize_model(mod, batches(mod, 2))
    values = bindings(qmod)
    (conv,) = calls(qmod, "nn.conv2d")
    assert check_layer(values, conv, 3, 6) == ["nn.relu", "quantize"]


def test_shared_input_is_quantized_once():
    mod = branches_module()
    qmod = example_npu.quantize_model(mod, batches(mod, 2))
    relax.analysis.well_formed(qmod)
    values = bindings(qmod)
    (x_q,) = [v for v in values if op_of(values, v) == "quantize" and v.name == "x_q"]
    assert len(users(values, x_q)) == 2  # one dequantize per layer
    for call in calls(qmod, "matmul"):
        check_layer(values, call, 1, 8)


def test_layers_in_several_blocks():
    mod = blocks_module()
    qmod = example_npu.quantize_model(mod, batches(mod, 16))
    relax.analysis.well_formed(qmod)
    values = bindings(qmod)
    ops = Counter(op_of(values, v) for v in values)
    # the first layer's quantize (a non-dataflow var) is reused in the dataflow block; the
    # dataflow block's is not visible after it, so the last layer quantizes its float output
    assert ops["quantize"] == 5 and ops["dequantize"] == 8
    for call, channels in zip(calls(qmod, "matmul"), (8, 8, 4), strict=True):
        check_layer(values, call, 1, channels)
    (data,) = batches(mod, 1, seed=99)
    want, got = run(mod, data), run(qmod, data)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 0.03  # measured 0.9%


def test_int16_activations_are_symmetric():
    mod = cnn_module()
    qmod = example_npu.quantize_model(mod, batches(mod, 2), activation_dtype="int16")
    values = bindings(qmod)
    for call in calls(qmod, "quantize"):
        assert str(call.attrs.out_dtype) == "int16"
        assert call.args[2].value.numpy() == 0 and str(call.args[2].ty.dtype) == "int16"
    check_layer(values, calls(qmod, "nn.conv2d")[0], 0, 8, act_dtype="int16")


@pytest.fixture(scope="module")
def cnn_reference():
    """The float CNN, a held-out batch (same distribution as the calibration set) and its output."""
    mod = cnn_module()
    (data,) = batches(mod, 1, seed=99)
    return mod, data, run(mod, data)


# Relative L2 error of the quantized model (TVM's CPU build) against the float one on a batch
# not used for calibration. Measured: 1.5% (int8, per channel), 2.1% (int8, per tensor),
# 1.4% (percentile), 0.7% (int16 activations; the weights stay int8). Bounds: about 2x that.
@pytest.mark.parametrize(
    "options, bound",
    [
        ({}, 0.03),
        ({"per_channel": False}, 0.04),
        ({"method": "percentile"}, 0.035),
        ({"activation_dtype": "int16"}, 0.015),
    ],
    ids=["int8", "int8-per-tensor", "percentile", "int16"],
)
def test_quantized_model_approximates_float(cnn_reference, options, bound):
    mod, data, want = cnn_reference
    qmod = example_npu.quantize_model(mod, batches(mod, 4), **options)
    got = run(qmod, data)
    error = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert error < bound, f"relative error {error:.4f}"


def test_percentile_clips_outliers():
    mod = branches_module()
    data = batches(mod, 4)
    data[0][0, 0] = 1000.0  # one outlier among 512 values

    def input_scale(qmod):
        return float(calls(qmod, "quantize")[0].args[1].value.numpy())

    minmax = input_scale(example_npu.quantize_model(mod, data))
    percentile = input_scale(
        example_npu.quantize_model(mod, data, method="percentile", percentile=99.5)
    )
    assert minmax > 1000.0 / 255 * 0.99
    assert percentile < minmax / 50


def test_scheme_formulas():
    params = activation_params(0.5, 6.0, "int8")  # widened to [0, 6]: zero is exact
    assert params.scale == np.float32(6.0 / 255) and params.zero_point == -128
    params = activation_params(-1.0, 3.0, "int8")
    assert params.zero_point == np.round(-128 + 1.0 / float(params.scale))
    params = activation_params(-2.0, 1.0, "int16")
    assert params.scale == np.float32(2.0 / 32767) and params.zero_point == 0
    assert activation_params(0.0, 0.0, "int8").scale == 1.0

    weight = np.array([[1.0, -2.0], [0.0, 0.0], [0.5, 0.25]], "float32")  # [K=3, N=2]
    params, q = weight_params(weight, axis=1, per_channel=True)
    np.testing.assert_allclose(params.scale, [1.0 / 127, 2.0 / 127], rtol=1e-6)
    np.testing.assert_array_equal(q[:, 1], [-127, 0, 16])
    params, q = weight_params(weight, axis=1, per_channel=False)
    assert params.scale.shape == () and q.max() == 64 and q.min() == -127

    observer = _RangeObserver("percentile", 99.0)
    observer.observe(np.concatenate([np.linspace(-1, 1, 999), [50.0]]).astype("float32"))
    lo, hi = observer.range()
    assert -1.0 <= lo < -0.9 and 0.9 < hi < 2.0


def test_errors():
    mod = cnn_module()
    good = batches(mod, 1)
    shape = tuple(good[0].shape)
    cases = [
        (ValueError, "calibration_data is empty", {"calibration_data": []}),
        (ValueError, "calibration_data is empty", {"calibration_data": None}),
        (TypeError, "not a single array", {"calibration_data": good[0]}),
        (
            ValueError,
            r"shape \(2, 3, 12, 13\), main expects \(2, 3, 12, 12\)",
            {"calibration_data": [np.zeros((2, 3, 12, 13), "float32")]},
        ),
        (
            ValueError,
            "dtype float64, main expects float32",
            {"calibration_data": [np.zeros(shape, "float64")]},
        ),
        (ValueError, "has 2 input", {"calibration_data": [(good[0], good[0])]}),
        (ValueError, "unsupported weight_dtype 'int16'", {"weight_dtype": "int16"}),
        (ValueError, "unsupported activation_dtype 'uint8'", {"activation_dtype": "uint8"}),
        (ValueError, "unknown calibration method 'kl'", {"method": "kl"}),
        (ValueError, "percentile must be in", {"method": "percentile", "percentile": 10}),
        (TypeError, "expected a tvm.IRModule", {"mod": mod["main"]}),
    ]
    for error, message, overrides in cases:
        kwargs = {"mod": mod, "calibration_data": good, **overrides}
        with pytest.raises(error, match=message):
            example_npu.quantize_model(kwargs.pop("mod"), kwargs.pop("calibration_data"), **kwargs)

    x = relax.Var("x", relax.TensorType((2, 4), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(relax.op.matmul(x, relax.const(np.ones((4, 4), "int8"))))
    with pytest.raises(TypeError, match="parameter 'x' is int8; quantize_model takes a float32"):
        example_npu.quantize_model(bb.get(), [np.zeros((2, 4), "int8")])


def _digits_cnn():
    """The accuracy demo's model and data: a small CNN trained on scikit-learn's 8x8 digits."""
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from torch import nn

    class DigitsCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
            self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
            self.fc = nn.Linear(16 * 4 * 4, 10)

        def forward(self, x):
            x = nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
            x = torch.relu(self.conv2(x))
            return self.fc(torch.flatten(x, 1))

    digits = load_digits()
    images = (digits.images / 16.0).astype("float32")[:, None]
    x_train, x_test, y_train, y_test = train_test_split(
        images, digits.target, test_size=360, random_state=0, stratify=digits.target
    )
    torch.manual_seed(0)
    model = DigitsCNN()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    inputs, labels = torch.from_numpy(x_train), torch.from_numpy(y_train)
    generator = torch.Generator().manual_seed(0)
    for _ in range(10):
        order = torch.randperm(len(inputs), generator=generator)
        for start in range(0, len(inputs), 64):
            index = order[start : start + 64]
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(inputs[index]), labels[index]).backward()
            optimizer.step()
    return model.eval(), x_train, x_test, y_test


@pytest.mark.filterwarnings("ignore:.*LeafSpec:FutureWarning")  # inside torch.export
def test_int8_accuracy_on_digits(summary_line):
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    start = time.perf_counter()
    model, x_train, x_test, y_test = _digits_cnn()
    batch = 20
    example = torch.from_numpy(x_train[:batch])
    mod = from_exported_program(torch.export.export(model, (example,)))
    calibration = [x_train[i : i + batch] for i in range(0, 100, batch)]  # 100 training images
    qmod = example_npu.quantize_model(mod, calibration)

    def accuracy(module):
        executable = tvm.compile(example_npu.partition_for_npu(module), target="llvm")
        vm = relax.VirtualMachine(executable, tvm.cpu())
        predictions = [
            vm["main"](tvm.runtime.tensor(x_test[i : i + batch]))[0].numpy().argmax(1)
            for i in range(0, len(x_test), batch)
        ]
        return 100.0 * float(np.mean(np.concatenate(predictions) == y_test))

    # conv1, conv2 and the Linear layer are quantized (int8 weights per output channel, int32
    # biases), and run as integer ops on the NPU
    constants = [
        c for c in calls(qmod, "dequantize") if isinstance(c.args[0], tvm.ir.expr.Constant)
    ]
    dtypes = Counter(str(c.args[0].ty.dtype) for c in constants)
    assert dtypes == {"int8": 3, "int32": 3}
    nodes = Counter(npu_ops(example_npu.partition_for_npu(qmod)))
    assert nodes["qnn.conv2d"] == 2 and nodes["qnn.matmul"] == 1 and nodes["qnn.max_pool2d"] == 1
    assert not {"nn.conv2d", "matmul", "nn.max_pool2d"} & set(nodes)

    float_accuracy, int8_accuracy = accuracy(mod), accuracy(qmod)
    percentile_accuracy = accuracy(
        example_npu.quantize_model(mod, calibration, method="percentile")
    )
    summary_line(
        f"PTQ digits CNN ({len(y_test)} held-out images): float32 {float_accuracy:.2f}%, "
        f"int8 {int8_accuracy:.2f}% (minmax), {percentile_accuracy:.2f}% (percentile) "
        f"[{time.perf_counter() - start:.1f} s incl. training]"
    )
    assert float_accuracy >= 90.0
    assert abs(int8_accuracy - float_accuracy) <= 1.0
    assert abs(percentile_accuracy - float_accuracy) <= 1.0


def first_output(mod: tvm.IRModule):
    """Compiles mod once; returns x -> the first output of its main (PyTorch's are tuples)."""
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return lambda data: vm["main"](tvm.runtime.tensor(data))[0].numpy()


CNNS = ("resnet", "mobilenet_v2", "mobilenet_v3", "efficientnet", "squeezenet", "shufflenet_v2")


@pytest.fixture(scope="module")
def exported_cnns():
    """name -> (float Relax module, 8 random calibration batches) for real_models' CNNs."""
    import real_models

    rng = np.random.default_rng(0)
    result = {}
    for name in CNNS:
        model = real_models.MODELS_BY_NAME[name]
        module, data = real_models.instantiate(model)
        calibration = [rng.standard_normal(model.input_shape).astype("float32") for _ in range(8)]
        result[name] = (real_models.import_torch(module, data), calibration)
    return result


def test_batch_norm_is_folded_before_calibration(exported_cnns):
    from example_npu.quantize.fold import fold_batch_norm

    mod, calibration = exported_cnns["resnet"]
    assert calls(mod, "nn.batch_norm")
    folded = fold_batch_norm(mod)
    assert not calls(folded, "nn.batch_norm")
    x = calibration[0]
    want, got = first_output(mod)(x), first_output(folded)(x)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    assert not calls(example_npu.quantize_model(mod, calibration), "nn.batch_norm")


def output_step(mod: tvm.IRModule) -> float:
    """The scale of the dequantize that produces main's first output."""
    values = bindings(mod)
    out = values.get(mod["main"].body.body, mod["main"].body.body)
    first = out.fields[0] if isinstance(out, relax.Tuple) else out
    dequantize = values[first]
    assert dequantize.op.name == "relax.dequantize", dequantize
    return float(dequantize.args[1].value.numpy())


@pytest.mark.filterwarnings("ignore:.*LeafSpec:FutureWarning")
@pytest.mark.parametrize("name", CNNS)
def test_quantized_cnn_runs_integer_on_the_npu(exported_cnns, name, summary_line):
    """quantize_model emits onnxruntime's QDQ form, so the same lowering serves it: the whole
    model is one NPU function, every conv / matmul is an integer qnn op and the glue between
    them (pooling, add, mul, concat, activations as tables) too. Output within one quantization
    step of TVM's CPU build of the same quantized module; relative output error against float32
    on random inputs."""
    mod, calibration = exported_cnns[name]
    quantized = example_npu.quantize_model(mod, calibration)
    offloaded, report = partition_with_report(quantized)
    assert len(report.npu_functions) == 1, report.table()
    assert not +report.cpu_ops, report.table()
    nodes = Counter(npu_ops(offloaded))
    layers = len(calls(mod, "nn.conv2d")) + len(calls(mod, "matmul"))
    assert nodes["qnn.conv2d"] + nodes["qnn.matmul"] == layers, nodes
    assert not {"nn.conv2d", "matmul", "add", "multiply", "nn.max_pool2d"} & set(nodes), nodes
    rng = np.random.default_rng(1)
    errors, steps = [], []
    reference, cpu, npu = first_output(mod), first_output(quantized), first_output(offloaded)
    step = output_step(quantized)
    for _ in range(4):
        x = rng.standard_normal(calibration[0].shape).astype("float32")
        want, got = reference(x), npu(x)
        errors.append(np.linalg.norm(got - want) / np.linalg.norm(want))
        steps.append(np.abs(got.astype(np.float64) - cpu(x)).ravel() / step)
    error = float(np.mean(errors))
    steps = np.concatenate(steps)
    summary_line(
        f"quantize_model {name}: relative output error vs float32 {error:.2%} (NPU); "
        f"{np.mean(steps > 0.5):.2%} of outputs one step from TVM's CPU build"
    )
    assert steps.max() <= 1.0 + 1e-6
    assert error < 0.03
