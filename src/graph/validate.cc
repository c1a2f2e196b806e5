/*!
 * \file graph/validate.cc
 * \brief Structural checks, axis normalisation and shape inference for NPU graphs.
 *
 * The shapes in the JSON come from Relax's own shape inference; re-deriving them here means a
 * graph whose attributes and shapes disagree (hand-edited, truncated, or produced by a buggy
 * codegen) is rejected at load instead of making a kernel read out of bounds.
 */
#include <tvm/ffi/error.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <string>

#include "graph/graph.h"
#include "kernels/window.h"
#include "support/checked_math.h"
#include "support/json_input.h"

namespace example_npu {
namespace {

std::string Where(const Node& node) {
  return "node " + Printable(node.name) + " (" + OpKindName(node.op) + ")";
}

void ExpectRank(const Node& node, const Shape& shape, size_t rank, const char* what) {
  if (shape.size() != rank) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": " << what << " must have rank " << rank
                              << ", got shape " << ShapeText(shape);
  }
}

int64_t NormalizeAxis(int64_t axis, size_t rank, const std::string& what) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    TVM_FFI_THROW(ValueError) << what << ": axis " << axis << " is out of range for rank " << r;
  }
  return axis < 0 ? axis + r : axis;
}

/*! \brief Distinct axes normalised to [0, rank), sorted. */
std::vector<int64_t> NormalizedSet(std::vector<int64_t> axes, size_t rank,
                                   const std::string& what) {
  for (int64_t& axis : axes) axis = NormalizeAxis(axis, rank, what);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) {
    TVM_FFI_THROW(ValueError) << what << ": repeated axis";
  }
  return axes;
}

/*! \brief numpy broadcasting of two shapes, aligned at the trailing dimension. */
Shape Broadcast(const Node& node, const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": shapes " << ShapeText(a) << " and "
                                << ShapeText(b) << " do not broadcast";
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape InferMatmul(const Node& node, const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": matmul operands must have rank >= 1";
  }
  Shape lhs = a.size() == 1 ? Shape{1, a[0]} : a;
  Shape rhs = b.size() == 1 ? Shape{b[0], 1} : b;
  if (lhs.back() != rhs[rhs.size() - 2]) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": reduction dims differ for " << ShapeText(a)
                              << " x " << ShapeText(b);
  }
  Shape batch =
      Broadcast(node, Shape(lhs.begin(), lhs.end() - 2), Shape(rhs.begin(), rhs.end() - 2));
  if (a.size() > 1) batch.push_back(lhs[lhs.size() - 2]);
  if (b.size() > 1) batch.push_back(rhs.back());
  return batch;
}

// Window attributes (strides, dilation, padding, pool size) beyond this are no real model's and
// would let the tiling's window arithmetic overflow.
constexpr int64_t kMaxWindowAttr = int64_t{1} << 31;

int64_t WindowOutput(const Node& node, int64_t in, int64_t pad_lo, int64_t pad_hi, int64_t kernel,
                     int64_t stride, int64_t dilation, bool ceil_mode) {
  if (stride <= 0 || dilation <= 0 || kernel <= 0 || pad_lo < 0 || pad_hi < 0) {
    TVM_FFI_THROW(ValueError) << Where(node)
                              << ": strides, dilation and window must be positive, padding >= 0";
  }
  if (stride > kMaxWindowAttr || dilation > kMaxWindowAttr || pad_lo > kMaxWindowAttr ||
      pad_hi > kMaxWindowAttr) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": strides, dilation and padding must be <= 2^31";
  }
  // The padded extent and the dilated window span, checked once: every later window computation
  // (kernels, tiling halos) stays below them.
  const char* what = "window span";
  const int64_t padded = checked::Add(checked::Add(in, pad_lo, what), pad_hi, what);
  const int64_t window = checked::Add(checked::Mul(kernel - 1, dilation, what), 1, what);
  checked::Add(padded, stride, what);
  if (window > padded) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": window larger than the padded input";
  }
  int64_t out = kernels::WindowOutputSize(in, kernel, stride, dilation, pad_lo, pad_hi, ceil_mode);
  if (out <= 0) TVM_FFI_THROW(ValueError) << Where(node) << ": window larger than the padded input";
  return out;
}

const kernels::Conv2dParams& ConvParams(const Node& node) {
  if (const auto* qnn = std::get_if<QnnAttrs>(&node.attrs)) return qnn->conv;
  return std::get<ConvAttrs>(node.attrs).params;
}

