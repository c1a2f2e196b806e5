#include "graph/op.h"

#include <array>
#include <utility>

namespace example_npu {
namespace {

constexpr std::array<std::pair<DType, const char*>, 7> kDTypeNames = {{
    {DType::kFloat32, "float32"},
    {DType::kFloat16, "float16"},
    {DType::kInt8, "int8"},
    {DType::kUInt8, "uint8"},
    {DType::kInt16, "int16"},
    {DType::kInt32, "int32"},
    {DType::kInt64, "int64"},
}};

// Sized by its initializer: adding an op is one line here and one in OpKind, no count to update.
constexpr std::pair<OpKind, const char*> kOpNames[] = {
    {OpKind::kMatmul, "matmul"},
    {OpKind::kPermuteDims, "permute_dims"},
    {OpKind::kReshape, "reshape"},
    {OpKind::kConv1d, "nn.conv1d"},
    {OpKind::kConv2d, "nn.conv2d"},
    {OpKind::kMaxPool2d, "nn.max_pool2d"},
    {OpKind::kAvgPool2d, "nn.avg_pool2d"},
    {OpKind::kBatchNorm, "nn.batch_norm"},
    {OpKind::kSoftmax, "nn.softmax"},
    {OpKind::kAdd, "add"},
    {OpKind::kSubtract, "subtract"},
    {OpKind::kMultiply, "multiply"},
    {OpKind::kDivide, "divide"},
    {OpKind::kRelu, "nn.relu"},
    {OpKind::kClip, "clip"},
    {OpKind::kSigmoid, "sigmoid"},
    {OpKind::kTanh, "tanh"},
    {OpKind::kGelu, "nn.gelu"},
    {OpKind::kGeluTanh, "nn.gelu_tanh"},
    {OpKind::kQuantize, "quantize"},
    {OpKind::kDequantize, "dequantize"},
    {OpKind::kQnnConv2d, "qnn.conv2d"},
    {OpKind::kQnnConv2dTranspose, "qnn.conv2d_transpose"},
    {OpKind::kQnnMatmul, "qnn.matmul"},
    {OpKind::kMaximum, "maximum"},
    {OpKind::kMinimum, "minimum"},
    {OpKind::kConcat, "concat"},
    {OpKind::kStridedSlice, "strided_slice"},
    {OpKind::kBroadcastTo, "broadcast_to"},
    {OpKind::kMean, "mean"},
    {OpKind::kLayerNorm, "nn.layer_norm"},
    {OpKind::kSqrt, "sqrt"},
    {OpKind::kRsqrt, "rsqrt"},
    {OpKind::kExp, "exp"},
    {OpKind::kLog, "log"},
    {OpKind::kErf, "erf"},
    {OpKind::kAbs, "abs"},
    {OpKind::kNegative, "negative"},
    {OpKind::kRound, "round"},
    {OpKind::kFloor, "floor"},
    {OpKind::kCeil, "ceil"},
    {OpKind::kPower, "power"},
    {OpKind::kQnnAdd, "qnn.add"},
    {OpKind::kQnnMultiply, "qnn.multiply"},
    {OpKind::kQnnMaxPool2d, "qnn.max_pool2d"},
    {OpKind::kQnnAvgPool2d, "qnn.avg_pool2d"},
    {OpKind::kQnnConcat, "qnn.concat"},
    {OpKind::kQnnRequantize, "qnn.requantize"},
    {OpKind::kQnnLut, "qnn.lut"},
    {OpKind::kQnnSoftmax, "qnn.softmax"},
    {OpKind::kResize2d, "image.resize2d"},
    {OpKind::kConv2dTranspose, "nn.conv2d_transpose"},
    {OpKind::kGroupNorm, "nn.group_norm"},
    {OpKind::kInstanceNorm, "nn.instance_norm"},
    {OpKind::kLeakyRelu, "nn.leakyrelu"},
    {OpKind::kPrelu, "nn.prelu"},
    {OpKind::kSum, "sum"},
    {OpKind::kMax, "max"},
    {OpKind::kMin, "min"},
    {OpKind::kVariance, "variance"},
    {OpKind::kArgmax, "argmax"},
    {OpKind::kTake, "take"},
    {OpKind::kCast, "astype"},
    {OpKind::kArgmin, "argmin"},
    {OpKind::kLogSoftmax, "nn.log_softmax"},
    {OpKind::kPad, "nn.pad"},
    {OpKind::kAdaptiveAvgPool2d, "nn.adaptive_avg_pool2d"},
    {OpKind::kTopk, "topk"},
    {OpKind::kGreater, "greater"},
    {OpKind::kGreaterEqual, "greater_equal"},
    {OpKind::kLess, "less"},
    {OpKind::kLessEqual, "less_equal"},
    {OpKind::kEqual, "equal"},
    {OpKind::kNotEqual, "not_equal"},
    {OpKind::kWhere, "where"},
};

}  // namespace

std::optional<DType> ParseDType(std::string_view name) {
  for (const auto& [dtype, dtype_name] : kDTypeNames) {
    if (name == dtype_name) return dtype;
  }
  return std::nullopt;
}

const char* DTypeName(DType dtype) {
  for (const auto& [candidate, name] : kDTypeNames) {
    if (candidate == dtype) return name;
  }
  return "unknown";
}

int64_t DTypeBytes(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kFloat16:
    case DType::kInt16:
      return 2;
    case DType::kInt8:
    case DType::kUInt8:
      return 1;
  }
  return 0;
}

