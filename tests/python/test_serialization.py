"""export_library -> load_module in a fresh process, and the module's own byte round trip."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import example_npu
import numpy as np
import tvm
from spec_models import Conv2dReLU, random_inputs, run


def test_export_and_load_in_a_new_process(tmp_path):
    mod = example_npu.partition_for_npu(Conv2dReLU)
    ex = tvm.compile(mod, target="llvm")
    library = tmp_path / "conv2d_relu.so"
    ex.export_library(str(library))
    inputs = random_inputs(Conv2dReLU, seed=11)
    for i, array in enumerate(inputs):
        np.save(tmp_path / f"in{i}.npy", array)
    np.save(tmp_path / "expected.npy", run(Conv2dReLU, inputs))
    script = textwrap.dedent(
        f"""
        import numpy as np, tvm  # autoload registers ffi.Module.load_from_bytes.example_npu_json
        from tvm import relax
        lib = tvm.runtime.load_module({str(library)!r})
        vm = relax.VirtualMachine(lib, tvm.cpu())
        folder = {str(tmp_path)!r}
        inputs = [tvm.runtime.tensor(np.load(f"{{folder}}/in{{i}}.npy")) for i in range(2)]
        out = vm["main"](*inputs).numpy()
        expected = np.load(f"{{folder}}/expected.npy")
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
        print("loaded-ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0 and "loaded-ok" in result.stdout, result.stderr


def module_bytes(graph_json: str) -> bytes:
    """The module's byte layout (see NPUModuleObj::SaveToBytes)."""
    return json.dumps({"format": "example_npu_json", "version": 1, "graph": graph_json}).encode()


def test_load_from_bytes_rebuilds_the_module():
    mod = example_npu.partition_for_npu(Conv2dReLU)
    (npu_module,) = mod.attrs["external_mods"]
    load = tvm.get_global_func("ffi.Module.load_from_bytes.example_npu_json")
    reloaded = load(module_bytes(npu_module.inspect_source()))
    assert reloaded.kind == "example_npu_json"
    assert reloaded.inspect_source() == npu_module.inspect_source()
    assert reloaded.get_function("get_symbol")() == npu_module.get_function("get_symbol")()