Shape InferConv(const Node& node, const Shape& data_in, const Shape& weight_in) {
  const kernels::Conv2dParams& p = ConvParams(node);
  bool is_1d = node.op == OpKind::kConv1d;
  ExpectRank(node, data_in, is_1d ? 3 : 4, "data");
  ExpectRank(node, weight_in, is_1d ? 3 : 4, "weight");
  Shape data = LiftConv1dData(data_in, p.data_layout);
  Shape weight = LiftConv1dWeight(weight_in, p.kernel_layout);
  bool nchw = p.data_layout == kernels::DataLayout::kNCHW;
  bool oihw = p.kernel_layout == kernels::KernelLayout::kOIHW;
  int64_t n = data[0], c = nchw ? data[1] : data[3], h = nchw ? data[2] : data[1],
          w = nchw ? data[3] : data[2];
  int64_t o = oihw ? weight[0] : weight[3], i = oihw ? weight[1] : weight[2],
          kh = oihw ? weight[2] : weight[0], kw = oihw ? weight[3] : weight[1];
  if (p.groups <= 0 || c % p.groups != 0 || o % p.groups != 0 || c / p.groups != i) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": groups=" << p.groups << " inconsistent with "
                              << c << " input channels, weight " << ShapeText(weight_in);
  }
  int64_t oh =
      WindowOutput(node, h, p.padding[0], p.padding[2], kh, p.strides[0], p.dilation[0], false);
  int64_t ow =
      WindowOutput(node, w, p.padding[1], p.padding[3], kw, p.strides[1], p.dilation[1], false);
  if (is_1d) return nchw ? Shape{n, o, ow} : Shape{n, ow, o};
  return nchw ? Shape{n, o, oh, ow} : Shape{n, oh, ow, o};
}

const kernels::Pool2dParams& PoolParams(const Node& node) {
  if (const auto* qnn = std::get_if<QnnPoolAttrs>(&node.attrs)) return qnn->params.pool;
  return std::get<PoolAttrs>(node.attrs).params;
}

Shape InferPool(const Node& node, const Shape& data) {
  const kernels::Pool2dParams& p = PoolParams(node);
  ExpectRank(node, data, 4, "data");
  if (p.pool_size[0] > kMaxWindowAttr || p.pool_size[1] > kMaxWindowAttr) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": pool_size must be <= 2^31";
  }
  bool nchw = p.layout == kernels::DataLayout::kNCHW;
  int64_t h = nchw ? data[2] : data[1], w = nchw ? data[3] : data[2];
  int64_t oh = WindowOutput(node, h, p.padding[0], p.padding[2], p.pool_size[0], p.strides[0],
                            p.dilation[0], p.ceil_mode);
  int64_t ow = WindowOutput(node, w, p.padding[1], p.padding[3], p.pool_size[1], p.strides[1],
                            p.dilation[1], p.ceil_mode);
  return nchw ? Shape{data[0], data[1], oh, ow} : Shape{data[0], oh, ow, data[3]};
}

Shape InferBatchNorm(const Node& node, const std::vector<const Shape*>& in) {
  int64_t axis = std::get<BatchNormAttrs>(node.attrs).axis;
  for (size_t i = 1; i < in.size(); ++i) {
    if (*in[i] != Shape{(*in[0])[axis]}) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": parameter " << i << " has shape "
                                << ShapeText(*in[i]) << ", expected (" << (*in[0])[axis] << ",)";
    }
  }
  return *in[0];
}

Shape InferPermute(const Node& node, const Shape& data) {
  const std::vector<int64_t>& axes = std::get<PermuteDimsAttrs>(node.attrs).axes;
  std::vector<int64_t> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted.size() != data.size() || sorted[i] != static_cast<int64_t>(i)) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": axes are not a permutation of the "
                                << data.size() << " input dims";
    }
  }
  Shape out;
  for (int64_t axis : axes) out.push_back(data[axis]);
  return out;
}

/*! \brief {H, W} of a 4-D NCHW / NHWC shape. */
std::array<int64_t, 2> ImageSize(const Shape& shape, kernels::DataLayout layout) {
  const bool nchw = layout == kernels::DataLayout::kNCHW;
  return {nchw ? shape[2] : shape[1], nchw ? shape[3] : shape[2]};
}

/*! \brief `data` with H, W replaced by `size` (a resize / adaptive pooling result). */
Shape WithImageSize(const Node& node, const Shape& data, kernels::DataLayout layout,
                    const std::array<int64_t, 2>& size) {
  ExpectRank(node, data, 4, "data");
  Shape out = data;
  const bool nchw = layout == kernels::DataLayout::kNCHW;
  out[nchw ? 2 : 1] = size[0];
  out[nchw ? 3 : 2] = size[1];
  if (kernels::NumElements(data) == 0 || size[0] <= 0 || size[1] <= 0) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": empty images are not resampled on the NPU";
  }
  return out;
}

