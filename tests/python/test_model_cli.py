"""``example-npu compile`` / ``profile`` run as a user runs them: the installed console script in
a subprocess, on model files the tests write, checked against onnxruntime and PyTorch."""

from __future__ import annotations

import csv
import json
import pickle
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
from example_npu import NPUConfig
from model_files import onnxruntime_outputs, write_onnx_cnn, write_onnx_mlp, write_pt2_cnn

CLI = Path(sys.executable).with_name("example-npu")
IMAGE_SHAPE = (1, 3, 16, 16)


def example_npu(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    assert CLI.exists(), f"console script missing: {CLI}"
    return subprocess.run(
        [str(CLI), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def image(seed: int = 1, dtype: str = "float32") -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(IMAGE_SHAPE).astype(dtype)


@pytest.fixture(scope="module")
def onnx_cnn(tmp_path_factory) -> Path:
    return write_onnx_cnn(tmp_path_factory.mktemp("onnx") / "tiny_cnn.onnx")


def test_compile_exports_a_library_that_plain_tvm_loads_and_runs(onnx_cnn, tmp_path):
    result = example_npu(
        "compile", onnx_cnn, "-o", "cnn.so", "--input", "x:1x3x16x16", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "NPU functions:" in result.stdout and "  NPU  relax.nn.conv2d" in result.stdout
    assert "inputs: x float32[1x3x16x16]" in result.stdout
    x = image()
    np.save(tmp_path / "x.npy", x)
    # A fresh process with only `import tvm`: autoload registers the NPU module loader.
    script = textwrap.dedent(
        """
        import numpy as np, tvm
        from tvm import relax
        vm = relax.VirtualMachine(tvm.runtime.load_module("cnn.so"), tvm.cpu())
        np.save("out.npy", vm["main"](tvm.runtime.tensor(np.load("x.npy"))).numpy())
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    (expected,) = onnxruntime_outputs(onnx_cnn, {"x": x})
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, rtol=1e-4, atol=1e-5)


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def test_profile_prints_the_summary_and_its_files_hold_the_same_numbers(onnx_cnn, tmp_path):
    x = image(seed=2)
    np.savez(tmp_path / "in.npz", x=x)
    result = example_npu(
        "profile", onnx_cnn, "--input", "x:1x3x16x16", "--input-data", "in.npz",
        "--csv", "layers.csv", "--json", "summary.json", "--trace", "trace.json",
        "--output-data", "out.npz", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (expected,) = onnxruntime_outputs(onnx_cnn, {"x": x})
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["probs"], expected, atol=1e-5)

    data = json.loads((tmp_path / "summary.json").read_text())
    summary, layers = data["summary"], data["layers"]
    # The CSV holds exactly the JSON's layer rows.
    rows = read_csv_rows(tmp_path / "layers.csv")
    assert len(rows) == len(layers) > 0
    for row, layer in zip(rows, layers, strict=True):
        assert set(row) == set(layer)
        for key, value in layer.items():
            assert row[key] == str(value), key
    # The summary's totals are the sums (and high-water marks) of its layers. A layer's cycles
    # are its span, and the next layer's loads start while the previous one computes, so the
    # spans add up to at least the total.
    assert summary["npu_functions"] >= 1 and summary["npu_ops"] > 0
    assert summary["macs"] == sum(layer["macs"] for layer in layers) > 0
    cycles = [layer["cycles"] for layer in layers]
    assert max(cycles) <= summary["cycles"] <= sum(cycles)
    for tier, moved in summary["bytes_moved"].items():
        assert moved == sum(layer[f"bytes_{tier}"] for layer in layers), tier
    assert summary["energy_uj"] == pytest.approx(sum(layer["energy_uj"] for layer in layers))
    assert summary["sram_used_bytes"]["L1"] >= max(layer["l1_used_bytes"] for layer in layers)
    assert 0 < summary["sram_used_bytes"]["L1"] <= summary["sram_size_bytes"]["L1"]
    assert summary["latency_us"] == pytest.approx(summary["cycles"] / summary["clock_mhz"])
    assert 0 < summary["utilization"]["matrix"] <= 1
    # The printed summary shows the same numbers.
    out = result.stdout
    assert f"Network summary for {onnx_cnn}" in out
    for label, value in [
        ("MACs", f"{summary['macs']:,}"),
        ("NPU cycles", f"{summary['cycles']:,}"),
        ("NPU energy", f"{summary['energy_uj']:,.3f} uJ"),
        ("DRAM bytes moved", f"{summary['bytes_moved']['DRAM']:,}"),
        ("NPU operators", f"{summary['npu_ops']} "),
        ("CPU operators", f"{summary['cpu_ops']} "),
        ("L1 SRAM used", f"{summary['sram_used_bytes']['L1'] / 1024:,.2f} KiB"),
        ("L2 CMX used", f"{summary['sram_used_bytes']['L2'] / 1024:,.2f} KiB"),
    ]:
        line = next(line for line in out.splitlines() if line.startswith(label))
        assert value in line, (label, line)
    for op, entry in summary["cpu_op_counts"].items():
        assert f"{op} x{entry['count']}" in out and entry["reason"] in out
    for layer in layers:
        assert layer["layer"][:27] in out  # the per-layer table
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert any(event.get("ph") == "X" for event in trace["traceEvents"])


def test_config_takes_a_preset_name(onnx_cnn, tmp_path):
    result = example_npu(
        "profile", onnx_cnn, "--input", "x:1x3x16x16", "--config", "ethos-u55-256",
        "--json", "summary.json", "--output-data", "out.npz", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())["summary"]
    assert summary["npu_config"] == json.loads(NPUConfig.preset("ethos-u55-256").to_json())
    assert summary["clock_mhz"] == 500
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype("float32")
    (expected,) = onnxruntime_outputs(onnx_cnn, {"x": x})
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["probs"], expected, atol=1e-5)


def test_profile_follows_the_config_file(onnx_cnn, tmp_path):
    config = {"l1_sram_kb": 16, "power_mode": "low_power"}
    (tmp_path / "npu.json").write_text(json.dumps(config))
    result = example_npu(
        "profile", onnx_cnn, "--input", "x:2x3x16x16", "--config", "npu.json", "--seed", "3",
        "--json", "summary.json", "--output-data", "out.npz", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())["summary"]
    assert summary["npu_config"]["l1_sram_kb"] == 16 and summary["clock_mhz"] == 400
    assert 0 < summary["sram_used_bytes"]["L1"] <= 16 * 1024
    # --seed 3 inputs: the same standard-normal draw the CLI documents.
    x = np.random.default_rng(3).standard_normal((2, 3, 16, 16)).astype("float32")
    (expected,) = onnxruntime_outputs(onnx_cnn, {"x": x})
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["probs"], expected, atol=1e-5)


def test_profile_of_a_model_with_nothing_for_the_npu_names_the_reasons(tmp_path):
    model = write_onnx_mlp(tmp_path / "mlp64.onnx", dtype="float64")
    x = np.random.default_rng(4).standard_normal((2, 32))
    np.savez(tmp_path / "in.npz", x=x)
    result = example_npu(
        "profile", model, "--input", "x:2x32", "--input-data", "in.npz",
        "--json", "summary.json", "--output-data", "out.npz", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())["summary"]
    assert summary["npu_functions"] == 0 and summary["npu_ops"] == 0 and summary["cycles"] == 0
    reason = summary["cpu_op_counts"]["relax.matmul"]["reason"]
    assert "dtype float64 has no NPU datapath" in reason and reason in result.stdout
    (expected,) = onnxruntime_outputs(model, {"x": x})
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["probs"], expected, atol=1e-12)


def test_profile_of_a_torch_export_archive_with_a_dynamic_batch(tmp_path):
    x = image(seed=5)
    expected = write_pt2_cnn(tmp_path / "cnn.pt2", x, dynamic_batch=True)
    np.savez(tmp_path / "in.npz", x)  # positional: arr_0
    result = example_npu(
        "profile", "cnn.pt2", "--input", "x:1x3x16x16", "--input-data", "in.npz",
        "--output-data", "out.npz", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "NPU cycles" in result.stdout
    assert "Warning" not in result.stderr, result.stderr  # torch's own deprecation noise is hidden
    (actual,) = np.load(tmp_path / "out.npz").values()
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-6)


WITH_DATA = "profile {onnx} --input x:1x3x16x16 --input-data"
# case: (arguments, what the one error line says)
BAD_INPUTS = {
    "missing model": ("profile absent.onnx", "model file not found: absent.onnx"),
    "unknown format": ("compile model.caffemodel -o m.so", "unknown model format '.caffemodel'"),
    "not TFLite": ("profile model.tflite", "is not a TFLite model"),
    "bad shape": ("profile {onnx} --input x:1xAx16x16", "positive integers"),
    "wrong rank": ("profile {onnx} --input x:1x3x16", "does not fit the shape ?x3x16x16"),
    "unknown input": ("profile {onnx} --input y:1x3x16x16", "has no input of that name"),
    "open dimension": ("compile {onnx} -o m.so", "--input x:Nx3x16x16"),
    "config not JSON": ("profile {onnx} --config broken.json", "is not valid JSON"),
    "config value": ("profile {onnx} --config negative.json", "l1_sram_kb must be in [1, 1048576]"),
    "config field": ("profile {onnx} --config typo.json", "unknown NPUConfig fields"),
    "missing config": ("profile {onnx} --config absent.json", "config file not found"),
    "not ONNX": ("profile garbage.onnx", "is not a valid ONNX model"),
    "object array": (f"{WITH_DATA} object.npz", "Object arrays cannot be loaded"),
    "truncated data": (f"{WITH_DATA} truncated.npz", "truncated.npz is not an .npz file"),
    "huge header": (f"{WITH_DATA} header.npz", "Header info length"),
    "pickled data": (f"{WITH_DATA} pickle.npz", "is not an .npz file"),
    "huge shape": ("profile {onnx} --input x:99999999999x3x16x16", "a tensor holds at most"),
    "superscript": ("profile {onnx} --input x:1x3x16x1²", "positive integers"),
    "deep config": ("profile {onnx} --config deep.json", "nested too deeply"),
    "long number": ("profile {onnx} --config digits.json", "Exceeds the limit (4300 digits)"),
    "one tile": ("profile {onnx} --input x:1x3x16x16 --config tiles.json", "max_tiles"),
    "huge Tile": ("profile tile.onnx", "40000000000 elements"),
    "huge ConstantOfShape": ("profile fill.onnx", "10000000000 elements"),
    "nested If": ("profile nested_if.onnx", "relax.expr.If"),
}


def write_bad_graphs(folder: Path) -> None:
    """ONNX graphs that allocate 10^10 elements or nest control flow, and configs the JSON
    reader cannot take."""
    from onnx import TensorProto, helper, numpy_helper, save

    def tensor(name: str, shape: list[int]):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    def graph(name, nodes, output_shape, initializers=()):
        weights = [numpy_helper.from_array(array, key) for key, array in initializers]
        body = helper.make_graph(
            nodes, name, [tensor("x", [1, 4])], [tensor("y", output_shape)], weights
        )
        save(helper.make_model(body, opset_imports=[helper.make_opsetid("", 17)]), folder / name)

    huge = np.array([100_000, 100_000], np.int64)
    graph("tile.onnx", [helper.make_node("Tile", ["x", "repeats"], ["y"])], [100_000, 400_000],
          [("repeats", np.array([100_000, 100_000], np.int64))])  # fmt: skip
    one = numpy_helper.from_array(np.ones(1, np.float32))
    graph("fill.onnx", [helper.make_node("ConstantOfShape", ["shape"], ["y"], value=one)],
          [100_000, 100_000], [("shape", huge)])  # fmt: skip
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "leaf", [],
                               [tensor("y", [1, 4])])  # fmt: skip
    for depth in range(3):
        node = helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)
        branch = helper.make_graph([node], f"if{depth}", [], [tensor("y", [1, 4])])
    graph("nested_if.onnx", list(branch.node), [1, 4], [("c", np.array(True))])
    (folder / "deep.json").write_text('{"a": ' * 100_000 + "1" + "}" * 100_000)
    (folder / "digits.json").write_text('{"l1_sram_kb": ' + "9" * 5000 + "}")
    (folder / "tiles.json").write_text('{"max_tiles": 1}')


def write_bad_input_data(folder: Path) -> None:
    """.npz files numpy reads only by unpickling, or not at all."""
    np.savez(folder / "object.npz", x=np.array([1, "a"], dtype=object))
    np.savez(folder / "good.npz", x=image())
    good = (folder / "good.npz").read_bytes()
    (folder / "truncated.npz").write_bytes(good[: len(good) // 2])
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 16, 16), }"
    header = header.ljust(200_000) + "\n"
    npy = b"\x93NUMPY\x02\x00" + len(header).to_bytes(4, "little") + header.encode()
    with zipfile.ZipFile(folder / "header.npz", "w") as archive:
        archive.writestr("x.npy", npy + image().tobytes())
    (folder / "pickle.npz").write_bytes(pickle.dumps({"x": image()}))


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_a_bad_input_is_one_line_and_exit_status_2(case, onnx_cnn, tmp_path):
    (tmp_path / "model.caffemodel").write_bytes(b"\x00")
    (tmp_path / "model.tflite").write_bytes(b"TFL3")
    (tmp_path / "garbage.onnx").write_bytes(b"\x00not a protobuf\xff" * 8)
    (tmp_path / "broken.json").write_text('{"l1_sram_kb": 64,')
    (tmp_path / "negative.json").write_text('{"l1_sram_kb": -1}')
    (tmp_path / "typo.json").write_text('{"l1_sram_kib": 64}')
    write_bad_input_data(tmp_path)
    write_bad_graphs(tmp_path)
    args, message = BAD_INPUTS[case]
    result = example_npu(*args.format(onnx=onnx_cnn).split(), cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()  # no traceback, no usage text: one line
    assert len(lines) == 1 and lines[0].startswith("example-npu: error: "), result.stderr
    assert message in lines[0]


def test_reading_onnx_without_the_onnx_package_says_how_to_install_it(onnx_cnn, tmp_path):
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["onnx"] = None  # as if onnx were not installed
        from example_npu.cli import main
        sys.exit(main(["profile", {str(onnx_cnn)!r}]))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 2
    assert "pip install 'example-npu[onnx]'" in result.stderr.strip().splitlines()[-1]


def test_profile_of_a_tflite_file_with_an_open_batch(tmp_path):
    """A .tflite file's open batch is 1 without --input; the output is LiteRT's (within 1 step:
    TVM's own rounding where ops stay on the CPU)."""
    from tflite_models import model_path, random_inputs, run_litert

    path = model_path("kws_dscnn", open_batch=True)
    (x,) = random_inputs(path, 1, seed=2)
    np.savez(tmp_path / "in.npz", x)
    result = example_npu(
        "profile", path, "--input-data", "in.npz", "--output-data", "out.npz", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "NPU functions" in result.stdout
    (actual,) = np.load(tmp_path / "out.npz").values()
    expected = run_litert(path, x)
    assert actual.shape == expected.shape
    assert np.abs(actual.astype(int) - expected.astype(int)).max() <= 1
