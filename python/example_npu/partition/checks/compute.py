"""Support checks: may this matched Relax call run on the NPU?

Each ``check_*`` is a small named predicate returning a :class:`Verdict` whose reason is what a
user sees when an op stays on TVM's CPU path (``explain_rejections`` / the debug log). The
pattern table wraps them into the boolean checks ``FuseOpsByPattern`` wants. Anything a check
accepts must be executed exactly by the C++ runtime; anything else must be rejected here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import tvm
from tvm import relax
from tvm.relax.backend.utils import has_leaking_intermediate_variables

from ...config import dtype_bytes
from ...relax_types import op_name, static_shape, tensor_dtype, tensor_shape
from ..verdict import ACCEPT, Verdict, current_config, first_failure, not_this_pattern, reject

# dtypes the NPU has datapaths for (spec) and the subset the runtime executes today.
NPU_DTYPES = frozenset({"int8", "uint8", "int16", "float16", "float32"})
# float16 runs on the float32 datapath with every op result rounded to float16; integers only
# through the quantized ops (checks/quantized.py).
EXECUTABLE_DTYPES = frozenset({"float32", "float16"})


def check_static_shapes(call: relax.Call) -> Verdict:
    """Static shapes whose bytes fit the NPU's DRAM (check_tensor_sizes)."""
    tensors = [call, *[arg for arg in call.args if isinstance(arg.ty, relax.TensorType)]]
    for tensor in tensors:
        if tensor_shape(tensor) is None:
            return reject(f"{op_name(call)}: dynamic or unknown shape {tensor.ty}")
    return check_tensor_sizes(call, tensors)


def check_tensor_sizes(call: relax.Call, tensors: list[Any]) -> Verdict:
    """The op's tensors together fit the DRAM of the target NPU (``NPUConfig.dram_mb``); the
    runtime refuses a larger graph with a ValueError, so such an op stays on the CPU."""
    total = 0
    for tensor in tensors:
        shape = tensor_shape(tensor)
        if shape is not None:
            total += math.prod(shape) * dtype_bytes(tensor_dtype(tensor))
    dram_bytes = current_config().dram_mb << 20
    if total > dram_bytes:
        name = op_name(call)
        return reject(f"{name}: its tensors need {total} bytes, more than the DRAM's {dram_bytes}")
    return ACCEPT


def _shapes(ty: Any) -> list[list[int]]:
    fields = ty.fields if isinstance(ty, tvm.ir.type.TupleType) else [ty]
    return [shape for shape in map(static_shape, fields) if shape is not None]


def check_empty_operands(call: relax.Call) -> Verdict:
    """No non-empty result from an empty operand (run for every pattern row, after its checks).

    The NPU computes an empty result by doing nothing, exactly like TVM. A non-empty result of
    an empty operand (matmul over K = 0 gives zeros, a mean over an empty axis NaN, a concat
    copies its other pieces) needs the op's own semantics: such calls stay on the CPU (the
    runtime refuses them too).
    """
    if not any(0 not in shape for shape in _shapes(call.ty)):
        return ACCEPT
    for arg in call.args:
        for shape in _shapes(arg.ty) if isinstance(arg, relax.Expr) else []:
            if 0 in shape:
                return reject(
                    f"{op_name(call)}: a non-empty result from the empty operand {shape} "
                    "(stays on the CPU)"
                )
    return ACCEPT


def check_dtypes(call: relax.Call) -> Verdict:
    """All tensor operands and the result share one dtype that the runtime executes."""
    tensors = [call, *[arg for arg in call.args if isinstance(arg.ty, relax.TensorType)]]
    dtypes = {tensor_dtype(tensor) for tensor in tensors}
    name = op_name(call)
    if len(dtypes) != 1:
        return reject(f"{name}: mixed dtypes {sorted(dtypes)}")
    (dtype,) = dtypes
    if dtype not in NPU_DTYPES:
        return reject(
            f"{name}: dtype {dtype} has no NPU datapath (supported: {sorted(NPU_DTYPES)})"
        )
    if dtype not in EXECUTABLE_DTYPES:
        return reject(f"{name}: {dtype} runs on the NPU only as a quantized (QDQ) chain")
    return ACCEPT