Shape InferResize(const Node& node, const Shape& data) {
  const kernels::Resize2dParams& p = std::get<ResizeAttrs>(node.attrs).params;
  if (p.mode == kernels::CoordinateMode::kAlignCorners &&
      (p.out_size[0] == 1 || p.out_size[1] == 1)) {
    TVM_FFI_THROW(ValueError) << Where(node)
                              << ": align_corners with an output extent of 1 divides by zero in "
                                 "TVM's resize2d";
  }
  const bool tflite_mode = p.mode == kernels::CoordinateMode::kHalfPixel ||
                           p.mode == kernels::CoordinateMode::kAlignCorners ||
                           p.mode == kernels::CoordinateMode::kAsymmetric;
  if (p.tflite_integer &&
      (p.method != kernels::ResizeMethod::kLinear || node.dtype != DType::kInt8 || !tflite_mode)) {
    TVM_FFI_THROW(ValueError) << Where(node)
                              << ": TFLite rounding resizes int8 tensors bilinearly with "
                                 "half_pixel, align_corners or asymmetric coordinates only";
  }
  return WithImageSize(node, data, p.layout, p.out_size);
}

Shape InferConvTranspose(const Node& node, const Shape& data, const Shape& weight) {
  const ConvTransposeAttrs& a = TransposedConvAttrsOf(node.attrs);
  const kernels::ConvTransposeParams& p = a.params;
  ExpectRank(node, data, 4, "data");
  ExpectRank(node, weight, 4, "weight");
  const bool nchw = p.data_layout == kernels::DataLayout::kNCHW;
  const int64_t channels = nchw ? data[1] : data[3];
  if (p.groups <= 0 || weight[0] != channels || channels % p.groups != 0) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": weight " << ShapeText(weight)
                              << " (IOHW) does not fit " << channels << " input channels in "
                              << p.groups << " groups";
  }
  const std::array<int64_t, 2> in = ImageSize(data, p.data_layout);
  std::array<int64_t, 2> out{};
  for (int s = 0; s < 2; ++s) {
    const char* what = "conv2d_transpose extent";
    const int64_t span = checked::Add(checked::Mul(in[s] - 1, p.strides[s], what),
                                      checked::Mul(weight[2 + s] - 1, p.dilation[s], what), what);
    out[s] = span + 1 + a.output_padding[s] - a.padding[s] - a.padding[s + 2];
    if (in[s] <= 0 || weight[2 + s] <= 0 || out[s] <= 0) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": the result would be empty";
    }
  }
  const int64_t out_channels = checked::Mul(weight[1], p.groups, "channels");
  return nchw ? Shape{data[0], out_channels, out[0], out[1]}
              : Shape{data[0], out[0], out[1], out_channels};
}

Shape InferNorm(const Node& node, const std::vector<const Shape*>& in) {
  const kernels::GroupNormParams& p = std::get<NormAttrs>(node.attrs).params;
  const Shape channels{(*in[0])[p.channel_axis]};
  for (size_t k = 1; k < in.size(); ++k) {
    if (*in[k] != channels) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": parameter " << k << " has shape "
                                << ShapeText(*in[k]) << ", expected " << ShapeText(channels);
    }
  }
  return *in[0];
}

/*! \brief take(table [V, ...], ids [n]) -> [n, ...]. */
Shape InferTake(const Node& node, const Shape& table, const Shape& ids) {
  if (table.empty() || ids.size() != 1) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": take gathers rows of a table of rank >= 1 by "
                              << "a rank-1 id tensor, got " << ShapeText(table) << " and "
                              << ShapeText(ids);
  }
  Shape out = table;
  out[0] = ids[0];
  return out;
}

Shape InferPad(const Node& node, const Shape& data) {
  const kernels::PadParams& p = std::get<PadAttrs>(node.attrs).params;
  Shape out = data;
  for (size_t d = 0; d < data.size(); ++d) {
    out[d] = checked::Add(checked::Add(data[d], p.before[d], "pad"), p.after[d], "pad");
  }
  return out;
}

/*! \brief Input count of an op; 0 for concat, which takes one or more. */
size_t ExpectedArity(OpKind op) {
  switch (op) {
    case OpKind::kConcat:
    case OpKind::kQnnConcat:
      return 0;
    case OpKind::kMaximum:
    case OpKind::kMinimum:
    case OpKind::kPower:
    case OpKind::kQnnAdd:
    case OpKind::kQnnMultiply:
    case OpKind::kMatmul:
    case OpKind::kConv1d:
    case OpKind::kConv2d:
    case OpKind::kQnnConv2d:
    case OpKind::kQnnConv2dTranspose:
    case OpKind::kQnnMatmul:
    case OpKind::kAdd:
    case OpKind::kSubtract:
    case OpKind::kMultiply:
    case OpKind::kDivide:
    case OpKind::kPrelu:
    case OpKind::kConv2dTranspose:
    case OpKind::kTake:
      return 2;
    case OpKind::kBatchNorm:
      return 5;
    case OpKind::kLayerNorm:
    case OpKind::kGroupNorm:
    case OpKind::kInstanceNorm:
      return 3;
    default:
      return 1;
  }
}

