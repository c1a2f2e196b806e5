/*!
 * \file graph/qnn_attrs.cc
 * \brief Attributes of the integer qnn.* ops: scales and zero points read from the graph JSON
 * and turned into the fixed-point parameters of kernels/quantize.h and quantized_ops.h.
 */
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "graph/attr_parsers.h"

namespace example_npu {
namespace {

/*!
 * \brief "rounding": "tvm" (the default: TVM's float32 steps for the glue ops, one exact rounding
 * of the layers' sums) or "tflite" (TFLite's integer kernels, kernels/tflite_arithmetic.h; 8-bit
 * outputs only).
 */
kernels::Rounding ParseRounding(const JsonObject& attrs, DType dtype, const std::string& where) {
  if (!attrs.Has("rounding")) return kernels::Rounding::kTvm;
  const std::string value = attrs.String_("rounding");
  if (value == "tvm") return kernels::Rounding::kTvm;
  if (value != "tflite") {
    TVM_FFI_THROW(ValueError) << attrs.Field("rounding") << " must be \"tvm\" or \"tflite\", not \""
                              << value << "\"";
  }
  if (dtype != DType::kInt8 && dtype != DType::kUInt8) {
    TVM_FFI_THROW(ValueError) << where << ": TFLite rounding needs an int8 or uint8 result, not "
                              << DTypeName(dtype);
  }
  return kernels::Rounding::kTflite;
}

/*!
 * \brief output_scale / output_zero_point and the clamp range: the dtype's, narrowed by the real
 * bounds min_value / max_value of a fused relu or clip (quantize commutes with a clip). A bound
 * is quantized as the rounding's model does: TVM's float32 division rounded half to even.
 */
kernels::QuantizedOutput ParseQuantizedOutput(const JsonObject& attrs, DType dtype,
                                              const std::string& where, kernels::Rounding rounding,
                                              double* output_scale) {
  *output_scale = PositiveScale(attrs, "output_scale");
  kernels::QuantizedOutput out;
  out.zero_point = attrs.Int("output_zero_point");
  std::tie(out.min, out.max) = IntegerRange(dtype, where);
  if (out.zero_point < out.min || out.zero_point > out.max) {
    TVM_FFI_THROW(ValueError) << attrs.Field("output_zero_point") << " " << out.zero_point
                              << " is outside the " << DTypeName(dtype) << " range";
  }
  // A bound in output steps; beyond the dtype range it no longer matters, so clamp first.
  auto steps = [&](const char* key) {
    const double value = attrs.Number(key);
    if (std::isnan(value)) TVM_FFI_THROW(ValueError) << attrs.Field(key) << " is NaN";
    if (rounding == kernels::Rounding::kTvm) {
      // The bound as the float32 TVM's clip holds (past float32's range it clamps anyway).
      constexpr double kLargest = std::numeric_limits<float>::max();
      const float bound = static_cast<float>(std::clamp(value, -kLargest, kLargest));
      const float ratio = bound / static_cast<float>(*output_scale);
      return static_cast<int64_t>(std::nearbyint(std::clamp(ratio, -65536.0f, 65536.0f)));
    }
    return kernels::RoundHalfEven(std::clamp(value / *output_scale, -65536.0, 65536.0));
  };
  if (attrs.Has("min_value")) out.min = std::max(out.min, out.zero_point + steps("min_value"));
  if (attrs.Has("max_value")) out.max = std::min(out.max, out.zero_point + steps("max_value"));
  if (out.min > out.max) TVM_FFI_THROW(ValueError) << where << ": empty output clamp range";
  return out;
}

/*! \brief A real rescaling factor as a fixed-point multiplier, or a ValueError naming it. */
kernels::FixedPointMultiplier Multiplier(double real, const std::string& where) {
  if (!(real >= std::ldexp(1.0, -31) && real < std::ldexp(1.0, 30))) {
    TVM_FFI_THROW(ValueError) << where << ": requantization multiplier " << real
                              << " is outside [2^-31, 2^30)";
  }
  return kernels::QuantizeMultiplier(real);
}

QnnRequantizeAttrs ParseQnnRequantizeAttrs(const JsonObject& attrs, DType dtype,
                                           const std::string& where) {
  const kernels::Rounding rounding = ParseRounding(attrs, dtype, where);
  double output_scale = 1;
  const kernels::QuantizedOutput out =
      ParseQuantizedOutput(attrs, dtype, where, rounding, &output_scale);
  const double input_scale = PositiveScale(attrs, "input_scale");
  Multiplier(input_scale / output_scale, where);
  return QnnRequantizeAttrs{kernels::MakeRequantizeParams(
      input_scale, ZeroPoint(attrs, "input_zero_point"), output_scale, out, rounding)};
}

QnnBinaryAttrs ParseQnnBinaryAttrs(OpKind kind, const JsonObject& attrs, DType dtype,
                                   const std::string& where) {
  const kernels::Rounding rounding = ParseRounding(attrs, dtype, where);
  double output_scale = 1;
  const kernels::QuantizedOutput out =
      ParseQuantizedOutput(attrs, dtype, where, rounding, &output_scale);
  const double lhs = PositiveScale(attrs, "lhs_scale"), rhs = PositiveScale(attrs, "rhs_scale");
  const bool add = kind == OpKind::kQnnAdd;
  if (rounding == kernels::Rounding::kTflite) {
    const auto [a, b, o] = std::tuple{static_cast<float>(lhs), static_cast<float>(rhs),
                                      static_cast<float>(output_scale)};
    if (add) {
      const kernels::tflite::AddRealMultipliers real =
          kernels::tflite::MakeAddRealMultipliers(a, b, o);
      for (double factor : {real.lhs, real.rhs, real.output}) Multiplier(factor, where);
    } else {
      Multiplier(kernels::tflite::MulRealMultiplier(a, b, o), where);
    }
  } else if (add) {
    Multiplier(lhs / output_scale, where);
    Multiplier(rhs / output_scale, where);
  } else {
    Multiplier(lhs * rhs / output_scale, where);
  }
  return QnnBinaryAttrs{kernels::MakeQuantizedBinaryParams(
      add ? kernels::QuantizedBinaryKind::kAdd : kernels::QuantizedBinaryKind::kMultiply, lhs,
      ZeroPoint(attrs, "lhs_zero_point"), rhs, ZeroPoint(attrs, "rhs_zero_point"), output_scale,
      out, rounding)};
}

QnnPoolAttrs ParseQnnPoolAttrs(kernels::PoolKind kind, const JsonObject& attrs, DType dtype,
                               const std::string& where) {
  const kernels::Rounding rounding = ParseRounding(attrs, dtype, where);
  double output_scale = 1;
  const kernels::QuantizedOutput out =
      ParseQuantizedOutput(attrs, dtype, where, rounding, &output_scale);
  const kernels::Pool2dParams pool = ParsePoolAttrs(attrs, kind).params;
  // Average pooling keeps one multiplier per tap count, so the window bounds the table's size.
  constexpr int64_t kMaxWindowTaps = int64_t{1} << 20;
  if (pool.pool_size[0] < 1 || pool.pool_size[1] < 1 || pool.pool_size[0] > kMaxWindowTaps ||
      pool.pool_size[1] > kMaxWindowTaps ||
      pool.pool_size[0] * pool.pool_size[1] > kMaxWindowTaps) {
    TVM_FFI_THROW(ValueError) << where << ": a pooling window of " << pool.pool_size[0] << " x "
                              << pool.pool_size[1] << " taps (1 to " << kMaxWindowTaps
                              << " taps are supported)";
  }
  const double input_scale = PositiveScale(attrs, "input_scale");
  const int64_t input_zero_point = ZeroPoint(attrs, "input_zero_point");
  Multiplier(input_scale / output_scale, where);
  bool tflite_mean = false;
  if (rounding == kernels::Rounding::kTflite && kind == kernels::PoolKind::kAvg) {
    // Which TFLite kernel's arithmetic: AVERAGE_POOL_2D averages the raw values (so input and
    // output must share their quantization), MEAN rescales the sum.
    const std::string kernel =
        attrs.Has("tflite_kernel") ? attrs.String_("tflite_kernel") : "AVERAGE_POOL_2D";
    tflite_mean = kernel == "MEAN";
    if (!tflite_mean && kernel != "AVERAGE_POOL_2D") {
      TVM_FFI_THROW(ValueError) << attrs.Field("tflite_kernel")
                                << " must be \"AVERAGE_POOL_2D\" or \"MEAN\", not \"" << kernel
                                << "\"";
    }
    if (!tflite_mean && (static_cast<float>(input_scale) != static_cast<float>(output_scale) ||
                         input_zero_point != out.zero_point)) {
      TVM_FFI_THROW(ValueError) << where << ": TFLite's AVERAGE_POOL_2D needs the same input and "
                                << "output scale and zero point";
    }
    if (pool.count_include_pad) {
      TVM_FFI_THROW(ValueError) << where << ": TFLite averages the in-bounds taps only "
                                << "(count_include_pad must be false)";
    }
  } else if (kind == kernels::PoolKind::kAvg) {
    Multiplier(input_scale / (output_scale * pool.pool_size[0] * pool.pool_size[1]), where);
  }
  return QnnPoolAttrs{kernels::MakeQuantizedPoolParams(pool, input_scale, input_zero_point,
                                                       output_scale, out, rounding, tflite_mean)};
}

QnnConcatAttrs ParseQnnConcatAttrs(const JsonObject& attrs, DType dtype, const std::string& where) {
  const kernels::Rounding rounding = ParseRounding(attrs, dtype, where);
  double output_scale = 1;
  const kernels::QuantizedOutput out =
      ParseQuantizedOutput(attrs, dtype, where, rounding, &output_scale);
  const std::vector<double> scales = attrs.Numbers("input_scales");
  const std::vector<int64_t> zero_points = attrs.Ints("input_zero_points");
  for (int64_t zero_point : zero_points) {
    if (zero_point < -32768 || zero_point > 65535) {
      TVM_FFI_THROW(ValueError) << attrs.Field("input_zero_points") << ": " << zero_point
                                << " is not a zero point of int8, uint8 or int16";
    }
  }
  if (scales.size() != zero_points.size()) {
    TVM_FFI_THROW(ValueError) << where << ": " << scales.size() << " input scales but "
                              << zero_points.size() << " zero points";
  }
  QnnConcatAttrs result;
  result.axis = attrs.Int("axis");
  for (size_t i = 0; i < scales.size(); ++i) {
    if (!IsFloat32Scale(scales[i])) {
      TVM_FFI_THROW(ValueError) << attrs.Field("input_scales")
                                << " must be positive normal float32 scales";
    }
    Multiplier(scales[i] / output_scale, where);
    result.inputs.push_back(
        kernels::MakeRequantizeParams(scales[i], zero_points[i], output_scale, out, rounding));
  }
  return result;
}

/*!
 * \brief table is indexed as Relax's take(table, x, mode="wrap") indexes it: by x mod 256. Its
 * entries are values of the output dtype: integers of an 8- / 16-bit one, or finite float32
 * values (a float function of one 8-bit tensor, such as a model's tanh after its last dequantize).
 */
QnnLutAttrs ParseQnnLutAttrs(const JsonObject& attrs, DType dtype, const std::string& where) {
  const bool floats = dtype == DType::kFloat32;
  const std::vector<double> table = attrs.Numbers("table");
  const int64_t size = static_cast<int64_t>(table.size());
  if (size != 256) {
    TVM_FFI_THROW(ValueError) << attrs.Field("table") << " has " << size
                              << " entries (an 8-bit table has 256)";
  }
  auto [lo, hi] = floats ? std::pair<int64_t, int64_t>{0, 0} : IntegerRange(dtype, where);
  QnnLutAttrs result;
  result.table.index_offset = ZeroPoint(attrs, "index_offset");
  for (int64_t i = 0; i < size; ++i) {
    const double value = table[((result.table.index_offset + i) % size + size) % size];
    const bool valid = floats ? std::isfinite(value) && static_cast<float>(value) == value
                              : value == std::nearbyint(value) && value >= lo && value <= hi;
    if (!valid) {
      TVM_FFI_THROW(ValueError) << attrs.Field("table") << ": entry " << value << " is not a "
                                << (floats ? "finite float32" : DTypeName(dtype)) << " value";
    }
    result.table.values.push_back(static_cast<float>(value));
  }
  return result;
}

QnnSoftmaxAttrs ParseQnnSoftmaxAttrs(const JsonObject& attrs, DType dtype,
                                     const std::string& where) {
  const kernels::Rounding rounding = ParseRounding(attrs, dtype, where);
  double output_scale = 1;
  const kernels::QuantizedOutput out =
      ParseQuantizedOutput(attrs, dtype, where, rounding, &output_scale);
  Multiplier(1.0 / output_scale, where);
  const double input_scale = PositiveScale(attrs, "input_scale");
  if (rounding == kernels::Rounding::kTflite) {
    // TFLite's 8-bit softmax writes probabilities in steps of 1/256 from the dtype's minimum.
    const int64_t lowest = IntegerRange(dtype, where).first;
    if (out.zero_point != lowest || std::abs(output_scale - 1.0 / 256) > 0.001 / 256) {
      TVM_FFI_THROW(ValueError) << where << ": TFLite's softmax needs output scale 1/256 and "
                                << "zero point " << lowest;
    }
    if (!(input_scale * std::ldexp(1.0, 26) > 1.0)) {
      TVM_FFI_THROW(ValueError) << where << ": input scale " << input_scale
                                << " is below TFLite's softmax range (2^-26)";
    }
  }
  // The inputs are 8-bit (ValidateGraph checks), so the exponent table covers them.
  const int64_t input_zero_point = ZeroPoint(attrs, "input_zero_point");
  return QnnSoftmaxAttrs{attrs.Int("axis"),
                         kernels::MakeQuantizedSoftmaxParams(input_scale, input_zero_point,
                                                             output_scale, out, rounding)};
}

/*!
 * \brief The float32 operands TVM's build of the QDQ layer reads (kernels/near_ties.h): its scales
 * as float32 constants, and its bias as the float32 constant or onnxruntime's dequantized int32.
 */
kernels::Float32Operands Float32OperandsOf(const QnnAttrs& q, const JsonObject& attrs) {
  kernels::Float32Operands f;
  f.input_scale = static_cast<float>(q.input_scale);
  f.output_scale = static_cast<float>(q.output_scale);
  for (double scale : q.weight_scales) f.weight_scales.push_back(static_cast<float>(scale));
  if (attrs.Has("int32_bias")) {
    const std::vector<int64_t> values = attrs.Ints("int32_bias");
    const std::vector<double> scales = attrs.Numbers("int32_bias_scales");
    for (size_t c = 0; c < values.size(); ++c) {
      // dequantize with zero point 0: float32(b) * scale.
      f.bias.push_back(static_cast<float>(values[c]) *
                       static_cast<float>(scales[scales.size() > 1 ? c : 0]));
    }
  } else {
    for (double bias : q.bias) f.bias.push_back(static_cast<float>(bias));
  }
  return f;
}

/*!
 * \brief A qnn.matmul with a float32 result: the exact integer sum of (x - input_zero_point) *
 * (w - weight_zero_point) as float32, which is onnxruntime's MatMulInteger and the Cast after it
 * (an int32 matmul; ValidateGraph keeps its depth where the sum cannot leave int32). No scales,
 * bias or clamp: the requantization is the identity into the int32 range, and the store rounds
 * to float32 as TVM's cast does. The zero point is a number, or input_zero_point_node: an input
 * holding it (DynamicQuantizeLinear's, computed per call).
 */
QnnAttrs ParseIntegerSumAttrs(const JsonObject& attrs, const std::string& where) {
  for (const char* key : {"input_scale", "weight_scales", "output_scale", "output_zero_point",
                          "bias", "int32_bias", "min_value", "max_value", "rounding"}) {
    if (attrs.Has(key)) {
      TVM_FFI_THROW(ValueError) << where << ": a float32 qnn.matmul is an exact integer sum and "
                                << "takes no " << key;
    }
  }
  QnnAttrs q;
  q.input_scale = 1;
  q.output_scale = 1;
  q.weight_scales = {1.0};
  if (attrs.Has("input_zero_point_node")) {
    // Read from that input when the op runs (ValidateGraph checks the node): a zero point
    // computed per call needs no new program.
    if (attrs.Has("input_zero_point")) {
      TVM_FFI_THROW(ValueError) << where << ": input_zero_point and input_zero_point_node given";
    }
    q.input_zero_point_node = attrs.Int("input_zero_point_node");
    if (q.input_zero_point_node < 0) {
      TVM_FFI_THROW(ValueError) << attrs.Field("input_zero_point_node") << " "
                                << q.input_zero_point_node << " is not a node id";
    }
  } else {
    q.input_zero_point = ZeroPoint(attrs, "input_zero_point");
  }
  if (attrs.Has("weight_zero_point")) q.weight_zero_point = ZeroPoint(attrs, "weight_zero_point");
  if (q.weight_zero_point < -128 || q.weight_zero_point > 127) {
    TVM_FFI_THROW(ValueError) << attrs.Field("weight_zero_point") << " " << q.weight_zero_point
                              << " is not an int8 zero point";
  }
  kernels::Requantization& r = q.requant;
  r.rounding = kernels::Rounding::kTvm;
  r.multipliers = {kernels::QuantizeMultiplier(1.0)};
  r.output_zero_point = 0;
  r.min = std::numeric_limits<int32_t>::min();
  r.max = std::numeric_limits<int32_t>::max();
  return q;
}

QnnAttrs ParseQnnAttrs(OpKind kind, const JsonObject& attrs, DType dtype,
                       const std::string& where) {
  if (kind == OpKind::kQnnMatmul && dtype == DType::kFloat32) {
    return ParseIntegerSumAttrs(attrs, where);
  }
  QnnAttrs q;
  if (kind == OpKind::kQnnConv2d) q.conv = ParseConv2dAttrs(attrs).params;
  if (kind == OpKind::kQnnConv2dTranspose) q.transposed = ParseConvTransposeAttrs(attrs);
  q.input_scale = PositiveScale(attrs, "input_scale");
  q.input_zero_point = ZeroPoint(attrs, "input_zero_point");
  q.weight_scales = attrs.Numbers("weight_scales");
  q.output_scale = PositiveScale(attrs, "output_scale");
  if (attrs.Has("bias")) q.bias = attrs.Numbers("bias");
  const bool weight_zero_point = attrs.Has("weight_zero_point");
  if (weight_zero_point) {
    if (kind != OpKind::kQnnMatmul) {
      TVM_FFI_THROW(ValueError) << where << ": weight_zero_point is qnn.matmul's only";
    }
    q.weight_zero_point = ZeroPoint(attrs, "weight_zero_point");
    if (q.weight_zero_point < -128 || q.weight_zero_point > 127) {
      TVM_FFI_THROW(ValueError) << attrs.Field("weight_zero_point") << " " << q.weight_zero_point
                                << " is not an int8 zero point";
    }
  }
  if (q.weight_scales.empty())
    TVM_FFI_THROW(ValueError) << attrs.Field("weight_scales") << " is empty";
  kernels::Requantization& r = q.requant;
  r.rounding = ParseRounding(attrs, dtype, where);
  // A quantized matmul with constant weights is TFLite's FULLY_CONNECTED, which rounds once.
  r.single_rounding =
      r.rounding == kernels::Rounding::kTflite && kind == OpKind::kQnnMatmul && !weight_zero_point;
  double output_scale = 1;
  const kernels::QuantizedOutput out =
      ParseQuantizedOutput(attrs, dtype, where, r.rounding, &output_scale);
  r.output_zero_point = out.zero_point;
  r.min = out.min;
  r.max = out.max;
  for (double weight_scale : q.weight_scales) {
    if (!(weight_scale > 0) || !std::isfinite(weight_scale)) {
      TVM_FFI_THROW(ValueError) << where << ": weight scales must be positive and finite";
    }
    // The fixed-point multiplier m0 * 2^-shift needs shift in [1, 62] (as the pattern check).
    r.multipliers.push_back(Multiplier(q.input_scale * weight_scale / q.output_scale, where));
  }
  // Per-channel scales and biases agree in length (ValidateGraph matches them to the channels).
  auto check_channels = [&](size_t biases) {
    if (q.weight_scales.size() > 1 && biases != q.weight_scales.size()) {
      TVM_FFI_THROW(ValueError) << where << ": " << biases << " biases for "
                                << q.weight_scales.size() << " weight scales";
    }
  };
  check_channels(q.bias.size() ? q.bias.size() : q.weight_scales.size());
  auto int32_bias = [&](double value, size_t c) {
    // The quantized bias is an int32, as in onnxruntime's QDQ models.
    return BoundedRound(value, 0x1p31, where + ": quantized bias[" + std::to_string(c) + "]");
  };
  for (size_t c = 0; c < q.bias.size(); ++c) {
    const double weight_scale = q.weight_scales[q.weight_scales.size() > 1 ? c : 0];
    r.bias.push_back(int32_bias(q.bias[c] / (q.input_scale * weight_scale), c));
  }
  if (attrs.Has("int32_bias")) {
    // onnxruntime's int32 bias, dequantized with int32_bias_scales: stored in accumulator units
    // when its scale is the float32 product input scale x weight scale, else rescaled once.
    if (!q.bias.empty()) TVM_FFI_THROW(ValueError) << where << ": both bias and int32_bias given";
    const std::vector<int64_t> values = attrs.Ints("int32_bias");
    const std::vector<double> scales = attrs.Numbers("int32_bias_scales");
    check_channels(values.size());
    if (scales.size() != 1 && scales.size() != values.size()) {
      TVM_FFI_THROW(ValueError) << where << ": " << scales.size() << " bias scales for "
                                << values.size() << " biases";
    }
    for (size_t c = 0; c < values.size(); ++c) {
      const double weight_scale = q.weight_scales[q.weight_scales.size() > 1 ? c : 0];
      const double bias_scale = scales[scales.size() > 1 ? c : 0];
      const float accumulator_scale =
          static_cast<float>(q.input_scale) * static_cast<float>(weight_scale);
      if (!(bias_scale > 0) || !std::isfinite(bias_scale)) {
        TVM_FFI_THROW(ValueError) << where << ": int32 bias scales must be positive and finite";
      }
      // TFLite adds its int32 bias to the accumulator as it is, whatever its recorded scale.
      const bool as_is = static_cast<float>(bias_scale) == accumulator_scale ||
                         r.rounding == kernels::Rounding::kTflite;
      r.bias.push_back(int32_bias(
          as_is ? static_cast<double>(values[c])
                : bias_scale * static_cast<double>(values[c]) / (q.input_scale * weight_scale),
          c));
    }
    q.bias.assign(r.bias.begin(), r.bias.end());
  }
  // Convolutions keep the exact rounding there: recomputing a deep convolution's near ties (K of
  // 2,304 to 4,608 products each, the weights strided) doubled an int8 ResNet-18's emulation.
  if (r.rounding == kernels::Rounding::kTvm && kind == OpKind::kQnnMatmul) {
    r.float32 = Float32OperandsOf(q, attrs);
  }
  return q;
}

}  // namespace

OpAttrs ParseQnnOpAttrs(OpKind kind, const JsonObject& attrs, DType dtype,
                        const std::string& where) {
  switch (kind) {
    case OpKind::kQnnConv2d:
    case OpKind::kQnnConv2dTranspose:
    case OpKind::kQnnMatmul:
      return ParseQnnAttrs(kind, attrs, dtype, where);
    case OpKind::kQnnRequantize:
      return ParseQnnRequantizeAttrs(attrs, dtype, where);
    case OpKind::kQnnAdd:
    case OpKind::kQnnMultiply:
      return ParseQnnBinaryAttrs(kind, attrs, dtype, where);
    case OpKind::kQnnMaxPool2d:
      return ParseQnnPoolAttrs(kernels::PoolKind::kMax, attrs, dtype, where);
    case OpKind::kQnnAvgPool2d:
      return ParseQnnPoolAttrs(kernels::PoolKind::kAvg, attrs, dtype, where);
    case OpKind::kQnnConcat:
      return ParseQnnConcatAttrs(attrs, dtype, where);
    case OpKind::kQnnLut:
      return ParseQnnLutAttrs(attrs, dtype, where);
    case OpKind::kQnnSoftmax:
      return ParseQnnSoftmaxAttrs(attrs, dtype, where);
    default:
      TVM_FFI_THROW(InternalError) << OpKindName(kind) << " is not a qnn op";
  }
  TVM_FFI_UNREACHABLE();
}

}  // namespace example_npu
