#include "sim/engines.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/conv_transpose.h"
#include "kernels/norm.h"
#include "kernels/quantize.h"
#include "kernels/quantized_ops.h"
#include "kernels/reduce.h"
#include "kernels/resample.h"
#include "kernels/topk.h"

namespace example_npu {
namespace {

kernels::BinaryOp ToBinaryOp(OpKind op) {
  switch (op) {
    case OpKind::kSubtract:
      return kernels::BinaryOp::kSubtract;
    case OpKind::kMultiply:
      return kernels::BinaryOp::kMultiply;
    case OpKind::kDivide:
      return kernels::BinaryOp::kDivide;
    case OpKind::kMaximum:
      return kernels::BinaryOp::kMaximum;
    case OpKind::kMinimum:
      return kernels::BinaryOp::kMinimum;
    case OpKind::kPower:
      return kernels::BinaryOp::kPower;
    case OpKind::kPrelu:
      return kernels::BinaryOp::kPrelu;
    case OpKind::kGreater:
      return kernels::BinaryOp::kGreater;
    case OpKind::kGreaterEqual:
      return kernels::BinaryOp::kGreaterEqual;
    case OpKind::kLess:
      return kernels::BinaryOp::kLess;
    case OpKind::kLessEqual:
      return kernels::BinaryOp::kLessEqual;
    case OpKind::kEqual:
      return kernels::BinaryOp::kEqual;
    case OpKind::kNotEqual:
      return kernels::BinaryOp::kNotEqual;
    default:
      return kernels::BinaryOp::kAdd;
  }
}

kernels::UnaryOp ToUnaryOp(OpKind op) {
  switch (op) {
    case OpKind::kClip:
      return kernels::UnaryOp::kClip;
    case OpKind::kSigmoid:
      return kernels::UnaryOp::kSigmoid;
    case OpKind::kTanh:
      return kernels::UnaryOp::kTanh;
    case OpKind::kGelu:
      return kernels::UnaryOp::kGelu;
    case OpKind::kGeluTanh:
      return kernels::UnaryOp::kGeluTanh;
    case OpKind::kSqrt:
      return kernels::UnaryOp::kSqrt;
    case OpKind::kRsqrt:
      return kernels::UnaryOp::kRsqrt;
    case OpKind::kExp:
      return kernels::UnaryOp::kExp;
    case OpKind::kLog:
      return kernels::UnaryOp::kLog;
    case OpKind::kErf:
      return kernels::UnaryOp::kErf;
    case OpKind::kAbs:
      return kernels::UnaryOp::kAbs;
    case OpKind::kNegative:
      return kernels::UnaryOp::kNegative;
    case OpKind::kRound:
      return kernels::UnaryOp::kRound;
    case OpKind::kFloor:
      return kernels::UnaryOp::kFloor;
    case OpKind::kCeil:
      return kernels::UnaryOp::kCeil;
    default:
      return kernels::UnaryOp::kRelu;
  }
}

/*!
 * \brief group_norm / instance_norm: the whole op, or one tile's step (statistics of its chunk
 * into the statistics tile, or the normalisation of its chunk with them).
 */
void RunNorm(const NormAttrs& norm, const std::vector<OperandF32>& in, float* out) {
  switch (norm.step) {
    case NormAttrs::Step::kWhole:
      kernels::GroupNorm(in[0].data, *in[0].shape, norm.params, in[1].data, in[2].data, out);
      return;
    case NormAttrs::Step::kStatistics: {
      // Accumulating steps read the statistics so far as their second input (maybe into a
      // temporary: kernels never alias), and continue the sums in order.
      if (norm.accumulate && in[1].data != out) {
        std::memcpy(out, in[1].data, kernels::NumElements(*in[1].shape) * sizeof(float));
      }
      const kernels::NormSpace tile{
          *in[0].shape, kernels::GroupNormReduced(norm.params, in[0].shape->size() - 1)};
      kernels::GroupNormStatistics(in[0].data, tile, out, norm.accumulate);
      return;
    }
    case NormAttrs::Step::kApply: {
      const kernels::NormSpace tile{
          *in[0].shape, kernels::GroupNormReduced(norm.params, in[0].shape->size() - 1)};
      kernels::GroupNormApply(in[0].data, tile, in[1].data, static_cast<float>(norm.count),
                              norm.params.epsilon, in[2].data, *in[2].shape, in[3].data,
                              *in[3].shape, out);
      return;
    }
  }
}

/*! \brief topk: whole rows, or one step of a row streamed in chunks. */
void RunTopk(const TopkAttrs& topk, const std::vector<OperandF32>& in, float* out,
             const kernels::Shape& out_shape) {
  switch (topk.step) {
    case TopkAttrs::Step::kWhole:
      kernels::Topk(in[0].data, *in[0].shape, topk.params, out);
      return;
    case TopkAttrs::Step::kSelect:
      // Continuing steps read the list so far as their second input (maybe into a temporary:
      // kernels never alias) and update it.
      if (topk.continuing && in[1].data != out) {
        std::memcpy(out, in[1].data, kernels::NumElements(out_shape) * sizeof(float));
      }
      kernels::TopkSelect(in[0].data, *in[0].shape, topk.params, topk.index_offset, topk.continuing,
                          out);
      return;
    case TopkAttrs::Step::kEmit:
      kernels::TopkEmit(in[0].data, *in[0].shape, topk.params, out);
      return;
  }
}

/*! \brief The elements between a matrix operand's rows: its second-to-last stride, or `width`
 * (dense). */
int64_t RowStride(const std::vector<int64_t>* strides, int64_t width) {
  return strides != nullptr ? (*strides)[strides->size() - 2] : width;
}

}  // namespace

kernels::PixelStrides PixelStridesOf(const std::vector<int64_t>& strides) {
  TVM_FFI_ICHECK(strides.size() == 4 && strides[3] == 1) << "strided NHWC view expected";
  return kernels::PixelStrides{strides[0], strides[1], strides[2]};
}

std::optional<MatrixDims> SingleMatrixProduct(const kernels::Shape& a, const kernels::Shape& b) {
  const size_t rank = a.size();
  if (rank < 2 || b.size() != rank || a[rank - 1] != b[rank - 2]) return std::nullopt;
  for (size_t d = 0; d + 2 < rank; ++d) {
    if (a[d] != 1 || b[d] != 1) return std::nullopt;
  }
  return MatrixDims{a[rank - 2], a[rank - 1], b[rank - 1]};
}

bool StridedView(OpKind op, const OpAttrs& attrs, const std::vector<OperandF32>& inputs) {
  if (op == OpKind::kMatmul) {
    if (inputs.size() != 2) return false;
    const std::optional<MatrixDims> dims = SingleMatrixProduct(*inputs[0].shape, *inputs[1].shape);
    return dims && kernels::MatmulRowsApply(dims->m, dims->k, dims->n);
  }
  if (op != OpKind::kConv2d || inputs.size() < 2) return false;
  const ConvAttrs* conv = std::get_if<ConvAttrs>(&attrs);
  return conv != nullptr &&
         kernels::IsDepthwiseNhwc(*inputs[0].shape, *inputs[1].shape, conv->params);
}

void RunOp(OpKind op, const OpAttrs& attrs, const std::vector<OperandF32>& in, float* out,
           const kernels::Shape& out_shape, const std::vector<int64_t>* out_strides) {
  const int64_t size = kernels::NumElements(out_shape);
  const bool views = std::any_of(
      in.begin(), in.end(), [](const OperandF32& operand) { return operand.strides != nullptr; });
  if (views || out_strides != nullptr) {
    TVM_FFI_ICHECK(StridedView(op, attrs, in)) << OpKindName(op) << " takes dense tiles only";
    const kernels::Shape& in_shape = *in[0].shape;
    if (op == OpKind::kMatmul) {  // rows of each matrix, each row's elements dense
      const MatrixDims dims = *SingleMatrixProduct(in_shape, *in[1].shape);
      kernels::MatmulRows(in[0].data, RowStride(in[0].strides, dims.k), in[1].data,
                          RowStride(in[1].strides, dims.n), dims.m, dims.k, dims.n, out,
                          RowStride(out_strides, dims.n), false);
      return;
    }
    TVM_FFI_ICHECK(in.size() < 2 || in[1].strides == nullptr)
        << OpKindName(op) << " reads a dense second input";
    kernels::DepthwiseConvStrided(
        in[0].data, in_shape,
        in[0].strides ? PixelStridesOf(*in[0].strides) : kernels::DensePixelStrides(in_shape),
        in[1].data, *in[1].shape, out, out_shape,
        out_strides ? PixelStridesOf(*out_strides) : kernels::DensePixelStrides(out_shape),
        std::get<ConvAttrs>(attrs).params);
    return;
  }
  switch (op) {
    case OpKind::kMatmul:
      kernels::Matmul(in[0].data, *in[0].shape, in[1].data, *in[1].shape, out, out_shape);
      return;
    case OpKind::kPermuteDims:
      kernels::Transpose(in[0].data, *in[0].shape, std::get<PermuteDimsAttrs>(attrs).axes, out);
      return;
    case OpKind::kReshape:
      std::memcpy(out, in[0].data, size * sizeof(float));
      return;
    case OpKind::kConv1d:
    case OpKind::kConv2d:
      kernels::Conv2d(in[0].data, *in[0].shape, in[1].data, *in[1].shape, out, out_shape,
                      std::get<ConvAttrs>(attrs).params);
      return;
    case OpKind::kMaxPool2d:
    case OpKind::kAvgPool2d:
      kernels::Pool2d(in[0].data, *in[0].shape, out, out_shape, std::get<PoolAttrs>(attrs).params);
      return;
    case OpKind::kBatchNorm: {
      const BatchNormAttrs& a = std::get<BatchNormAttrs>(attrs);
      // axis -1: one channel, the parameters are scalars (see GroupTiler::TileAttrsOf).
      const kernels::Shape scalar_params = {1, size};
      const kernels::Shape& shape = a.axis < 0 ? scalar_params : *in[0].shape;
      const int64_t axis = std::max<int64_t>(a.axis, 0);
      for (size_t k = 1; k < 5; ++k) {
        TVM_FFI_ICHECK_EQ(kernels::NumElements(*in[k].shape), shape[axis])
            << "batch_norm parameter " << k << " does not match the tile's channels";
      }
      kernels::BatchNorm(in[0].data, shape, axis, in[1].data, in[2].data, in[3].data, in[4].data,
                         a.epsilon, a.center, a.scale, out);
      return;
    }
    case OpKind::kSoftmax: {
      const SoftmaxAttrs& softmax = std::get<SoftmaxAttrs>(attrs);
      kernels::Softmax(in[0].data, *in[0].shape, softmax.axis, out, softmax.zero_masked_rows,
                       softmax.zero_nan);
      return;
    }
    case OpKind::kMean:
    case OpKind::kSum:
    case OpKind::kMax:
    case OpKind::kMin:
    case OpKind::kVariance:
    case OpKind::kArgmax:
    case OpKind::kArgmin:
      kernels::Reduce(ReduceKindOf(op), in[0].data, *in[0].shape, std::get<ReduceAttrs>(attrs).axes,
                      out);
      return;
    case OpKind::kTopk:
      RunTopk(std::get<TopkAttrs>(attrs), in, out, out_shape);
      return;
    case OpKind::kLogSoftmax:
      kernels::LogSoftmax(in[0].data, *in[0].shape, std::get<SoftmaxAttrs>(attrs).axis, out);
      return;
    case OpKind::kLeakyRelu: {
      // x > 0 ? x : x * alpha: the prelu kernel with a scalar slope.
      const float alpha = std::get<LeakyReluAttrs>(attrs).alpha;
      kernels::Binary(kernels::BinaryOp::kPrelu, in[0].data, *in[0].shape, &alpha, {}, out,
                      out_shape);
      return;
    }
    case OpKind::kResize2d:
      kernels::Resize2d(in[0].data, *in[0].shape, out, out_shape,
                        std::get<ResizeAttrs>(attrs).params);
      return;
    case OpKind::kPad:
      kernels::Pad(in[0].data, *in[0].shape, out, out_shape, std::get<PadAttrs>(attrs).params);
      return;
    case OpKind::kAdaptiveAvgPool2d:
      kernels::AdaptiveAvgPool2d(in[0].data, *in[0].shape, out, out_shape,
                                 std::get<AdaptivePoolAttrs>(attrs).params);
      return;
    case OpKind::kConv2dTranspose:
      kernels::Conv2dTranspose(in[0].data, *in[0].shape, in[1].data, *in[1].shape, out, out_shape,
                               std::get<ConvTransposeAttrs>(attrs).params);
      return;
    case OpKind::kGroupNorm:
    case OpKind::kInstanceNorm:
      RunNorm(std::get<NormAttrs>(attrs), in, out);
      return;
    case OpKind::kLayerNorm: {
      const LayerNormAttrs& a = std::get<LayerNormAttrs>(attrs);
      kernels::LayerNorm(in[0].data, *in[0].shape, a.first_axis, in[1].data, in[2].data, a.epsilon,
                         a.center, a.scale, out);
      return;
    }
    case OpKind::kAdd:
    case OpKind::kSubtract:
    case OpKind::kMultiply:
    case OpKind::kDivide:
    case OpKind::kMaximum:
    case OpKind::kMinimum:
    case OpKind::kPower:
    case OpKind::kPrelu:
    case OpKind::kGreater:
    case OpKind::kGreaterEqual:
    case OpKind::kLess:
    case OpKind::kLessEqual:
    case OpKind::kEqual:
    case OpKind::kNotEqual:
      kernels::Binary(ToBinaryOp(op), in[0].data, *in[0].shape, in[1].data, *in[1].shape, out,
                      out_shape);
      return;
    case OpKind::kWhere:
      kernels::Where(in[0].data, *in[0].shape, in[1].data, *in[1].shape, in[2].data, *in[2].shape,
                     out, out_shape);
      return;
    case OpKind::kClip: {
      const ClipAttrs& clip = std::get<ClipAttrs>(attrs);
      kernels::Unary(kernels::UnaryOp::kClip, in[0].data, out, size, clip.min, clip.max);
      return;
    }
    case OpKind::kRelu:
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
      kernels::Unary(ToUnaryOp(op), in[0].data, out, size);
      return;
    case OpKind::kQuantize: {
      const QuantAttrs& q = std::get<QuantAttrs>(attrs);
      kernels::Quantize(in[0].data, size, q.scale, q.zero_point, q.min, q.max, out);
      return;
    }
    case OpKind::kDequantize: {
      const QuantAttrs& q = std::get<QuantAttrs>(attrs);
      kernels::Dequantize(in[0].data, size, q.scale, q.zero_point, out);
      return;
    }
    case OpKind::kCast:
      // From an integer: the emulator widened the tile to float32 as it loaded it, the values
      // are whole. To an integer: truncated toward zero here, narrowed by the store.
      for (int64_t i = 0; i < size; ++i) out[i] = std::trunc(in[0].data[i]);
      return;
    case OpKind::kQnnRequantize:
      kernels::Requantize(in[0].data, size, std::get<QnnRequantizeAttrs>(attrs).params, out);
      return;
    case OpKind::kQnnAdd:
    case OpKind::kQnnMultiply:
      kernels::QuantizedBinary(in[0].data, *in[0].shape, in[1].data, *in[1].shape, out, out_shape,
                               std::get<QnnBinaryAttrs>(attrs).params);
      return;
    case OpKind::kQnnMaxPool2d:
    case OpKind::kQnnAvgPool2d:
      kernels::QuantizedPool2d(in[0].data, *in[0].shape, out, out_shape,
                               std::get<QnnPoolAttrs>(attrs).params);
      return;
    case OpKind::kQnnLut:
      kernels::ApplyLookupTable(in[0].data, size, std::get<QnnLutAttrs>(attrs).table, out);
      return;
    case OpKind::kQnnSoftmax: {
      const QnnSoftmaxAttrs& softmax = std::get<QnnSoftmaxAttrs>(attrs);
      kernels::QuantizedSoftmax(in[0].data, *in[0].shape, softmax.axis, softmax.params, out);
      return;
    }
    case OpKind::kQnnConcat: {
      // A tile of one input carries that input's requantization (see the concat tiling rule).
      if (const auto* tile = std::get_if<QnnRequantizeAttrs>(&attrs)) {
        kernels::Requantize(in[0].data, size, tile->params, out);
        return;
      }
      const QnnConcatAttrs& concat = std::get<QnnConcatAttrs>(attrs);
      std::vector<const float*> data;
      std::vector<kernels::Shape> shapes;
      for (const OperandF32& operand : in) {
        data.push_back(operand.data);
        shapes.push_back(*operand.shape);
      }
      kernels::QuantizedConcat(data, shapes, concat.axis, concat.inputs, out);
      return;
    }
    case OpKind::kQnnConv2d:
    case OpKind::kQnnConv2dTranspose:
    case OpKind::kQnnMatmul:
      break;  // integer accumulation: the emulator's quantized step, not a float engine
    case OpKind::kConcat:
    case OpKind::kStridedSlice:
    case OpKind::kBroadcastTo:
    case OpKind::kTake:
      break;  // data movement: views and DMA copies, no engine computes them
  }
  TVM_FFI_THROW(InternalError) << "no engine runs " << OpKindName(op);
}

}  // namespace example_npu