def check_out_dtype(call: relax.Call) -> Verdict:
    out_dtype = getattr(call.attrs, "out_dtype", None)
    if out_dtype is not None and str(out_dtype) not in ("", "void", tensor_dtype(call.args[0])):
        return reject(f"{op_name(call)}: out_dtype {out_dtype} differs from the input dtype")
    return ACCEPT


def check_layouts(call: relax.Call) -> Verdict:
    attrs = call.attrs
    name = op_name(call)
    data_layout = str(getattr(attrs, "data_layout", getattr(attrs, "layout", "")))
    out_layout = str(getattr(attrs, "out_layout", data_layout))
    if data_layout not in ("NCHW", "NHWC", "NCW", "NWC"):
        return reject(f"{name}: data layout {data_layout} (NPU supports NCHW/NHWC, NCW/NWC)")
    if out_layout != data_layout:
        return reject(f"{name}: out_layout {out_layout} differs from data layout {data_layout}")
    kernel_layout = getattr(attrs, "kernel_layout", None)
    if kernel_layout is not None and str(kernel_layout) not in ("OIHW", "HWIO", "OIW", "WIO"):
        return reject(f"{name}: kernel layout {kernel_layout} (NPU supports OIHW/HWIO, OIW/WIO)")
    return ACCEPT


def _channels_axis(layout: str) -> int:
    return layout.index("C")


def check_window_output(call: relax.Call) -> Verdict:
    """A convolution or pooling window must fit the padded input at least once.

    When it does not, Relax still infers a result whose spatial extent is 0 (or negative), and
    TVM builds an empty result for pooling. The runtime refuses such a graph at load, so the op
    stays on the CPU instead of making partition_for_npu raise.
    """
    shape = tensor_shape(call)
    if shape is None:
        return reject(f"{op_name(call)}: unknown result shape")
    attrs = call.attrs
    layout = str(getattr(attrs, "data_layout", getattr(attrs, "layout", "")))
    spatial = [shape[i] for i, axis in enumerate(layout) if axis in "HW" and i < len(shape)]
    if any(extent <= 0 for extent in spatial):
        return reject(
            f"{op_name(call)}: result {shape} is empty: the window does not fit the padded input"
        )
    return ACCEPT


def check_conv(call: relax.Call) -> Verdict:
    return first_failure(
        (
            check_static_shapes(call),
            check_dtypes(call),
            check_out_dtype(call),
            check_layouts(call),
            check_window_output(call),
            check_fits_on_chip(call),
        )
    )


def check_depthwise(call: relax.Call) -> Verdict:
    """conv2d whose groups equal the input channels (each channel filtered on its own)."""
    shape = tensor_shape(call.args[0])
    groups = int(call.attrs.groups)
    if shape is None:
        return reject("depthwise_conv2d: unknown input shape")
    channels = shape[_channels_axis(str(call.attrs.data_layout))]
    if groups <= 1 or groups != channels:
        return not_this_pattern(
            f"depthwise_conv2d: groups={groups} is not the channel count {channels}"
        )
    return check_conv(call)


def check_pool(call: relax.Call) -> Verdict:
    return first_failure(
        (
            check_static_shapes(call),
            check_dtypes(call),
            check_layouts(call),
            check_window_output(call),
            check_fits_on_chip(call),
        )
    )


def check_batch_norm(call: relax.Call) -> Verdict:
    if bool(call.attrs.training):
        return reject(
            "batch_norm: training=True computes batch statistics; NPU runs inference only"
        )
    return first_failure((check_static_shapes(call), check_dtypes(call)))


def check_softmax(call: relax.Call) -> Verdict:
    return first_failure((check_static_shapes(call), check_dtypes(call), check_fits_on_chip(call)))


