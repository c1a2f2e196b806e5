"""The thread-safety rule of docs/robustness.md: one relax.VirtualMachine per thread; the NPU module
(and so one compiled executable) is safe to share between threads.

TVM's VirtualMachine keeps per-call state, so one VM object must not be called from several
threads at once (that crashes inside TVM, with or without NPU functions). VMs built from one
executable share its NPU modules, whose executors keep all run state local: these tests run
them concurrently (tvm-ffi releases the GIL during calls) and require every result to be bit
for bit the serial one.
"""

from __future__ import annotations

import threading

import example_npu
import numpy as np
import tvm
from example_npu.frontend.builtin_models import default_model
from spec_models import MatmulReLU
from tvm import relax

THREADS = 4
ROUNDS = 3


def _inputs(mod: tvm.IRModule, seed: int) -> list[tvm.runtime.Tensor]:
    rng = np.random.default_rng(seed)
    return [
        tvm.runtime.tensor(rng.standard_normal([int(d) for d in p.ty.shape]).astype("float32"))
        for p in mod["main"].params
    ]


def _run_threads(work) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(index: int) -> None:
        try:
            work(index)
        except BaseException as err:  # noqa: BLE001  # reported by the test
            errors.append(err)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_one_vm_per_thread_over_one_executable_is_bit_identical():
    mod = default_model()
    ex = tvm.compile(example_npu.partition_for_npu(mod), target="llvm")
    inputs = [_inputs(mod, seed) for seed in range(8)]
    serial_vm = relax.VirtualMachine(ex, tvm.cpu())
    expected = [serial_vm["main"](*args).numpy() for args in inputs]

    def work(thread: int) -> None:
        vm = relax.VirtualMachine(ex, tvm.cpu())  # the rule: a VM of its own
        for round_ in range(ROUNDS):
            for k in np.random.default_rng([thread, round_]).permutation(len(inputs)):
                np.testing.assert_array_equal(vm["main"](*inputs[k]).numpy(), expected[k])

    assert _run_threads(work) == []


def test_one_npu_module_called_from_many_threads_is_bit_identical():
    partitioned = example_npu.partition_for_npu(MatmulReLU, bind_constants=False)
    (module,) = partitioned.attrs["external_mods"]
    symbol = module.get_function("get_symbol")()
    function = module.get_function(symbol)
    rng = np.random.default_rng(0)
    cases = [
        (
            rng.standard_normal((2, 4)).astype("float32"),
            rng.standard_normal((4, 8)).astype("float32"),
        )
        for _ in range(16)
    ]

    def call(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        out = tvm.runtime.tensor(np.zeros((2, 8), "float32"))
        function(tvm.runtime.tensor(x), tvm.runtime.tensor(w), out)
        return out.numpy()

    expected = [call(x, w) for x, w in cases]
    for (x, w), result in zip(cases, expected, strict=True):
        np.testing.assert_allclose(result, np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)

    def work(thread: int) -> None:
        for round_ in range(ROUNDS * 10):
            k = (thread + round_) % len(cases)
            np.testing.assert_array_equal(call(*cases[k]), expected[k])

    assert _run_threads(work) == []
