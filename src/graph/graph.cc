/*!
 * \file graph/graph.cc
 * \brief Graph JSON -> typed Graph. Every malformed input becomes a ValueError naming the node.
 */
#include "graph/graph.h"

#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/json.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "graph/runtime_params.h"

namespace example_npu {
namespace {

namespace json = tvm::ffi::json;
using tvm::ffi::Any;
using tvm::ffi::String;

/*! \brief Read access to one JSON object that names its owner in every error. */
class JsonObject {
 public:
  JsonObject(const Any& value, std::string where) : where_(std::move(where)) {
    auto obj = value.try_cast<json::Object>();
    if (!obj.has_value()) TVM_FFI_THROW(ValueError) << where_ << " must be a JSON object";
    obj_ = *obj;
  }

  bool Has(const char* key) const { return obj_.Get(String(key)).has_value(); }

  Any Get(const char* key) const {
    auto value = obj_.Get(String(key));
    if (!value.has_value()) TVM_FFI_THROW(ValueError) << where_ << " has no \"" << key << "\"";
    return *value;
  }

  std::string String_(const char* key) const {
    auto value = Get(key).try_cast<String>();
    if (!value.has_value()) TVM_FFI_THROW(ValueError) << Field(key) << " must be a string";
    return std::string(*value);
  }

  int64_t Int(const char* key) const { return AsInt(Get(key), Field(key)); }

  double Number(const char* key) const {
    Any value = Get(key);
    if (auto as_double = value.try_cast<double>()) return *as_double;
    return static_cast<double>(AsInt(value, Field(key)));
  }

  bool Bool(const char* key) const {
    auto value = Get(key).try_cast<bool>();
    if (!value.has_value()) TVM_FFI_THROW(ValueError) << Field(key) << " must be a boolean";
    return *value;
  }

  std::vector<int64_t> Ints(const char* key) const { return AsInts(Get(key), Field(key)); }

  std::vector<double> Numbers(const char* key) const {
    Any value = Get(key);
    // A runtime parameter bound from a one-element tensor arrives as a bare number.
    if (auto one = value.try_cast<double>()) return {*one};
    if (value.type_index() == tvm::ffi::TypeIndex::kTVMFFIInt) return {Number(key)};
    auto array = value.try_cast<json::Array>();
    if (!array.has_value()) TVM_FFI_THROW(ValueError) << Field(key) << " must be a list of numbers";
    std::vector<double> result;
    for (size_t i = 0; i < array->size(); ++i) {
      Any item = (*array)[i];
      if (auto as_double = item.try_cast<double>()) {
        result.push_back(*as_double);
      } else {
        result.push_back(static_cast<double>(AsInt(item, Field(key))));
      }
    }
    return result;
  }

  std::string Field(const char* key) const { return where_ + "." + key; }

  static int64_t AsInt(const Any& value, const std::string& what) {
    if (value.type_index() == tvm::ffi::TypeIndex::kTVMFFIInt) return value.cast<int64_t>();
    TVM_FFI_THROW(ValueError) << what << " must be an integer";
    TVM_FFI_UNREACHABLE();
  }

  static std::vector<int64_t> AsInts(const Any& value, const std::string& what) {
    if (value.type_index() == tvm::ffi::TypeIndex::kTVMFFIInt) return {value.cast<int64_t>()};
    auto array = value.try_cast<json::Array>();
    if (!array.has_value()) TVM_FFI_THROW(ValueError) << what << " must be a list of integers";
    std::vector<int64_t> result;
    for (size_t i = 0; i < array->size(); ++i) {
      result.push_back(AsInt((*array)[i], what + "[" + std::to_string(i) + "]"));
    }
    return result;
  }