def check_elementwise(call: relax.Call) -> Verdict:
    return first_failure((check_static_shapes(call), check_dtypes(call)))


def check_matmul(call: relax.Call) -> Verdict:
    return first_failure((check_static_shapes(call), check_dtypes(call), check_out_dtype(call)))


def check_no_leaking_intermediates(context: Any) -> Verdict:
    """Every value computed inside a multi-op match is used only inside it.

    FuseOpsByPattern places the fused function where the match's root was bound. An
    intermediate that another op reads earlier (a conv whose result feeds both the "bias" add
    of a residual and the next conv) then becomes a tuple output defined after its use, and the
    module is ill-formed (MergeCompositeFunctions fails on it). So such a match is refused and
    its ops are matched one by one instead. For a QDQ chain the usual cause is a dequantize
    shared by two consumers, which canonicalization (run by partition_for_npu) duplicates.
    """
    if has_leaking_intermediate_variables(context):
        reason = "an intermediate result of the matched chain is also used outside it"
        root = context.annotated_expr["root"]
        if isinstance(root, relax.Call) and root.op.name == "relax.quantize":
            reason += " (example_npu.canonicalize_qdq gives each quantized op its own dequantize)"
        return reject(reason)
    return ACCEPT


def check_bias_keeps_shape(annotated: Mapping[str, Any]) -> Verdict:
    """A fused bias add may only add a bias: its result keeps the producer's shape."""
    producer_shape = tensor_shape(annotated["producer"])
    add_shape = tensor_shape(annotated["add"])
    if add_shape != producer_shape:
        return reject(
            f"add: the bias broadcast grows the result from {producer_shape} to {add_shape}"
        )
    return ACCEPT


def check_relu6(call: relax.Call) -> Verdict:
    """clip(x, 0, 6) only: other clip bounds are not the relu6 activation."""
    bounds = [getattr(arg, "value", None) for arg in call.args[1:]]
    if bounds != [0, 6] and bounds != [0.0, 6.0]:
        return not_this_pattern(f"clip: bounds {bounds} are not relu6's (0, 6)")
    return check_elementwise(call)


def check_fits_on_chip(call: relax.Call, l1_bytes: int | None = None) -> Verdict:
    """Rejects ops whose smallest tile working set cannot fit the L1 SRAM.

    Matmul, elementwise ops and batch_norm split into tiles along every dimension, so they
    always fit. A softmax row must be resident in full (max, sum and scale passes read it three
    times), and a convolution or pooling window must fit for one 16-channel vector, double
    buffered. The L1 is the one of the NPU being partitioned for (``target_config``).
    """
    config = current_config()
    l1_bytes = l1_bytes if l1_bytes is not None else config.l1_sram_bytes
    shape = tensor_shape(call.args[0])
    if shape is None:
        return reject(f"{op_name(call)}: unknown input shape")
    item = dtype_bytes(tensor_dtype(call.args[0]))
    name = op_name(call)
    if name == "nn.softmax":
        row_bytes = shape[int(call.attrs.axis)] * item * 2
        if row_bytes > l1_bytes:
            return reject(f"softmax: a {row_bytes}-byte row does not fit the {l1_bytes}-byte L1")
        return ACCEPT
    window = _window_taps(call)
    vector = config.vector_elements
    if window * vector * item * 2 > l1_bytes:
        return reject(f"{name}: a {window}-tap window does not fit the L1 for one vector")
    return ACCEPT


def _window_taps(call: relax.Call) -> int:
    attrs = call.attrs
    if hasattr(attrs, "pool_size"):
        taps = 1
        for extent in attrs.pool_size:
            taps *= int(extent)
        return taps
    weight = tensor_shape(call.args[1]) or []
    spatial = [weight[i] for i, axis in enumerate(str(attrs.kernel_layout)) if axis in "HW"]
    taps = 1
    for extent in spatial:
        taps *= extent
    return taps