Shape InferConcat(const Node& node, const std::vector<const Shape*>& in) {
  const int64_t axis = node.op == OpKind::kConcat ? std::get<ConcatAttrs>(node.attrs).axis
                                                  : std::get<QnnConcatAttrs>(node.attrs).axis;
  Shape out = *in[0];
  out[axis] = 0;
  for (const Shape* shape : in) {
    bool same = shape->size() == out.size();
    for (size_t d = 0; same && d < out.size(); ++d) {
      same = static_cast<int64_t>(d) == axis || (*shape)[d] == out[d];
    }
    if (!same) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": input " << ShapeText(*shape)
                                << " does not match the others outside axis " << axis;
    }
    out[axis] = checked::Add(out[axis], (*shape)[axis], "concat extent");
  }
  return out;
}

Shape InferSlice(const Node& node, const Shape& data) {
  const SliceAttrs& slice = std::get<SliceAttrs>(node.attrs);
  if (slice.begin.size() != data.size() || slice.step.size() != data.size() ||
      node.shape.size() != data.size()) {
    TVM_FFI_THROW(ValueError) << Where(node)
                              << ": begin, step and shape must have the input's rank "
                              << data.size();
  }
  for (size_t d = 0; d < data.size(); ++d) {
    const int64_t extent = node.shape[d];
    // begin <= data[d] also for an empty slice, so that views stay inside their tensor.
    const bool inside =
        slice.step[d] >= 1 && slice.begin[d] >= 0 && slice.begin[d] <= data[d] &&
        (extent == 0 ||
         checked::Add(slice.begin[d], checked::Mul(extent - 1, slice.step[d], "slice end"),
                      "slice end") < data[d]);
    if (!inside) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": dim " << d << " (begin " << slice.begin[d]
                                << ", step " << slice.step[d] << ", extent " << extent
                                << ") is outside the input " << ShapeText(data);
    }
  }
  return node.shape;
}

Shape InferMean(const Node& node, const Shape& data) {
  const ReduceAttrs& reduce = std::get<ReduceAttrs>(node.attrs);
  Shape out;
  for (size_t d = 0; d < data.size(); ++d) {
    const bool reduced = std::find(reduce.axes.begin(), reduce.axes.end(),
                                   static_cast<int64_t>(d)) != reduce.axes.end();
    if (!reduced) {
      out.push_back(data[d]);
    } else if (reduce.keepdims) {
      out.push_back(1);
    }
  }
  return out;
}

Shape InferLayerNorm(const Node& node, const std::vector<const Shape*>& in) {
  const int64_t first = std::get<LayerNormAttrs>(node.attrs).first_axis;
  const Shape normalized(in[0]->begin() + first, in[0]->end());
  for (size_t k = 1; k < in.size(); ++k) {
    if (*in[k] != normalized) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": parameter " << k << " has shape "
                                << ShapeText(*in[k]) << ", expected " << ShapeText(normalized);
    }
  }
  return *in[0];
}

/*! \brief Whether input `k` of `node` may have `dtype`: same as the node, except across the
 * quantized boundary (quantize, dequantize, the integer qnn ops and their int8 weights). */
bool DTypeAllowed(const Node& node, size_t k, DType dtype) {
  switch (node.op) {
    case OpKind::kQuantize:
      return dtype == DType::kFloat32 && IsQuantizedDType(node.dtype);
    case OpKind::kDequantize:
      return IsQuantizedDType(dtype) && node.dtype == DType::kFloat32;
    case OpKind::kQnnConv2d:
    case OpKind::kQnnConv2dTranspose:
    case OpKind::kQnnMatmul:
      return IsQuantizedDType(node.dtype) &&
             (k == 0 ? IsQuantizedDType(dtype) : dtype == DType::kInt8);
    case OpKind::kArgmax:
    case OpKind::kArgmin:
      // Indices of a float tensor.
      return node.dtype == DType::kInt64 && (dtype == DType::kFloat32 || dtype == DType::kFloat16);
    case OpKind::kCast:
      return node.dtype == DType::kFloat32 && IsCastInput(dtype);
    case OpKind::kTake:
      // Rows of the node's dtype, picked by integer ids.
      return k == 0 ? dtype == node.dtype : dtype == DType::kInt32 || dtype == DType::kInt64;
    case OpKind::kQnnLut:
      // Tables cover 8-bit inputs only; a lookup table may hold float32 values.
      return (IsQuantizedDType(node.dtype) || node.dtype == DType::kFloat32) &&
             DTypeBytes(dtype) == 1;
    case OpKind::kQnnSoftmax:
      return IsQuantizedDType(node.dtype) && DTypeBytes(dtype) == 1;
    default:
      if (IsQnnOp(node.op)) return IsQuantizedDType(node.dtype) && IsQuantizedDType(dtype);
      return dtype == node.dtype;
  }
}

