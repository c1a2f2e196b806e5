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

#include "graph/attr_parsers.h"
#include "graph/runtime_params.h"
#include "kernels/half.h"
#include "support/checked_math.h"
#include "support/json_input.h"

namespace example_npu {

namespace {

using tvm::ffi::Any;
using tvm::ffi::String;

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

OpAttrs ParseAttrs(OpKind kind, const JsonObject& node, DType dtype, const std::string& where) {
  bool has_attrs = node.Has("attrs");
  JsonObject attrs = has_attrs ? JsonObject(node.Get("attrs"), where + ".attrs")
                               : JsonObject(json::Object(), where + ".attrs");
  switch (kind) {
    case OpKind::kConv1d:
      return ParseConv1dAttrs(attrs);
    case OpKind::kConv2d:
      return ParseConv2dAttrs(attrs);
    case OpKind::kMaxPool2d: {
      PoolAttrs pool = ParsePoolAttrs(attrs, kernels::PoolKind::kMax);
      if (dtype == DType::kFloat16) pool.params.lowest = kernels::kHalfLowest;
      return pool;
    }
    case OpKind::kAvgPool2d:
      return ParsePoolAttrs(attrs, kernels::PoolKind::kAvg);
    case OpKind::kBatchNorm:
      return ParseBatchNormAttrs(attrs);
    case OpKind::kSoftmax:
      return SoftmaxAttrs{attrs.Int("axis"),
                          attrs.Has("zero_masked_rows") && attrs.Bool("zero_masked_rows"),
                          attrs.Has("zero_nan") && attrs.Bool("zero_nan")};
    case OpKind::kConcat:
      return ConcatAttrs{attrs.Int("axis")};
    case OpKind::kTake:
      return TakeAttrs{attrs.Has("negative_from_end") && attrs.Bool("negative_from_end")};
    case OpKind::kStridedSlice:
      return SliceAttrs{attrs.Ints("begin"), attrs.Ints("step")};
    case OpKind::kMean:
    case OpKind::kSum:
    case OpKind::kMax:
    case OpKind::kMin:
    case OpKind::kVariance:
    case OpKind::kArgmax:
    case OpKind::kArgmin:
      return ReduceAttrs{attrs.Ints("axes"), attrs.Bool("keepdims")};
    case OpKind::kLogSoftmax:
      return SoftmaxAttrs{attrs.Int("axis")};
    case OpKind::kLeakyRelu:
      return LeakyReluAttrs{Float32(attrs, "alpha")};
    case OpKind::kResize2d:
      return ParseResizeAttrs(attrs);
    case OpKind::kPad:
      return ParsePadAttrs(attrs);
    case OpKind::kAdaptiveAvgPool2d:
      return ParseAdaptivePoolAttrs(attrs);
    case OpKind::kTopk:
      return ParseTopkAttrs(attrs);
    case OpKind::kConv2dTranspose:
      return ParseConvTransposeAttrs(attrs);
    case OpKind::kGroupNorm:
    case OpKind::kInstanceNorm:
      return ParseNormAttrs(kind, attrs);
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
    case OpKind::kPermuteDims: {
      PermuteDimsAttrs result;
      Any axes = attrs.Has("axes") ? attrs.Get("axes") : Any(nullptr);
      if (axes != nullptr) result.axes = JsonObject::AsInts(axes, attrs.Field("axes"));
      return result;
    }
    default:
      return IsQnnOp(kind) ? ParseQnnOpAttrs(kind, attrs, dtype, where) : OpAttrs(NoAttrs{});
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