 private:
  json::Object obj_;
  std::string where_;
};

template <size_t N>
std::array<int64_t, N> FixedInts(const JsonObject& attrs, const char* key) {
  std::vector<int64_t> values = attrs.Ints(key);
  if (values.size() != N) {
    TVM_FFI_THROW(ValueError) << attrs.Field(key) << " must have " << N << " values, got "
                              << values.size();
  }
  std::array<int64_t, N> result{};
  std::copy(values.begin(), values.end(), result.begin());
  return result;
}

kernels::DataLayout ParseDataLayout(const std::string& layout, const std::string& what) {
  if (layout == "NCHW" || layout == "NCW") return kernels::DataLayout::kNCHW;
  if (layout == "NHWC" || layout == "NWC") return kernels::DataLayout::kNHWC;
  TVM_FFI_THROW(ValueError) << what << ": layout " << layout << " is not supported (NCHW/NHWC)";
  TVM_FFI_UNREACHABLE();
}

kernels::KernelLayout ParseKernelLayout(const std::string& layout, const std::string& what) {
  if (layout == "OIHW" || layout == "OIW") return kernels::KernelLayout::kOIHW;
  if (layout == "HWIO" || layout == "WIO") return kernels::KernelLayout::kHWIO;
  TVM_FFI_THROW(ValueError) << what << ": kernel layout " << layout
                            << " is not supported (OIHW/HWIO)";
  TVM_FFI_UNREACHABLE();
}

void CheckSameOutLayout(const JsonObject& attrs, const char* in_key) {
  if (attrs.Has("out_layout") && attrs.String_("out_layout") != attrs.String_(in_key)) {
    TVM_FFI_THROW(ValueError) << attrs.Field("out_layout") << " must equal " << in_key;
  }
}

ConvAttrs ParseConv2dAttrs(const JsonObject& attrs) {
  ConvAttrs result;
  kernels::Conv2dParams& p = result.params;
  p.strides = FixedInts<2>(attrs, "strides");
  p.padding = FixedInts<4>(attrs, "padding");
  p.dilation = FixedInts<2>(attrs, "dilation");
  p.groups = attrs.Int("groups");
  p.data_layout = ParseDataLayout(attrs.String_("data_layout"), attrs.Field("data_layout"));
  p.kernel_layout = ParseKernelLayout(attrs.String_("kernel_layout"), attrs.Field("kernel_layout"));
  CheckSameOutLayout(attrs, "data_layout");
  return result;
}

ConvAttrs ParseConv1dAttrs(const JsonObject& attrs) {
  ConvAttrs result;
  kernels::Conv2dParams& p = result.params;
  auto strides = FixedInts<1>(attrs, "strides");
  auto padding = FixedInts<2>(attrs, "padding");
  auto dilation = FixedInts<1>(attrs, "dilation");
  p.strides = {1, strides[0]};
  p.padding = {0, padding[0], 0, padding[1]};
  p.dilation = {1, dilation[0]};
  p.groups = attrs.Int("groups");
  p.data_layout = ParseDataLayout(attrs.String_("data_layout"), attrs.Field("data_layout"));
  p.kernel_layout = ParseKernelLayout(attrs.String_("kernel_layout"), attrs.Field("kernel_layout"));
  CheckSameOutLayout(attrs, "data_layout");
  return result;
}

PoolAttrs ParsePoolAttrs(const JsonObject& attrs, kernels::PoolKind kind) {
  PoolAttrs result;
  kernels::Pool2dParams& p = result.params;
  p.kind = kind;
  p.pool_size = FixedInts<2>(attrs, "pool_size");
  p.strides = FixedInts<2>(attrs, "strides");
  p.dilation = FixedInts<2>(attrs, "dilation");
  p.padding = FixedInts<4>(attrs, "padding");
  p.ceil_mode = attrs.Bool("ceil_mode");
  p.count_include_pad = attrs.Bool("count_include_pad");
  p.layout = ParseDataLayout(attrs.String_("layout"), attrs.Field("layout"));
  CheckSameOutLayout(attrs, "layout");
  return result;
}

BatchNormAttrs ParseBatchNormAttrs(const JsonObject& attrs) {
  if (attrs.Has("training") && attrs.Bool("training")) {
    TVM_FFI_THROW(ValueError) << attrs.Field("training")
                              << " is true: only inference batch_norm runs on the NPU";
  }
  BatchNormAttrs result;
  result.axis = attrs.Int("axis");
  result.epsilon = static_cast<float>(attrs.Number("epsilon"));
  result.center = attrs.Bool("center");
  result.scale = attrs.Bool("scale");
  return result;
}

std::pair<int64_t, int64_t> IntegerRange(DType dtype, const std::string& where) {
  if (!IsQuantizedDType(dtype)) {
    TVM_FFI_THROW(ValueError) << where << ": quantized results must be int8, uint8 or int16";
  }
  return QuantizedRange(dtype);
}

double PositiveScale(const JsonObject& attrs, const char* key) {
  const double scale = attrs.Number(key);
  if (!(scale > 0) || !std::isfinite(scale)) {
    TVM_FFI_THROW(ValueError) << attrs.Field(key) << " must be a positive finite scale";
  }
  return scale;
}

/*!
 * \brief output_scale / output_zero_point and the clamp range: the dtype's, narrowed by the real
 * bounds min_value / max_value of a fused relu or clip (quantize commutes with a clip).
 */
kernels::QuantizedOutput ParseQuantizedOutput(const JsonObject& attrs, DType dtype,
                                              const std::string& where, double* output_scale) {
  *output_scale = PositiveScale(attrs, "output_scale");
  kernels::QuantizedOutput out;
  out.zero_point = attrs.Int("output_zero_point");
  std::tie(out.min, out.max) = IntegerRange(dtype, where);
  if (attrs.Has("min_value")) {
    out.min = std::max(out.min, out.zero_point + kernels::RoundHalfEven(attrs.Number("min_value") /
                                                                        *output_scale));
  }
  if (attrs.Has("max_value")) {
    out.max = std::min(out.max, out.zero_point + kernels::RoundHalfEven(attrs.Number("max_value") /
                                                                        *output_scale));
  }
  if (out.min > out.max) TVM_FFI_THROW(ValueError) << where << ": empty output clamp range";
  return out;
}

/*! \brief A real rescaling factor as a fixed-point multiplier, or a ValueError naming it. */
kernels::FixedPointMultiplier Multiplier(double real, const std::string& where) {
  if (!(real >= std::ldexp(1.0, -31) && real < std::ldexp(1.0, 30))) {
    TVM_FFI_THROW(ValueError) << where << ": rescaling factor " << real
                              << " is outside [2^-31, 2^30)";
  }
  return kernels::QuantizeMultiplier(real);
}

QnnRequantizeAttrs ParseQnnRequantizeAttrs(const JsonObject& attrs, DType dtype,
                                           const std::string& where) {
  double output_scale = 1;
  const kernels::QuantizedOutput out = ParseQuantizedOutput(attrs, dtype, where, &output_scale);
  const double input_scale = PositiveScale(attrs, "input_scale");
  Multiplier(input_scale / output_scale, where);
  return QnnRequantizeAttrs{
      kernels::MakeRequantizeParams(input_scale, attrs.Int("input_zero_point"), output_scale, out)};
}

QnnBinaryAttrs ParseQnnBinaryAttrs(OpKind kind, const JsonObject& attrs, DType dtype,
                                   const std::string& where) {
  double output_scale = 1;
  const kernels::QuantizedOutput out = ParseQuantizedOutput(attrs, dtype, where, &output_scale);
  const double lhs = PositiveScale(attrs, "lhs_scale"), rhs = PositiveScale(attrs, "rhs_scale");
  const bool add = kind == OpKind::kQnnAdd;
  if (add) {
    Multiplier(lhs / output_scale, where);
    Multiplier(rhs / output_scale, where);
  } else {
    Multiplier(lhs * rhs / output_scale, where);
  }
  return QnnBinaryAttrs{kernels::MakeQuantizedBinaryParams(
      add ? kernels::QuantizedBinaryKind::kAdd : kernels::QuantizedBinaryKind::kMultiply, lhs,
      attrs.Int("lhs_zero_point"), rhs, attrs.Int("rhs_zero_point"), output_scale, out)};
}

QnnPoolAttrs ParseQnnPoolAttrs(kernels::PoolKind kind, const JsonObject& attrs, DType dtype,
                               const std::string& where) {
  double output_scale = 1;
  const kernels::QuantizedOutput out = ParseQuantizedOutput(attrs, dtype, where, &output_scale);
  const kernels::Pool2dParams pool = ParsePoolAttrs(attrs, kind).params;
  const double input_scale = PositiveScale(attrs, "input_scale");
  Multiplier(input_scale / output_scale, where);
  Multiplier(input_scale / (output_scale * pool.pool_size[0] * pool.pool_size[1]), where);
  return QnnPoolAttrs{kernels::MakeQuantizedPoolParams(
      pool, input_scale, attrs.Int("input_zero_point"), output_scale, out)};
}

QnnConcatAttrs ParseQnnConcatAttrs(const JsonObject& attrs, DType dtype, const std::string& where) {
  double output_scale = 1;
  const kernels::QuantizedOutput out = ParseQuantizedOutput(attrs, dtype, where, &output_scale);
  const std::vector<double> scales = attrs.Numbers("input_scales");
  const std::vector<int64_t> zero_points = attrs.Ints("input_zero_points");
  if (scales.size() != zero_points.size()) {
    TVM_FFI_THROW(ValueError) << where << ": " << scales.size() << " input scales but "
                              << zero_points.size() << " zero points";
  }
  QnnConcatAttrs result;
  result.axis = attrs.Int("axis");
  for (size_t i = 0; i < scales.size(); ++i) {
    if (!(scales[i] > 0) || !std::isfinite(scales[i])) {
      TVM_FFI_THROW(ValueError) << attrs.Field("input_scales") << " must be positive and finite";
    }
    Multiplier(scales[i] / output_scale, where);
    result.inputs.push_back(
        kernels::MakeRequantizeParams(scales[i], zero_points[i], output_scale, out));
  }
  return result;
}

/*! \brief table is indexed as Relax's take(table, x, mode="wrap") indexes it: by x mod 256. */
QnnLutAttrs ParseQnnLutAttrs(const JsonObject& attrs, DType dtype, const std::string& where) {
  auto [lo, hi] = IntegerRange(dtype, where);
  QnnLutAttrs result;
  result.table.index_offset = attrs.Int("index_offset");
  const std::vector<int64_t> table = attrs.Ints("table");
  const int64_t size = static_cast<int64_t>(table.size());
  for (int64_t i = 0; i < size; ++i) {
    const int64_t value = table[((result.table.index_offset + i) % size + size) % size];
    if (value < lo || value > hi) {
      TVM_FFI_THROW(ValueError) << attrs.Field("table") << ": entry " << value << " is not a "
                                << DTypeName(dtype) << " value";
    }
    result.table.values.push_back(static_cast<float>(value));
  }
  return result;
}

QnnSoftmaxAttrs ParseQnnSoftmaxAttrs(const JsonObject& attrs, DType dtype,
                                     const std::string& where) {
  double output_scale = 1;
  const kernels::QuantizedOutput out = ParseQuantizedOutput(attrs, dtype, where, &output_scale);
  Multiplier(1.0 / output_scale, where);
  // The inputs are 8-bit (ValidateGraph checks): differences to the row maximum span 0..255.
  return QnnSoftmaxAttrs{attrs.Int("axis"),
                         kernels::MakeQuantizedSoftmaxParams(PositiveScale(attrs, "input_scale"),
                                                             255, output_scale, out)};
}

QnnAttrs ParseQnnAttrs(OpKind kind, const JsonObject& attrs, DType dtype,
                       const std::string& where) {
  QnnAttrs q;
  if (kind == OpKind::kQnnConv2d) q.conv = ParseConv2dAttrs(attrs).params;
  q.input_scale = PositiveScale(attrs, "input_scale");
  q.input_zero_point = attrs.Int("input_zero_point");
  q.weight_scales = attrs.Numbers("weight_scales");
  q.output_scale = PositiveScale(attrs, "output_scale");
  if (attrs.Has("bias")) q.bias = attrs.Numbers("bias");
  if (q.weight_scales.empty())
    TVM_FFI_THROW(ValueError) << attrs.Field("weight_scales") << " is empty";
  kernels::Requantization& r = q.requant;
  double output_scale = 1;
  const kernels::QuantizedOutput out = ParseQuantizedOutput(attrs, dtype, where, &output_scale);
  r.output_zero_point = out.zero_point;
  r.min = out.min;
  r.max = out.max;
  for (double weight_scale : q.weight_scales) {
    if (!(weight_scale > 0)) TVM_FFI_THROW(ValueError) << where << ": weight scales must be > 0";
    r.multipliers.push_back(
        kernels::QuantizeMultiplier(q.input_scale * weight_scale / q.output_scale));
  }
  for (size_t c = 0; c < q.bias.size(); ++c) {
    const double weight_scale = q.weight_scales[q.weight_scales.size() > 1 ? c : 0];
    r.bias.push_back(kernels::RoundHalfEven(q.bias[c] / (q.input_scale * weight_scale)));
  }
  if (attrs.Has("int32_bias")) {
    // onnxruntime's int32 bias, dequantized with int32_bias_scales: stored in accumulator units
    // when its scale is the float32 product input scale x weight scale, else rescaled once.
    if (!q.bias.empty()) TVM_FFI_THROW(ValueError) << where << ": both bias and int32_bias given";
    const std::vector<int64_t> values = attrs.Ints("int32_bias");
    const std::vector<double> scales = attrs.Numbers("int32_bias_scales");
    if (scales.size() != 1 && scales.size() != values.size()) {
      TVM_FFI_THROW(ValueError) << where << ": " << scales.size() << " bias scales for "
                                << values.size() << " biases";
    }
    for (size_t c = 0; c < values.size(); ++c) {
      const double weight_scale = q.weight_scales[q.weight_scales.size() > 1 ? c : 0];
      const double bias_scale = scales[scales.size() > 1 ? c : 0];
      const float accumulator_scale =
          static_cast<float>(q.input_scale) * static_cast<float>(weight_scale);
      r.bias.push_back(static_cast<float>(bias_scale) == accumulator_scale
                           ? values[c]
                           : kernels::RoundHalfEven(bias_scale * static_cast<double>(values[c]) /
                                                    (q.input_scale * weight_scale)));
    }
    q.bias.assign(r.bias.begin(), r.bias.end());
  }
  return q;
}

OpAttrs ParseAttrs(OpKind kind, const JsonObject& node, DType dtype, const std::string& where) {
  bool has_attrs = node.Has("attrs");
  JsonObject attrs = has_attrs ? JsonObject(node.Get("attrs"), where + ".attrs")
                               : JsonObject(json::Object(), where + ".attrs");
  switch (kind) {
    case OpKind::kConv1d:
      return ParseConv1dAttrs(attrs);
    case OpKind::kConv2d:
      return ParseConv2dAttrs(attrs);
    case OpKind::kMaxPool2d:
      return ParsePoolAttrs(attrs, kernels::PoolKind::kMax);
    case OpKind::kAvgPool2d:
      return ParsePoolAttrs(attrs, kernels::PoolKind::kAvg);
    case OpKind::kBatchNorm:
      return ParseBatchNormAttrs(attrs);
    case OpKind::kSoftmax:
      return SoftmaxAttrs{attrs.Int("axis"),
                          attrs.Has("zero_masked_rows") && attrs.Bool("zero_masked_rows")};
    case OpKind::kConcat:
      return ConcatAttrs{attrs.Int("axis")};
    case OpKind::kStridedSlice:
      return SliceAttrs{attrs.Ints("begin"), attrs.Ints("step")};
    case OpKind::kMean:
      return ReduceAttrs{attrs.Ints("axes"), attrs.Bool("keepdims")};
    case OpKind::kLayerNorm: {
      LayerNormAttrs result;
      result.axes = attrs.Ints("axes");
      result.epsilon = static_cast<float>(attrs.Number("epsilon"));
      result.center = attrs.Bool("center");
      result.scale = attrs.Bool("scale");
      return result;
    }
    case OpKind::kClip:
      return ClipAttrs{static_cast<float>(attrs.Number("min")),
                       static_cast<float>(attrs.Number("max"))};
    case OpKind::kQuantize:
    case OpKind::kDequantize: {
      QuantAttrs q{static_cast<float>(PositiveScale(attrs, "scale")), attrs.Int("zero_point")};
      if (kind == OpKind::kQuantize) std::tie(q.min, q.max) = IntegerRange(dtype, where);
      return q;
    }
    case OpKind::kQnnConv2d:
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
    case OpKind::kPermuteDims: {
      PermuteDimsAttrs result;
      Any axes = attrs.Has("axes") ? attrs.Get("axes") : Any(nullptr);
      if (axes != nullptr) result.axes = JsonObject::AsInts(axes, attrs.Field("axes"));
      return result;
    }
    default:
      return NoAttrs{};
  }
}

Node ParseNode(const Any& value, size_t index) {
  std::string where = "nodes[" + std::to_string(index) + "]";
  JsonObject obj(value, where);
  Node node;
  node.name = obj.String_("name");
  where += " (" + node.name + ")";
  std::string op = obj.String_("op");
  std::string dtype = obj.String_("dtype");
  auto parsed_dtype = ParseDType(dtype);
  if (!parsed_dtype.has_value()) {
    TVM_FFI_THROW(ValueError) << where << ": dtype " << dtype << " is not an NPU dtype";
  }
  node.dtype = *parsed_dtype;
  node.shape = obj.Ints("shape");
  for (int64_t dim : node.shape) {
    if (dim < 0) TVM_FFI_THROW(ValueError) << where << ": negative dimension in shape";
  }
  if (op == "input") {
    node.kind = NodeKind::kInput;
  } else if (op == "const") {
    node.kind = NodeKind::kConst;
  } else {
    auto kind = ParseOpKind(op);
    if (!kind.has_value()) {
      TVM_FFI_THROW(ValueError) << where << ": op \"" << op << "\" is not an NPU operator";
    }
    node.kind = NodeKind::kOp;
    node.op = *kind;
    node.inputs = obj.Ints("inputs");
    node.attrs = ParseAttrs(*kind, obj, node.dtype, where);
    if (obj.Has("composite")) node.composite = obj.String_("composite");
  }
  return node;
}

}  // namespace

std::vector<std::string> Graph::ConstNames() const {
  std::vector<std::string> names;
  for (int64_t id : ConstNodes()) names.push_back(nodes[id].name);
  return names;
}

std::vector<int64_t> Graph::ConstNodes() const {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].kind == NodeKind::kConst) ids.push_back(static_cast<int64_t>(i));
  }
  return ids;
}