/*! \brief The integer arithmetic a qnn op's attributes ask for. */
kernels::Rounding RoundingOf(const OpAttrs& attrs) {
  if (const auto* qnn = std::get_if<QnnAttrs>(&attrs)) return qnn->requant.rounding;
  if (const auto* op = std::get_if<QnnRequantizeAttrs>(&attrs)) return op->params.rounding;
  if (const auto* op = std::get_if<QnnBinaryAttrs>(&attrs)) return op->params.rounding;
  if (const auto* op = std::get_if<QnnPoolAttrs>(&attrs)) return op->params.rounding;
  if (const auto* op = std::get_if<QnnSoftmaxAttrs>(&attrs)) return op->params.rounding;
  if (const auto* op = std::get_if<QnnConcatAttrs>(&attrs)) {
    if (!op->inputs.empty()) return op->inputs[0].rounding;
  }
  return kernels::Rounding::kTvm;
}

/*! \brief Attributes that must agree with the input dtypes and count. */
void CheckQnnInputs(const Graph& graph, const Node& node) {
  if (RoundingOf(node.attrs) == kernels::Rounding::kTflite) {
    // TFLite's 8-bit kernels: activations of 8 bits (int32 accumulators, as TFLite's).
    const DType input = graph.nodes[node.inputs[0]].dtype;
    if (DTypeBytes(input) != 1) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": TFLite rounding needs 8-bit inputs, not "
                                << DTypeName(input);
    }
  }
  if (const auto* lut = std::get_if<QnnLutAttrs>(&node.attrs)) {
    const DType input = graph.nodes[node.inputs[0]].dtype;
    const int64_t lo = QuantizedRange(input).first;
    if (lut->table.index_offset != lo || lut->table.values.size() != 256) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": a " << DTypeName(input)
                                << " input needs a 256-entry table starting at " << lo;
    }
  }
  if (const auto* concat = std::get_if<QnnConcatAttrs>(&node.attrs)) {
    if (concat->inputs.size() != node.inputs.size()) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": " << concat->inputs.size()
                                << " input quantizations for " << node.inputs.size() << " inputs";
    }
  }
}

void CheckQnnChannels(const Node& node, const QnnAttrs& qnn) {
  int64_t channels = node.shape.back();
  if (node.op == OpKind::kQnnConv2d || node.op == OpKind::kQnnConv2dTranspose) {
    const kernels::DataLayout layout =
        node.op == OpKind::kQnnConv2d ? qnn.conv.data_layout : qnn.transposed.params.data_layout;
    channels = node.shape[layout == kernels::DataLayout::kNCHW ? 1 : 3];
  }
  const size_t scales = qnn.weight_scales.size();
  if (scales != 1 && static_cast<int64_t>(scales) != channels) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": " << scales << " weight scales for " << channels
                              << " output channels";
  }
  if (!qnn.bias.empty() && static_cast<int64_t>(qnn.bias.size()) != channels) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": " << qnn.bias.size() << " biases for "
                              << channels << " output channels";
  }
}

/*! \brief Zero points lie in their integer dtype's range, as Relax's int8 / int16 constants do. */
void CheckZeroPoint(const Node& node, DType input_dtype) {
  int64_t zero_point = 0;
  DType dtype = input_dtype;
  if (const auto* qnn = std::get_if<QnnAttrs>(&node.attrs)) {
    zero_point = qnn->input_zero_point;
  } else if (const auto* quant = std::get_if<QuantAttrs>(&node.attrs)) {
    zero_point = quant->zero_point;
    if (node.op == OpKind::kQuantize) dtype = node.dtype;
  } else {
    return;
  }
  const auto [lo, hi] = IsQuantizedDType(dtype) ? QuantizedRange(dtype)
                                                : std::pair<int64_t, int64_t>{INT32_MIN, INT32_MAX};
  if (zero_point < lo || zero_point > hi) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": zero point " << zero_point << " is outside the "
                              << DTypeName(dtype) << " range";
  }
}

