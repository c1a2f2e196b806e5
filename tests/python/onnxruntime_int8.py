"""Whether onnxruntime's fused int8 kernels are an exact reference on this CPU.

On x86 without VNNI, onnxruntime's uint8 x int8 kernels (QLinearConv, MatMulInteger, the QDQ
groups it fuses into them) multiply with vpmaddubsw, whose 16-bit sums of two products saturate:
onnxruntime documents this as its "saturation issue". There its results are no reference for an
exact integer datapath; the tests compare with its unfused reference execution, or with TVM's CPU
build alone, instead.
"""

from __future__ import annotations

import functools
import platform
from pathlib import Path


@functools.cache
def int8_kernels_exact() -> bool:
    """True unless this is an x86 CPU without AVX-512 VNNI or AVX-VNNI."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return True
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return True
    return "avx512_vnni" in flags or "avx_vnni" in flags
