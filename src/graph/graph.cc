/*!
 * \file graph/graph.cc
 * \brief Graph JSON -> typed Graph. Every malformed input becomes a ValueError naming the node.
 */
#include "graph/graph.h"

#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/json.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "support/checked_math.h"
#include "support/json_input.h"

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
    // A \u escape can decode to a lone surrogate; such a name could not reach Python.
    if (!IsValidUtf8(std::string_view(value->data(), value->size()))) {
      TVM_FFI_THROW(ValueError) << Field(key) << " is not valid UTF-8";
    }
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
    auto array = Get(key).try_cast<json::Array>();
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

/*! \brief A number the kernels use as a float32: +-inf or inside the float32 range, not NaN. */
float Float32(const JsonObject& attrs, const char* key) {
  const double value = attrs.Number(key);
  if (!std::isinf(value) && !(std::abs(value) <= std::numeric_limits<float>::max())) {
    TVM_FFI_THROW(ValueError) << attrs.Field(key) << " = " << value << " is not a float32 value";
  }
  return static_cast<float>(value);
}

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
  TVM_FFI_THROW(ValueError) << what << ": layout " << Printable(layout)
                            << " is not supported (NCHW/NHWC)";
  TVM_FFI_UNREACHABLE();
}

kernels::KernelLayout ParseKernelLayout(const std::string& layout, const std::string& what) {
  if (layout == "OIHW" || layout == "OIW") return kernels::KernelLayout::kOIHW;
  if (layout == "HWIO" || layout == "WIO") return kernels::KernelLayout::kHWIO;
  TVM_FFI_THROW(ValueError) << what << ": kernel layout " << Printable(layout)
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
  result.epsilon = Float32(attrs, "epsilon");
  result.center = attrs.Bool("center");
  result.scale = attrs.Bool("scale");
  return result;
}

std::pair<int64_t, int64_t> IntegerRange(DType dtype, const std::string& where) {
  if (dtype == DType::kInt8) return {-128, 127};
  if (dtype == DType::kInt16) return {-32768, 32767};
  TVM_FFI_THROW(ValueError) << where << ": quantized results must be int8 or int16";
  TVM_FFI_UNREACHABLE();
}

double PositiveScale(const JsonObject& attrs, const char* key) {
  const double scale = attrs.Number(key);
  if (!(scale > 0) || !std::isfinite(scale)) {
    TVM_FFI_THROW(ValueError) << attrs.Field(key) << " must be a positive finite scale";
  }
  return scale;
}

/*! \brief A fixed-point value computed from user scales, limited to `limit` in magnitude. */
int64_t BoundedRound(double value, double limit, const std::string& what) {
  if (!(std::abs(value) < limit)) {
    TVM_FFI_THROW(ValueError) << what << " = " << value << " is outside (-" << limit << ", "
                              << limit << ")";
  }
  return kernels::RoundHalfEven(value);
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
  auto [lo, hi] = IntegerRange(dtype, where);
  r.output_zero_point = attrs.Int("output_zero_point");
  if (r.output_zero_point < lo || r.output_zero_point > hi) {
    TVM_FFI_THROW(ValueError) << attrs.Field("output_zero_point") << " " << r.output_zero_point
                              << " is outside the " << DTypeName(dtype) << " range";
  }
  r.min = lo;
  r.max = hi;
  const std::string activation = attrs.Has("activation") ? attrs.String_("activation") : "none";
  if (activation == "relu" || activation == "relu6") r.min = std::max(lo, r.output_zero_point);
  if (activation == "relu6") {
    // Above the dtype range the bound no longer matters: clamp before rounding.
    const double six = std::min(6.0 / q.output_scale, 65536.0);
    r.max = std::min(hi, r.output_zero_point + kernels::RoundHalfEven(six));
  } else if (activation != "none" && activation != "relu") {
    TVM_FFI_THROW(ValueError) << attrs.Field("activation") << " '" << Printable(activation)
                              << "' is not none, relu or relu6";
  }
  for (double weight_scale : q.weight_scales) {
    if (!(weight_scale > 0) || !std::isfinite(weight_scale)) {
      TVM_FFI_THROW(ValueError) << where << ": weight scales must be positive and finite";
    }
    // The fixed-point multiplier m0 * 2^-shift needs shift in [1, 62] (as the pattern check).
    const double multiplier = q.input_scale * weight_scale / q.output_scale;
    if (!(multiplier >= 0x1p-31 && multiplier < 0x1p30)) {
      TVM_FFI_THROW(ValueError) << where << ": requantization multiplier input_scale * "
                                << "weight_scale / output_scale = " << multiplier
                                << " is outside [2^-31, 2^30)";
    }
    r.multipliers.push_back(kernels::QuantizeMultiplier(multiplier));
  }
  for (size_t c = 0; c < q.bias.size(); ++c) {
    const double weight_scale = q.weight_scales[q.weight_scales.size() > 1 ? c : 0];
    // The quantized bias is an int32, as in onnxruntime's QDQ models.
    r.bias.push_back(BoundedRound(q.bias[c] / (q.input_scale * weight_scale), 0x1p31,
                                  where + ": quantized bias[" + std::to_string(c) + "]"));
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
      return ClipAttrs{Float32(attrs, "min"), Float32(attrs, "max")};
    case OpKind::kQuantize:
    case OpKind::kDequantize: {
      QuantAttrs q{Float32(attrs, "scale"), attrs.Int("zero_point")};
      if (!(q.scale > 0)) TVM_FFI_THROW(ValueError) << attrs.Field("scale") << " must be > 0";
      if (kind == OpKind::kQuantize) std::tie(q.min, q.max) = IntegerRange(dtype, where);
      return q;
    }
    case OpKind::kQnnConv2d:
    case OpKind::kQnnMatmul:
      return ParseQnnAttrs(kind, attrs, dtype, where);
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
  where += " (" + Printable(node.name) + ")";
  std::string op = obj.String_("op");
  std::string dtype = obj.String_("dtype");
  auto parsed_dtype = ParseDType(dtype);
  if (!parsed_dtype.has_value()) {
    TVM_FFI_THROW(ValueError) << where << ": dtype " << Printable(dtype) << " is not an NPU dtype";
  }
  node.dtype = *parsed_dtype;
  node.shape = obj.Ints("shape");
  for (int64_t dim : node.shape) {
    if (dim < 0) TVM_FFI_THROW(ValueError) << where << ": negative dimension in shape";
  }
  // Every later size computation multiplies sub-shapes of this one, so one check covers them.
  checked::Mul(checked::Product(node.shape, "tensor element count"), DTypeBytes(node.dtype),
               "tensor byte size");
  if (op == "input") {
    node.kind = NodeKind::kInput;
  } else if (op == "const") {
    node.kind = NodeKind::kConst;
  } else {
    auto kind = ParseOpKind(op);
    if (!kind.has_value()) {
      TVM_FFI_THROW(ValueError) << where << ": op \"" << Printable(op)
                                << "\" is not an NPU operator";
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
  json::Value value = ParseUntrustedJson(json_text, "NPU graph");
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