/*!
 * \brief An empty result is computed by doing nothing (the compiler emits no tiles for it). A
 * non-empty result of an empty operand (a matmul over K = 0, a reduction over an empty axis,
 * a concat with an empty piece) would need its own semantics (zeros, NaN, a copy of the other
 * pieces): the pattern checks keep such ops on the CPU, and a graph that has one is refused.
 */
void CheckEmptyOperands(const Node& node, const std::vector<const Shape*>& input_shapes) {
  if (kernels::NumElements(node.shape) == 0) return;
  for (const Shape* shape : input_shapes) {
    if (kernels::NumElements(*shape) == 0) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": an empty operand " << ShapeText(*shape)
                                << " with a non-empty result " << ShapeText(node.shape)
                                << " (such ops stay on the CPU)";
    }
  }
}

void CheckStructure(const Graph& graph) {
  int64_t count = static_cast<int64_t>(graph.nodes.size());
  for (int64_t i = 0; i < count; ++i) {
    const Node& node = graph.nodes[i];
    if (node.kind != NodeKind::kOp) continue;
    const size_t arity = ExpectedArity(node.op);
    if (arity == 0 && node.inputs.empty()) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": expects at least one input";
    }
    if (arity != 0 && node.inputs.size() != arity) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": expects " << arity << " inputs, got "
                                << node.inputs.size();
    }
    for (int64_t input : node.inputs) {
      if (input < 0 || input >= i) {
        TVM_FFI_THROW(ValueError) << Where(node) << ": input " << input
                                  << " does not name an earlier node";
      }
    }
  }
  std::vector<bool> seen(graph.nodes.size(), false);
  for (int64_t arg : graph.arg_nodes) {
    if (arg < 0 || arg >= count || graph.nodes[arg].kind != NodeKind::kInput || seen[arg]) {
      TVM_FFI_THROW(ValueError) << "NPU graph: arg_nodes entry " << arg
                                << " is not a distinct input node";
    }
    seen[arg] = true;
  }
  for (int64_t i = 0; i < count; ++i) {
    if (graph.nodes[i].kind == NodeKind::kInput && !seen[i]) {
      TVM_FFI_THROW(ValueError) << "NPU graph: input node " << Printable(graph.nodes[i].name)
                                << " is missing from arg_nodes";
    }
  }
  if (graph.heads.empty()) TVM_FFI_THROW(ValueError) << "NPU graph has no outputs (heads)";
  for (int64_t head : graph.heads) {
    if (head < 0 || head >= count) {
      TVM_FFI_THROW(ValueError) << "NPU graph: head " << head << " does not name a node";
    }
  }
}

/*! \brief Whole-tensor {H, W} of a resize / adaptive pooling: input from the input, output from
 * the node's declared shape (InferShape then checks the other dims). */
template <typename Params>
void NormalizeImageSizes(const Shape& data, const Node& node, Params* p) {
  ExpectRank(node, data, 4, "data");
  ExpectRank(node, node.shape, 4, "result");
  p->in_size = ImageSize(data, p->layout);
  p->out_size = ImageSize(node.shape, p->layout);
}

void NormalizePad(const Shape& data, const Node& node, kernels::PadParams* p) {
  if (p->before.size() != data.size()) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": pad_width has " << p->before.size()
                              << " pairs for rank " << data.size();
  }
  p->in_shape = data;
  p->in_begin.assign(data.size(), 0);
  p->out_begin.assign(data.size(), 0);
  for (size_t d = 0; d < data.size(); ++d) {
    const bool padded = p->before[d] > 0 || p->after[d] > 0;
    if (padded && data[d] == 0 && p->mode != kernels::PadMode::kConstant) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": cannot "
                                << "mirror or wrap an empty dim";
    }
    if (padded && p->mode == kernels::PadMode::kReflect &&
        (p->before[d] >= data[d] || p->after[d] >= data[d])) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": reflect padding of dim " << d
                                << " must be narrower than its extent " << data[d];
    }
  }
}

void NormalizeNorm(const Shape& data, const Node& node, NormAttrs* norm) {
  kernels::GroupNormParams& p = norm->params;
  p.channel_axis = NormalizeAxis(p.channel_axis, data.size(), Where(node));
  p.axes = NormalizedSet(p.axes, data.size(), Where(node));
  if (std::find(p.axes.begin(), p.axes.end(), p.channel_axis) != p.axes.end()) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": axes contain the channel axis";
  }
  const int64_t channels = data[p.channel_axis];
  if (node.op == OpKind::kInstanceNorm) p.groups = channels;
  if (p.groups <= 0 || channels % p.groups != 0) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": " << channels << " channels in " << p.groups
                              << " groups";
  }
  norm->count = channels / p.groups;
  for (int64_t axis : p.axes) norm->count = checked::Mul(norm->count, data[axis], "group size");
}

}  // namespace

