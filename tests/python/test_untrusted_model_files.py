"""Model files are untrusted: hostile ``.pt2`` archives run nothing (their payload would create a
file; the tests check it is absent), ONNX external data outside the model's folder is refused,
and each refusal is one line (exit status 2 from the command line)."""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import tvm
from example_npu.frontend.model_file import ModelFileError, load_model
from model_files import write_pt2_cnn

CLI = Path(sys.executable).with_name("example-npu")
IMAGE = np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype("float32")


class CreatesFile:
    """A pickle whose loading creates ``path``: what a hostile archive would run."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def rewrite_archive(source: Path, target: Path, edit: Callable[[dict[str, bytes]], None]) -> None:
    """Copies a torch.export archive with ``edit`` applied to its entries (names under the
    archive's root folder)."""
    with zipfile.ZipFile(source) as archive:
        root = archive.namelist()[0].split("/", 1)[0]
        entries = {name.split("/", 1)[1]: archive.read(name) for name in archive.namelist()}
    edit(entries)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as out:
        for name, data in entries.items():
            out.writestr(f"{root}/{name}", data)


def pickled_weight(marker: Path) -> Callable[[dict[str, bytes]], None]:
    """The first weight stored with ``use_pickle``, its bytes a payload."""

    def edit(entries: dict[str, bytes]) -> None:
        name = "data/weights/model_weights_config.json"
        config = json.loads(entries[name])
        first = next(iter(config["config"].values()))
        first["use_pickle"] = True
        entries[name] = json.dumps(config).encode()
        entries[f"data/weights/{first['path_name']}"] = pickle.dumps(CreatesFile(marker))

    return edit


def opaque_constant(marker: Path) -> Callable[[dict[str, bytes]], None]:
    def edit(entries: dict[str, bytes]) -> None:
        name = "data/constants/model_constants_config.json"
        config = json.loads(entries.get(name, b'{"config": {}}'))
        config["config"]["evil"] = {"path_name": "opaque_obj_0", "is_param": False,
                                    "use_pickle": True, "tensor_meta": None}  # fmt: skip
        entries[name] = json.dumps(config).encode()
        entries["data/constants/opaque_obj_0"] = pickle.dumps(CreatesFile(marker))

    return edit


def pickled_example_inputs(marker: Path) -> Callable[[dict[str, bytes]], None]:
    """torch retries a failed restricted unpickling of the example inputs without restriction."""

    def edit(entries: dict[str, bytes]) -> None:
        buffer = io.BytesIO()
        torch.save(CreatesFile(marker), buffer)
        entries["data/sample_inputs/model.pt"] = buffer.getvalue()

    return edit


def program_edit(change: Callable[[dict], None]) -> Callable[[Path], Callable]:
    def make(_marker: Path) -> Callable[[dict[str, bytes]], None]:
        def edit(entries: dict[str, bytes]) -> None:
            program = json.loads(entries["models/model.json"])
            change(program)
            entries["models/model.json"] = json.dumps(program).encode()

        return edit

    return make


def code_in_shape(marker: Path) -> Callable[[dict[str, bytes]], None]:
    """A symbolic size whose text sympy would evaluate: it creates the marker."""

    def change(program: dict) -> None:
        tensor = next(iter(program["graph_module"]["graph"]["tensor_values"].values()))
        code = f"__import__('builtins').open({str(marker)!r}, 'w') and Symbol('s0')"
        tensor["sizes"][0] = {"as_expr": {"expr_str": code, "hint": {"as_int": 1}}}

    return program_edit(change)(marker)


def foreign_target(marker: Path) -> Callable[[dict[str, bytes]], None]:
    def change(program: dict) -> None:
        program["graph_module"]["graph"]["nodes"][0]["target"] = "torch.os.system"

    return program_edit(change)(marker)


def compiled_code(marker: Path) -> Callable[[dict[str, bytes]], None]:
    def edit(entries: dict[str, bytes]) -> None:
        entries["data/aotinductor/model/model.so"] = b"\x7fELF"

    return edit


def legacy_weights(marker: Path) -> Callable[[dict[str, bytes]], None]:
    def edit(entries: dict[str, bytes]) -> None:
        entries["data/weights/model.pt"] = pickle.dumps(CreatesFile(marker))

    return edit


# case: (how the archive is made hostile, what the refusal names)
HOSTILE = {
    "pickled weight": (pickled_weight, "are stored as a pickle"),
    "opaque object": (opaque_constant, "pickled Python objects"),
    "code in a shape": (code_in_shape, "is Python code"),
    "foreign call": (foreign_target, "'torch.os.system', not a PyTorch operator"),
    "compiled code": (compiled_code, "AOTInductor compiled code"),
    "legacy pickle": (legacy_weights, "pickled data (data/weights/model.pt)"),
}


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pt2") / "cnn.pt2"
    write_pt2_cnn(path, IMAGE, dynamic_batch=True)
    return path


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_archive_runs_nothing_and_is_refused_in_one_line(case, archive, tmp_path):
    make, message = HOSTILE[case]
    marker = tmp_path / "pwned"
    rewrite_archive(archive, tmp_path / "evil.pt2", make(marker))
    with pytest.raises(ModelFileError) as error:
        load_model(tmp_path / "evil.pt2", {"x": IMAGE.shape})
    assert not marker.exists()
    assert message in str(error.value) and "\n" not in str(error.value)
    assert "--trust-model-file" in str(error.value)
    result = subprocess.run(
        [str(CLI), "profile", "evil.pt2", "--input", "x:1x3x16x16"],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert result.returncode == 2 and not marker.exists()
    assert result.stderr.strip() == f"example-npu: error: {error.value}"


def test_the_hostile_payload_is_real_when_torch_reads_the_file_itself(archive, tmp_path):
    """The files above are effective: torch.export.load runs their payloads (in a child)."""
    for make in (pickled_weight, pickled_example_inputs):
        marker = tmp_path / f"pwned_{make.__name__}"
        rewrite_archive(archive, tmp_path / "evil.pt2", make(marker))
        evil = str(tmp_path / "evil.pt2")
        script = f"import torch\ntry: torch.export.load({evil!r})\nexcept Exception: pass"
        subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=600)
        assert marker.exists(), make.__name__


def test_pickled_example_inputs_are_never_read(archive, tmp_path):
    marker = tmp_path / "pwned"
    rewrite_archive(archive, tmp_path / "evil.pt2", pickled_example_inputs(marker))
    model = load_model(tmp_path / "evil.pt2", {"x": IMAGE.shape})
    assert not marker.exists()
    assert [spec.shape for spec in model.inputs] == [IMAGE.shape]


def test_trust_model_file_lets_a_pickled_weight_through(archive, tmp_path):
    """A benign pickled weight (torch.save of the tensor itself) loads only when trusted, and
    then gives PyTorch's numbers."""

    def benign(entries: dict[str, bytes]) -> None:
        name = "data/weights/model_weights_config.json"
        config = json.loads(entries[name])
        fqn, first = next(iter(config["config"].items()))
        program = torch.export.load(str(archive))
        buffer = io.BytesIO()
        torch.save(torch.nn.Parameter(program.state_dict[fqn].detach()), buffer)
        first["use_pickle"] = True
        entries[name] = json.dumps(config).encode()
        entries[f"data/weights/{first['path_name']}"] = buffer.getvalue()

    path = tmp_path / "pickled.pt2"
    rewrite_archive(archive, path, benign)
    with pytest.raises(ModelFileError, match="stored as a pickle"):
        load_model(path, {"x": IMAGE.shape})
    trusted = load_model(path, {"x": IMAGE.shape}, trust_model_file=True)
    plain = load_model(archive, {"x": IMAGE.shape})
    tvm.ir.assert_structural_equal(trusted.mod, plain.mod)


def write_external_onnx(folder: Path, location: str) -> Path:
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.zeros(16, np.float32), "w")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    entry = weight.external_data.add()
    entry.key, entry.value = "location", location
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16])], [weight],
    )  # fmt: skip
    path = folder / "model.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    return path


@pytest.mark.parametrize("trick", ["parent", "absolute", "symlink", "symlinked folder"])
def test_onnx_external_data_outside_the_models_folder_is_refused(trick, tmp_path):
    secret = tmp_path / "other" / "secret.bin"
    secret.parent.mkdir()
    np.arange(16, dtype=np.float32).tofile(secret)
    folder = tmp_path / "model"
    folder.mkdir()
    os.symlink(secret, folder / "link.bin")
    os.symlink(secret.parent, folder / "sub")
    location = {"parent": "../other/secret.bin", "absolute": str(secret),
                "symlink": "link.bin", "symlinked folder": "sub/secret.bin"}[trick]  # fmt: skip
    path = write_external_onnx(folder, location)
    with pytest.raises(ModelFileError) as error:
        load_model(path)
    assert "\n" not in str(error.value) and "is not a valid ONNX model" in str(error.value)
