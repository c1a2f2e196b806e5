"""Installing the package is enough: `import tvm` autoloads it (tvm.backends entry point).

Every test runs a fresh interpreter, since autoload happens once, at the first `import tvm`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# The specification's quick start, exactly as written (no `import example_npu`), followed by
# compiling and running the result against numpy.
SPEC_QUICK_START = textwrap.dedent(
    """
    import tvm
    from tvm import relax
    from tvm.script import relax as R
    from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
    from tvm.relax.transform import FuseOpsByPattern, MergeCompositeFunctions, RunCodegen
    import tvm.relax.backend.contrib.example_npu  # registers patterns


    @tvm.script.ir_module
    class MatmulReLU:
        @R.function
        def main(
            x: R.Tensor((2, 4), "float32"),
            w: R.Tensor((4, 8), "float32"),
        ) -> R.Tensor((2, 8), "float32"):
            with R.dataflow():
                y = relax.op.matmul(x, w)
                z = relax.op.nn.relu(y)
                R.output(z)
            return z


    mod = MatmulReLU
    patterns = get_patterns_with_prefix("example_npu")

    # Apply partitioning and codegen annotation
    mod = FuseOpsByPattern(patterns, bind_constants=False, annotate_codegen=True)(mod)
    mod = MergeCompositeFunctions()(mod)
    mod = RunCodegen()(mod)

    print(mod)
    """
)

RUN_AND_CHECK = textwrap.dedent(
    """
    import sys
    import numpy as np

    assert "example_npu" in sys.modules, "the backend was not autoloaded"
    ex = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4)).astype("float32")
    w = rng.standard_normal((4, 8)).astype("float32")
    out = vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(w)).numpy()
    np.testing.assert_allclose(out, np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)
    assert "call_dps_packed" in mod.script(), "nothing was offloaded"
    print("quick-start-ok")
    """
)

# The specification's has_example_npu probe (what upstream's test_example_npu.py skips on).
PROBE = textwrap.dedent(
    """
    has_codegen = tvm.get_global_func("relax.ext.example_npu", True)
    has_runtime = tvm.get_global_func("runtime.ExampleNPUJSONRuntimeCreate", True)
    has_example_npu = bool(has_codegen and has_runtime)
    """
)


def python(script: str, autoload: bool = True, folder: Path | None = None):
    """Runs ``script`` in a fresh interpreter with every warning shown; from a file in
    ``folder`` when given (TVMScript's parser reads the source of decorated classes)."""
    env = dict(os.environ, TVM_DEVICE_BACKEND_AUTOLOAD="1" if autoload else "0")
    command = ["-c", script]
    if folder is not None:
        (folder / "script.py").write_text(script)
        command = [str(folder / "script.py")]
    return subprocess.run(
        [sys.executable, "-W", "always", *command],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_spec_quick_start_runs_as_written_without_importing_example_npu(tmp_path):
    result = python(SPEC_QUICK_START + RUN_AND_CHECK, folder=tmp_path)
    assert result.returncode == 0 and "quick-start-ok" in result.stdout, result.stderr
    assert "Failed to autoload" not in result.stderr


def test_plain_import_tvm_passes_the_spec_probe_and_loads_exported_libraries(tmp_path):
    script = "import tvm\n" + PROBE + "assert has_example_npu\n"
    script += textwrap.dedent(
        """
        for name in ("ffi.Module.load_from_bytes.example_npu_json",):
            assert tvm.get_global_func(name, True), name
        from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
        assert len(get_patterns_with_prefix("example_npu")) > 40
        print("probe-ok")
        """
    )
    result = python(script)
    assert result.returncode == 0 and "probe-ok" in result.stdout, result.stderr


def test_autoload_off_registers_nothing_until_the_explicit_import():
    script = "import sys, tvm\n" + PROBE
    script += textwrap.dedent(
        """
        assert not has_example_npu and "example_npu" not in sys.modules
        import example_npu
        """
    )
    script += PROBE + "assert has_example_npu\nprint('off-ok')\n"
    result = python(script, autoload=False)
    assert result.returncode == 0 and "off-ok" in result.stdout, result.stderr


UPSTREAM = "import tvm.relax.backend.contrib.example_npu"


@pytest.mark.parametrize(
    "first, second, autoload",
    [
        ("import tvm", "import example_npu", True),
        ("import example_npu", "import tvm", True),
        (UPSTREAM, "import example_npu", True),
        ("import example_npu", UPSTREAM, True),
        (UPSTREAM, "import example_npu", False),
        ("import example_npu", UPSTREAM, False),
    ],
)
def test_any_import_order_registers_once_with_our_patterns(first, second, autoload):
    script = f"{first}\n{second}\n" + PROBE
    script += textwrap.dedent(
        """
        import example_npu
        from example_npu.registration import register
        from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
        assert has_example_npu
        names = [pattern.name for pattern in get_patterns_with_prefix("example_npu")]
        assert sorted(names) == sorted(example_npu.REGISTERED_PATTERNS), names
        assert register() is register()  # idempotent: the first call's registration
        # Our checks are in force: upstream's accept-everything check would offload float64.
        from tvm import relax
        x = relax.Var("x", relax.TensorType((2, 2), "float64"))
        bb = relax.BlockBuilder()
        with bb.function("main", [x]):
            with bb.dataflow():
                y = bb.emit_output(relax.op.nn.relu(x))
            bb.emit_func_output(y)
        assert not example_npu.partition_for_npu(bb.get()).attrs
        print("order-ok")
        """
    )
    result = python(script, autoload)
    assert result.returncode == 0 and "order-ok" in result.stdout, result.stderr
    assert "Failed to autoload" not in result.stderr  # no half-imported module, no cycle


def test_a_failing_autoload_is_a_warning_and_the_explicit_import_raises():
    script = textwrap.dedent(
        """
        import tvm_ffi
        # Someone else owns our codegen name (as a TVM built with USE_EXAMPLE_NPU_CODEGEN=ON).
        tvm_ffi.register_global_func("relax.ext.example_npu", lambda *args: None)
        import tvm  # autoload fails: a warning, and tvm itself still works
        assert tvm.get_global_func("runtime.ExampleNPUJSONRuntimeCreate", True) is None
        try:
            import example_npu
        except Exception as error:
            print(type(error).__name__, error)
        """
    )
    result = python(script)
    assert result.returncode == 0, result.stderr
    warning = "Failed to autoload tvm backend 'example_npu': example_npu cannot register"
    assert warning in result.stderr and "already registered" in result.stderr
    assert result.stdout.startswith("RegistrationConflictError example_npu cannot register")