Shape LiftConv1dData(const Shape& s, kernels::DataLayout layout) {
  if (s.size() != 3) return s;
  return layout == kernels::DataLayout::kNCHW ? Shape{s[0], s[1], 1, s[2]}
                                              : Shape{s[0], 1, s[1], s[2]};
}

Shape LiftConv1dWeight(const Shape& s, kernels::KernelLayout layout) {
  if (s.size() != 3) return s;
  return layout == kernels::KernelLayout::kOIHW ? Shape{s[0], s[1], 1, s[2]}
                                                : Shape{1, s[0], s[1], s[2]};
}

void NormalizeAxes(Graph* graph) {
  CheckStructure(*graph);
  for (Node& node : graph->nodes) {
    if (node.kind != NodeKind::kOp) continue;
    size_t rank = graph->nodes[node.inputs[0]].shape.size();
    if (auto* softmax = std::get_if<SoftmaxAttrs>(&node.attrs)) {
      softmax->axis = NormalizeAxis(softmax->axis, rank, Where(node));
    } else if (auto* qnn_softmax = std::get_if<QnnSoftmaxAttrs>(&node.attrs)) {
      qnn_softmax->axis = NormalizeAxis(qnn_softmax->axis, rank, Where(node));
    } else if (auto* concat = std::get_if<QnnConcatAttrs>(&node.attrs)) {
      concat->axis = NormalizeAxis(concat->axis, rank, Where(node));
    } else if (auto* bn = std::get_if<BatchNormAttrs>(&node.attrs)) {
      bn->axis = NormalizeAxis(bn->axis, rank, Where(node));
    } else if (auto* permute = std::get_if<PermuteDimsAttrs>(&node.attrs)) {
      if (permute->axes.empty()) {
        permute->axes.resize(rank);
        std::iota(permute->axes.rbegin(), permute->axes.rend(), 0);
      }
      for (int64_t& axis : permute->axes) axis = NormalizeAxis(axis, rank, Where(node));
    } else if (auto* concat = std::get_if<ConcatAttrs>(&node.attrs)) {
      concat->axis = NormalizeAxis(concat->axis, rank, Where(node));
    } else if (auto* reduce = std::get_if<ReduceAttrs>(&node.attrs)) {
      reduce->axes = NormalizedSet(reduce->axes, rank, Where(node));
    } else if (auto* resize = std::get_if<ResizeAttrs>(&node.attrs)) {
      NormalizeImageSizes(graph->nodes[node.inputs[0]].shape, node, &resize->params);
    } else if (auto* pool = std::get_if<AdaptivePoolAttrs>(&node.attrs)) {
      NormalizeImageSizes(graph->nodes[node.inputs[0]].shape, node, &pool->params);
    } else if (auto* pad = std::get_if<PadAttrs>(&node.attrs)) {
      NormalizePad(graph->nodes[node.inputs[0]].shape, node, &pad->params);
    } else if (auto* group_norm = std::get_if<NormAttrs>(&node.attrs)) {
      NormalizeNorm(graph->nodes[node.inputs[0]].shape, node, group_norm);
    } else if (auto* norm = std::get_if<LayerNormAttrs>(&node.attrs)) {
      norm->axes = NormalizedSet(norm->axes, rank, Where(node));
      norm->first_axis = static_cast<int64_t>(rank - norm->axes.size());
      for (size_t k = 0; k < norm->axes.size(); ++k) {
        if (norm->axes.empty() || norm->axes[k] != norm->first_axis + static_cast<int64_t>(k)) {
          TVM_FFI_THROW(ValueError) << Where(node) << ": axes must be the trailing dims";
        }
      }
      if (norm->axes.empty()) TVM_FFI_THROW(ValueError) << Where(node) << ": axes is empty";
    }
  }
}