bool IsQuantizedDType(DType dtype) {
  return dtype == DType::kInt8 || dtype == DType::kUInt8 || dtype == DType::kInt16;
}

std::pair<int64_t, int64_t> QuantizedRange(DType dtype) {
  switch (dtype) {
    case DType::kInt8:
      return {-128, 127};
    case DType::kUInt8:
      return {0, 255};
    case DType::kInt16:
      return {-32768, 32767};
    default:
      return {0, 0};
  }
}

std::optional<OpKind> ParseOpKind(std::string_view name) {
  for (const auto& [kind, op_name] : kOpNames) {
    if (name == op_name) return kind;
  }
  return std::nullopt;
}

bool IsQnnOp(OpKind kind) {
  switch (kind) {
    case OpKind::kQnnConv2d:
    case OpKind::kQnnConv2dTranspose:
    case OpKind::kQnnMatmul:
    case OpKind::kQnnAdd:
    case OpKind::kQnnMultiply:
    case OpKind::kQnnMaxPool2d:
    case OpKind::kQnnAvgPool2d:
    case OpKind::kQnnConcat:
    case OpKind::kQnnRequantize:
    case OpKind::kQnnLut:
    case OpKind::kQnnSoftmax:
      return true;
    default:
      return false;
  }
}

const char* OpKindName(OpKind kind) {
  for (const auto& [candidate, name] : kOpNames) {
    if (candidate == kind) return name;
  }
  return "unknown";
}

kernels::ReduceKind ReduceKindOf(OpKind kind) {
  switch (kind) {
    case OpKind::kSum:
      return kernels::ReduceKind::kSum;
    case OpKind::kMax:
      return kernels::ReduceKind::kMax;
    case OpKind::kMin:
      return kernels::ReduceKind::kMin;
    case OpKind::kVariance:
      return kernels::ReduceKind::kVariance;
    case OpKind::kArgmax:
      return kernels::ReduceKind::kArgmax;
    case OpKind::kArgmin:
      return kernels::ReduceKind::kArgmin;
    default:
      return kernels::ReduceKind::kMean;
  }
}

bool IsCastInput(DType dtype) {
  return IsQuantizedDType(dtype) || dtype == DType::kInt32 || dtype == DType::kInt64;
}

bool IsComparison(OpKind kind) {
  switch (kind) {
    case OpKind::kGreater:
    case OpKind::kGreaterEqual:
    case OpKind::kLess:
    case OpKind::kLessEqual:
    case OpKind::kEqual:
    case OpKind::kNotEqual:
      return true;
    default:
      return false;
  }
}

bool IsDataMovement(OpKind kind) {
  switch (kind) {
    case OpKind::kReshape:
    case OpKind::kPermuteDims:
    case OpKind::kConcat:
    case OpKind::kStridedSlice:
    case OpKind::kBroadcastTo:
    case OpKind::kTake:
      return true;
    default:
      return false;
  }
}

}  // namespace example_npu
