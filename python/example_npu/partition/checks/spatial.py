"""Support checks of the reductions and of the spatial ops of detection / segmentation networks:
sum / max / min / variance / argmax / argmin, topk, log_softmax, leaky ReLU and PReLU, group and
instance norm, image.resize2d, nn.pad, transposed convolution and adaptive average pooling.

The C++ core executes each exactly as TVM's build does (its identities and combiners, its
coordinate transforms and one-pass statistics); what it refuses at load is rejected here with a
reason, so such a call stays on the CPU instead of failing at compile time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tvm import relax

from ...config import dtype_bytes
from ...relax_types import op_name, tensor_dtype, tensor_shape
from ..verdict import ACCEPT, Verdict, current_config, first_failure, reject
from .compute import (
    EXECUTABLE_DTYPES,
    NPU_DTYPES,
    check_dtypes,
    check_fits_on_chip,
    check_out_dtype,
    check_static_shapes,
    check_window_output,
)

_IMAGE_LAYOUTS = ("NCHW", "NHWC")
RESIZE_METHODS = ("nearest_neighbor", "linear")
RESIZE_COORDINATE_MODES = (
    "half_pixel",
    "align_corners",
    "asymmetric",
    "pytorch_half_pixel",
    "tf_half_pixel_for_nn",
)
_ROUNDING_METHODS = ("", "round", "floor", "ceil", "round_prefer_floor", "round_prefer_ceil")
PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _float_compute(call: relax.Call) -> Verdict:
    return first_failure((check_static_shapes(call), check_dtypes(call)))


def _axes(call: relax.Call, rank: int) -> list[int]:
    axis = call.attrs.axis
    if axis is None:
        return list(range(rank))
    value = getattr(axis, "value", axis)
    values = [value] if isinstance(value, int) else [int(a) for a in axis]
    return sorted({int(a) % rank for a in values})


def _resident_fits_l1(call: relax.Call, elements: int, what: str) -> Verdict:
    """``elements`` of the input stay resident in L1 for one output, double buffered."""
    needed = elements * dtype_bytes(tensor_dtype(call.args[0])) * 2
    l1_bytes = current_config().l1_sram_bytes
    if needed > l1_bytes:
        return reject(f"{op_name(call)}: {what} need {needed} of the {l1_bytes} bytes of L1")
    return ACCEPT


def _reduced_extent_fits(call: relax.Call) -> Verdict:
    """One output element reads its whole reduced extent from L1."""
    shape = tensor_shape(call.args[0])
    if not shape:
        return reject(f"{op_name(call)}: a scalar input has nothing to reduce on the NPU")
    reduced = math.prod(shape[axis] for axis in _axes(call, len(shape)))
    return _resident_fits_l1(call, reduced, f"{reduced} reduced elements")


def check_reduction(call: relax.Call) -> Verdict:
    """mean / sum / max / min / variance over any axes of a float tensor."""
    return first_failure((_float_compute(call), _reduced_extent_fits(call)))


def check_arg_reduction(call: relax.Call) -> Verdict:
    """argmax / argmin of a float tensor over one axis or all, as int64 indices."""
    name = op_name(call)
    verdict = check_static_shapes(call)
    if not verdict:
        return verdict
    dtype = tensor_dtype(call.args[0])
    if dtype not in EXECUTABLE_DTYPES:
        return reject(f"{name}: input dtype {dtype} (the NPU compares float32 / float16)")
    if tensor_dtype(call) != "int64":
        return reject(f"{name}: index dtype {tensor_dtype(call)} (the NPU stores int64)")
    return _reduced_extent_fits(call)


TOPK_RET_TYPES = ("both", "values", "indices")
# int8 / uint8 values are exact on the float32 datapath (TVM's CPU build has no int16 topk).
TOPK_DTYPES = ("float32", "float16", "int8", "uint8")
_TILE_ALIGN = 64  # bytes: the C++ tiling's buffer alignment


def _aligned(nbytes: int) -> int:
    return -(-nbytes // _TILE_ALIGN) * _TILE_ALIGN


def check_topk(call: relax.Call) -> Verdict:
    """topk of a float32 / float16 / int8 / uint8 tensor along one axis: values, int32 / int64
    indices, or both. An output
    tile keeps its whole rows in L1 with its k results, or one row streams through in chunks."""
    data = call.args[0]
    shape = tensor_shape(data)
    if shape is None:
        return reject(f"topk: dynamic or unknown shape {data.ty}")
    if not shape:
        return reject("topk: a scalar has no axis to select along")
    dtype = tensor_dtype(data)
    if dtype not in TOPK_DTYPES:
        return reject(f"topk: input dtype {dtype} (the NPU compares {' / '.join(TOPK_DTYPES)})")
    attrs = call.attrs
    if str(attrs.ret_type) not in TOPK_RET_TYPES:
        return reject(f"topk: ret_type {attrs.ret_type}")
    index_dtype = str(attrs.dtype)
    if index_dtype not in ("int32", "int64"):
        return reject(f"topk: index dtype {index_dtype} (the NPU stores int32 / int64)")
    n = shape[int(attrs.axis) % len(shape)]
    k = int(attrs.k) if int(attrs.k) >= 1 else n  # k < 1 selects the whole axis, as TVM's
    if k > n:
        return reject(f"topk: k = {k} is more than the {n} elements of the axis")
    if n > 1 << 24:
        return reject(f"topk: a {n}-element axis (indices are exact in float32 below 2^24)")
    out_elements = math.prod(shape) // max(n, 1) * k
    total = math.prod(shape) * dtype_bytes(dtype) + out_elements * (
        dtype_bytes(dtype) + dtype_bytes(index_dtype)
    )
    dram_bytes = current_config().dram_mb << 20
    if total > dram_bytes:
        return reject(f"topk: its tensors need {total} bytes, more than the DRAM's {dram_bytes}")
    # Rows longer than L1 stream through in chunks of at least k elements beside the running
    # list of k values and k indices and the double-buffered result (the C++ tiling's budget).
    config = current_config()
    results = 2 * _aligned(2 * k * 4) + 2 * _aligned(k * 4)
    chunk_budget = (config.l1_sram_bytes - results) // 2 - _TILE_ALIGN
    granule = config.vector_elements
    chunk = max(chunk_budget, 0) // dtype_bytes(dtype) // granule * granule
    if chunk < k:
        return reject(
            f"topk: the k = {k} results of a row and a chunk of k elements need more than the "
            f"{config.l1_sram_bytes} bytes of L1"
        )
    return ACCEPT


def check_log_softmax(call: relax.Call) -> Verdict:
    """log_softmax: a whole row is resident in L1, like softmax."""
    verdict = _float_compute(call)
    if not verdict:
        return verdict
    shape = tensor_shape(call)
    if not shape:
        return reject("log_softmax: a scalar has no row")
    row = shape[int(call.attrs.axis) % len(shape)]
    return _resident_fits_l1(call, row, f"a {row}-element row")


def check_prelu(call: relax.Call) -> Verdict:
    """PReLU with one slope, or one slope per index of ``axis`` (torch's and ONNX's import)."""
    verdict = _float_compute(call)
    if not verdict:
        return verdict
    shape, slope = tensor_shape(call.args[0]), tensor_shape(call.args[1])
    if not shape:
        return reject("nn.prelu: a scalar input has no slope axis")
    axis = int(call.attrs.axis) % len(shape)
    if slope not in ([1], [shape[axis]]):
        return reject(
            f"nn.prelu: slope shape {slope} is neither one value nor the {shape[axis]} of axis "
            f"{axis}"
        )
    return ACCEPT


def check_prelu_where(annotated: Mapping[str, Any]) -> Verdict:
    """where(x > 0, x, slope * x) / where(x < 0, x * slope, x): compares with 0 and the slope
    broadcasts onto x without growing it."""
    zero = annotated["zero"].value.numpy()
    if zero.size != 1 or float(zero.reshape(-1)[0]) != 0.0:
        return reject("where: the PReLU form compares with something other than 0")
    x, scaled, root = annotated["input"], annotated["scaled"], annotated["root"]
    if tensor_shape(scaled) != tensor_shape(x) or tensor_shape(root) != tensor_shape(x):
        return reject("where: the slope broadcast grows the PReLU input")
    if tensor_dtype(root) != tensor_dtype(x):
        return reject("where: the PReLU form changes the dtype")
    return ACCEPT


def check_group_norm(call: relax.Call) -> Verdict:
    """group_norm / instance_norm with gamma and beta applied (the form TVM computes)."""
    name = op_name(call)
    verdict = _float_compute(call)
    if not verdict:
        return verdict
    attrs = call.attrs
    if not (bool(attrs.center) and bool(attrs.scale)):
        return reject(f"{name}: center / scale false (TVM's legalization applies both anyway)")
    shape = tensor_shape(call.args[0])
    rank = len(shape)
    channel_axis = int(attrs.channel_axis) % rank
    axes = {int(a) % rank for a in attrs.axes}
    if channel_axis in axes:
        return reject(f"{name}: the normalised axes contain the channel axis")
    channels = shape[channel_axis]
    groups = int(attrs.num_groups) if hasattr(attrs, "num_groups") else channels
    if groups <= 0 or channels % groups:
        return reject(f"{name}: {channels} channels do not split into {groups} groups")
    for param in call.args[1:3]:
        if tensor_shape(param) != [channels]:
            return reject(f"{name}: gamma / beta shape {tensor_shape(param)} is not [{channels}]")
    return ACCEPT


def _image_layout(call: relax.Call, key: str) -> Verdict:
    layout = str(getattr(call.attrs, key))
    out_layout = str(getattr(call.attrs, "out_layout", layout))
    if layout not in _IMAGE_LAYOUTS or out_layout != layout:
        return reject(f"{op_name(call)}: layout {layout} -> {out_layout} (NCHW / NHWC only)")
    return ACCEPT


def _any_npu_dtype(call: relax.Call, tensors: list[Any]) -> Verdict:
    """One dtype; integers pass the float32 datapath exactly (resampling and padding copy)."""
    dtypes = {tensor_dtype(tensor) for tensor in tensors}
    if len(dtypes) != 1:
        return reject(f"{op_name(call)}: mixed dtypes {sorted(dtypes)}")
    (dtype,) = dtypes
    if dtype not in NPU_DTYPES:
        supported = sorted(NPU_DTYPES)
        return reject(
            f"{op_name(call)}: dtype {dtype} has no NPU datapath (supported: {supported})"
        )
    return ACCEPT


def check_resize2d(call: relax.Call) -> Verdict:
    """Nearest or bilinear resampling in the coordinate modes PyTorch, ONNX and TFLite emit."""
    a = call.attrs
    method, mode = str(a.method), str(a.coordinate_transformation_mode)
    rounding = str(a.rounding_method)
    if method not in RESIZE_METHODS:
        return reject(f"image.resize2d: method {method} (the NPU resamples nearest / linear)")
    if mode not in RESIZE_COORDINATE_MODES:
        return reject(f"image.resize2d: coordinate transformation {mode} is not supported")
    if rounding not in _ROUNDING_METHODS:
        return reject(f"image.resize2d: rounding method {rounding} is not supported")
    verdict = first_failure(
        (
            check_static_shapes(call),
            _image_layout(call, "layout"),
            _any_npu_dtype(call, [call, call.args[0]]),
        )
    )
    if not verdict:
        return verdict
    layout = str(a.layout)
    in_shape, out_shape = tensor_shape(call.args[0]), tensor_shape(call)
    spatial = [layout.index("H"), layout.index("W")]
    if 0 in in_shape or any(out_shape[i] <= 0 for i in spatial):
        return reject("image.resize2d: empty images are not resampled on the NPU")
    if mode == "align_corners" and any(out_shape[i] == 1 for i in spatial):
        return reject("image.resize2d: align_corners to an extent of 1 divides by zero in TVM")
    if a.out_dtype is not None and str(a.out_dtype) not in ("", "void", tensor_dtype(call)):
        return reject(f"image.resize2d: out_dtype {a.out_dtype} changes the dtype")
    return ACCEPT


def check_pad(call: relax.Call) -> Verdict:
    """Constant, reflect, replicate and circular padding (negative widths crop: CPU)."""
    mode = str(call.attrs.pad_mode)
    if mode not in PAD_MODES:
        return reject(f"nn.pad: mode {mode} (the NPU pads {', '.join(PAD_MODES)})")
    verdict = first_failure((check_static_shapes(call), _any_npu_dtype(call, [call, call.args[0]])))
    if not verdict:
        return verdict
    shape = tensor_shape(call.args[0])
    widths = [int(w) for w in call.attrs.pad_width]
    if len(widths) != 2 * len(shape):
        return reject(f"nn.pad: {len(widths)} widths for rank {len(shape)}")
    for dim, extent in enumerate(shape):
        before, after = widths[2 * dim], widths[2 * dim + 1]
        if before < 0 or after < 0:
            return reject("nn.pad: negative widths crop (not a padding)")
        if (before or after) and mode != "constant" and extent == 0:
            return reject(f"nn.pad: {mode} padding of the empty dim {dim}")
        if mode == "reflect" and (before >= extent or after >= extent) and (before or after):
            return reject(
                f"nn.pad: reflect widths ({before}, {after}) of dim {dim} must be narrower "
                f"than its extent {extent}"
            )
    return ACCEPT


def check_conv2d_transpose(call: relax.Call) -> Verdict:
    """Transposed convolution (strides, padding, output padding, dilation, groups) with an IOHW
    weight, computed by output phases on the matrix engine."""
    verdict = first_failure(
        (
            check_static_shapes(call),
            check_dtypes(call),
            check_out_dtype(call),
            _image_layout(call, "data_layout"),
        )
    )
    if not verdict:
        return verdict
    a = call.attrs
    if str(a.kernel_layout) != "IOHW":
        return reject(f"nn.conv2d_transpose: kernel layout {a.kernel_layout} (IOHW only)")
    shape, weight = tensor_shape(call.args[0]), tensor_shape(call.args[1])
    channels = shape[str(a.data_layout).index("C")]
    groups = int(a.groups)
    if groups <= 0 or channels % groups or weight[0] != channels:
        return reject(
            f"nn.conv2d_transpose: weight {weight} does not fit {channels} channels in "
            f"{groups} groups"
        )
    strides, dilation = [int(v) for v in a.strides], [int(v) for v in a.dilation]
    output_padding = [int(v) for v in a.output_padding]
    if any(not 1 <= v <= 65536 for v in strides + dilation):
        return reject("nn.conv2d_transpose: strides and dilation must be in [1, 65536]")
    if any(not 0 <= p < s for p, s in zip(output_padding, strides, strict=True)):
        return reject("nn.conv2d_transpose: output_padding must be in [0, stride)")
    if any(int(p) < 0 for p in a.padding):
        return reject("nn.conv2d_transpose: negative padding")
    return first_failure((check_window_output(call), check_fits_on_chip(call)))


def check_adaptive_avg_pool2d(call: relax.Call) -> Verdict:
    """Adaptive average pooling to any output size (uneven and overlapping windows included):
    the largest window, ceil(in / out) + 1 per dim, must fit the L1 for one vector."""
    verdict = first_failure((_image_layout(call, "layout"), _float_compute(call)))
    if not verdict:
        return verdict
    layout = str(call.attrs.layout)
    shape, out_shape = tensor_shape(call.args[0]), tensor_shape(call)
    spatial = [layout.index("H"), layout.index("W")]
    size, out = [shape[i] for i in spatial], [out_shape[i] for i in spatial]
    if any(extent <= 0 for extent in size + out):
        return reject(f"adaptive_avg_pool2d: empty image {size} -> {out}")
    taps = math.prod(-(-s // o) + (1 if s % o else 0) for s, o in zip(size, out, strict=True))
    config = current_config()
    item = dtype_bytes(tensor_dtype(call))
    if taps * config.vector_elements * item * 2 > config.l1_sram_bytes:
        return reject(f"adaptive_avg_pool2d: a {taps}-tap window does not fit the L1")
    return ACCEPT