Shape InferShape(const Node& node, const std::vector<const Shape*>& in) {
  switch (node.op) {
    case OpKind::kMatmul:
    case OpKind::kQnnMatmul:
      return InferMatmul(node, *in[0], *in[1]);
    case OpKind::kPermuteDims:
      return InferPermute(node, *in[0]);
    case OpKind::kReshape:
      if (kernels::NumElements(*in[0]) != kernels::NumElements(node.shape)) {
        TVM_FFI_THROW(ValueError) << Where(node) << ": reshape changes the element count of "
                                  << ShapeText(*in[0]);
      }
      return node.shape;
    case OpKind::kConv1d:
    case OpKind::kConv2d:
    case OpKind::kQnnConv2d:
      return InferConv(node, *in[0], *in[1]);
    case OpKind::kMaxPool2d:
    case OpKind::kAvgPool2d:
    case OpKind::kQnnMaxPool2d:
    case OpKind::kQnnAvgPool2d:
      return InferPool(node, *in[0]);
    case OpKind::kBatchNorm:
      return InferBatchNorm(node, in);
    case OpKind::kAdd:
    case OpKind::kSubtract:
    case OpKind::kMultiply:
    case OpKind::kDivide:
    case OpKind::kMaximum:
    case OpKind::kMinimum:
    case OpKind::kPower:
    case OpKind::kQnnAdd:
    case OpKind::kQnnMultiply:
      return Broadcast(node, *in[0], *in[1]);
    case OpKind::kConcat:
    case OpKind::kQnnConcat:
      return InferConcat(node, in);
    case OpKind::kStridedSlice:
      return InferSlice(node, *in[0]);
    case OpKind::kBroadcastTo:
      if (Broadcast(node, *in[0], node.shape) != node.shape) {
        TVM_FFI_THROW(ValueError) << Where(node) << ": " << ShapeText(*in[0])
                                  << " does not broadcast to " << ShapeText(node.shape);
      }
      return node.shape;
    case OpKind::kMean:
    case OpKind::kSum:
    case OpKind::kMax:
    case OpKind::kMin:
    case OpKind::kVariance:
    case OpKind::kArgmax:
    case OpKind::kArgmin:
      return InferMean(node, *in[0]);
    case OpKind::kResize2d:
      return InferResize(node, *in[0]);
    case OpKind::kAdaptiveAvgPool2d: {
      const kernels::AdaptivePoolParams& p = std::get<AdaptivePoolAttrs>(node.attrs).params;
      return WithImageSize(node, *in[0], p.layout, p.out_size);
    }
    case OpKind::kConv2dTranspose:
    case OpKind::kQnnConv2dTranspose:
      return InferConvTranspose(node, *in[0], *in[1]);
    case OpKind::kGroupNorm:
    case OpKind::kInstanceNorm:
      return InferNorm(node, in);
    case OpKind::kPad:
      return InferPad(node, *in[0]);
    case OpKind::kTake:
      return InferTake(node, *in[0], *in[1]);
    case OpKind::kPrelu:
      if (Broadcast(node, *in[0], *in[1]) != *in[0]) {
        TVM_FFI_THROW(ValueError) << Where(node) << ": the slope " << ShapeText(*in[1])
                                  << " must broadcast onto the input " << ShapeText(*in[0]);
      }
      return *in[0];
    case OpKind::kLayerNorm:
      return InferLayerNorm(node, in);
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax:
    case OpKind::kLeakyRelu:
    case OpKind::kRelu:
    case OpKind::kClip:
    case OpKind::kSigmoid:
    case OpKind::kTanh:
    case OpKind::kGelu:
    case OpKind::kGeluTanh:
    case OpKind::kSqrt:
    case OpKind::kRsqrt:
    case OpKind::kExp:
    case OpKind::kLog:
    case OpKind::kErf:
    case OpKind::kAbs:
    case OpKind::kNegative:
    case OpKind::kQuantize:
    case OpKind::kDequantize:
    case OpKind::kQnnRequantize:
    case OpKind::kQnnLut:
    case OpKind::kQnnSoftmax:
    case OpKind::kCast:
      return *in[0];
  }
  TVM_FFI_THROW(ValueError) << Where(node) << ": no shape rule";
  TVM_FFI_UNREACHABLE();
}

void ValidateGraph(const Graph& graph) {
  CheckStructure(graph);
  for (const Node& node : graph.nodes) {
    if (node.kind != NodeKind::kOp) continue;
    std::vector<const Shape*> input_shapes;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const Node& producer = graph.nodes[node.inputs[k]];
      if (!DTypeAllowed(node, k, producer.dtype)) {
        TVM_FFI_THROW(ValueError) << Where(node) << ": input " << Printable(producer.name) << " is "
                                  << DTypeName(producer.dtype) << " but the node is "
                                  << DTypeName(node.dtype) << " (mixed dtypes are not supported)";
      }
      input_shapes.push_back(&producer.shape);
    }
    CheckQnnInputs(graph, node);
    Shape inferred = InferShape(node, input_shapes);
    if (inferred != node.shape) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": declared shape " << ShapeText(node.shape)
                                << " but the op computes " << ShapeText(inferred);
    }
    // After shape inference: the channel axis exists in the (now verified) shape.
    if (const auto* qnn = std::get_if<QnnAttrs>(&node.attrs)) CheckQnnChannels(node, *qnn);
    CheckZeroPoint(node, graph.nodes[node.inputs[0]].dtype);
    CheckEmptyOperands(node, input_shapes);
  }
}

}  // namespace example_npu
