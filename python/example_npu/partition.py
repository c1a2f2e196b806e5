"""partition_for_npu: the offload pipeline as one explicit pass sequence."""

from __future__ import annotations

import tvm
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
from tvm.relax.transform import FuseOpsByPattern, MergeCompositeFunctions, RunCodegen

from .checks import target_config
from .config import NPUConfig
from .patterns import PREFIX


def partition_for_npu(
    mod: tvm.IRModule, *, config: NPUConfig | None = None, bind_constants: bool = True
) -> tvm.IRModule:
    """Offloads every supported region of ``mod["main"]`` to the NPU.

    Adjacent supported ops are merged into one NPU function per region (so the NPU compiler
    sees, e.g., relu -> max_pool2d -> relu as one subgraph with on-chip intermediates), codegen
    runs, and the returned module is ready for ``tvm.compile(mod, target="llvm")``. Calls the
    checks reject stay in Relax and are compiled for the CPU. With ``bind_constants`` (default)
    weights stay inside the NPU functions and reach the runtime through TVM's constant loader.
    ``config`` (default: the specification's NPU) is what the NPU compiler tiles for and what the
    profile models; the checks plan for its memories, and it is forwarded as
    ``RunCodegen(target_options={"example_npu": ...})``.
    """
    config = config or NPUConfig()
    options = {"example_npu": {"npu_config": config.to_json()}}
    seq = tvm.transform.Sequential(
        [
            FuseOpsByPattern(
                get_patterns_with_prefix(PREFIX + "."),
                bind_constants=bind_constants,
                annotate_codegen=False,
            ),
            MergeCompositeFunctions(),
            RunCodegen(target_options=options),
        ],
        name="example_npu.partition_for_npu",
    )
    # The checks decide what fits on chip for this NPU, not the default one.
    with target_config(config):
        return seq(mod)