Graph ParseGraph(const std::string& json_text) {
  const std::vector<int64_t> params = RuntimeParamInputs(json_text);
  if (!params.empty()) {
    Graph graph = ParseGraph(BindPlaceholderParams(json_text));
    graph.runtime_param_inputs = params;
    graph.unbound_json = json_text;
    return graph;
  }
  String error;
  json::Value value = json::Parse(json_text, &error);
  if (!error.empty()) TVM_FFI_THROW(ValueError) << "NPU graph is not valid JSON: " << error;
  JsonObject root(value, "NPU graph");
  if (root.Int("version") != 1) {
    TVM_FFI_THROW(ValueError) << "NPU graph version " << root.Int("version")
                              << " is not supported (expected 1)";
  }
  Graph graph;
  graph.symbol = root.String_("symbol");
  if (root.Has("npu_config"))
    graph.npu_config_json = std::string(json::Stringify(root.Get("npu_config")));
  auto nodes = root.Get("nodes").try_cast<json::Array>();
  if (!nodes.has_value()) TVM_FFI_THROW(ValueError) << "NPU graph.nodes must be a list";
  for (size_t i = 0; i < nodes->size(); ++i) graph.nodes.push_back(ParseNode((*nodes)[i], i));
  graph.arg_nodes = root.Ints("arg_nodes");
  graph.heads = root.Ints("heads");
  NormalizeAxes(&graph);
  ValidateGraph(graph);
  return graph;
}

}  // namespace example_npu
