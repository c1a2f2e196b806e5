/*!
 * \file graph/shape_inference.cc
 * \brief Each op's output shape from its input shapes and typed attributes (InferShape).
 *
 * ValidateGraph compares the result with the shape the JSON states: a graph whose attributes and
 * shapes disagree is rejected at load instead of making a kernel read out of bounds.
 */
#include <tvm/ffi/error.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <string>

#include "graph/graph.h"
#include "graph/node_checks.h"
#include "kernels/window.h"
#include "support/checked_math.h"
#include "support/json_input.h"

namespace example_npu {
namespace {

using node_checks::ExpectRank;
using node_checks::ImageSize;
using node_checks::NormalizeAxis;
using node_checks::NormalizedSet;
using node_checks::Where;

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

Shape InferTopk(const Node& node, const Shape& data) {
  const kernels::TopkParams& p = std::get<TopkAttrs>(node.attrs).params;
  if (p.k < 1 || p.k > data[p.axis]) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": k = " << p.k << " is not in [1, " << data[p.axis]
                              << "] (the axis extent)";
  }
  if (p.indices && data[p.axis] > (int64_t{1} << 24)) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": indices along a " << data[p.axis]
                              << "-element axis (exact in the float32 datapath up to 2^24)";
  }
  Shape out = data;
  out[p.axis] = p.k;
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

}  // namespace

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
    case OpKind::kGreater:
    case OpKind::kGreaterEqual:
    case OpKind::kLess:
    case OpKind::kLessEqual:
    case OpKind::kEqual:
    case OpKind::kNotEqual:
      return Broadcast(node, *in[0], *in[1]);
    case OpKind::kWhere:
      return Broadcast(node, Broadcast(node, *in[0], *in[1]), *in[2]);
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
    case OpKind::kTopk:
      return InferTopk(node, *in[0]);
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
    case OpKind::kRound:
    case OpKind::kFloor:
    case OpKind::kCeil:
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

}  // namespace example_npu
