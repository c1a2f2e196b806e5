#include "graph/runtime_params.h"

#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/json.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "graph/op.h"
#include "kernels/kernels.h"
#include "support/checked_math.h"
#include "support/json_input.h"

namespace example_npu {
namespace {

namespace json = tvm::ffi::json;
using tvm::ffi::Any;
using tvm::ffi::String;

/*!
 * \brief Most elements one runtime parameter, and all references to them together, may hold:
 * quantization parameters are per tensor or per channel, so more is a malformed graph (whose
 * bound attributes would exhaust memory).
 */
constexpr int64_t kMaxRuntimeParamElements = int64_t{1} << 24;

json::Object ParseRoot(const std::string& json_text) {
  json::Value value = ParseUntrustedJson(json_text, "NPU graph");
  auto root = value.try_cast<json::Object>();
  if (!root.has_value()) TVM_FFI_THROW(ValueError) << "NPU graph must be a JSON object";
  return *root;
}

/*! \brief The referenced node id when value is {"arg": id}. */
std::optional<int64_t> Reference(const Any& value) {
  auto object = value.try_cast<json::Object>();
  if (!object.has_value() || object->size() != 1) return std::nullopt;
  auto arg = object->Get(String("arg"));
  if (!arg.has_value() || arg->type_index() != tvm::ffi::TypeIndex::kTVMFFIInt) return std::nullopt;
  return arg->cast<int64_t>();
}

/*! \brief value with every reference (also inside lists) replaced by bind(id). */
Any Substitute(const Any& value, const std::function<Any(int64_t)>& bind) {
  if (auto id = Reference(value)) return bind(*id);
  if (auto list = value.try_cast<json::Array>()) {
    json::Array result;
    for (const Any& item : *list) result.push_back(Substitute(item, bind));
    return result;
  }
  return value;
}

/*! \brief The nodes with every attribute reference replaced by bind(id). */
json::Array SubstituteNodes(const json::Array& nodes, const std::function<Any(int64_t)>& bind) {
  json::Array result;
  for (const Any& item : nodes) {
    auto node = item.try_cast<json::Object>();
    auto attrs = node.has_value() ? node->Get(String("attrs")) : std::nullopt;
    auto attr_map = attrs.has_value() ? attrs->try_cast<json::Object>() : std::nullopt;
    if (!attr_map.has_value()) {
      result.push_back(item);
      continue;
    }
    json::Object bound_attrs;
    for (const auto& [key, value] : *attr_map) bound_attrs.Set(key, Substitute(value, bind));
    json::Object bound_node = *node;
    bound_node.Set(String("attrs"), bound_attrs);
    result.push_back(bound_node);
  }
  return result;
}

json::Array Nodes(const json::Object& root) {
  auto nodes = root.Get(String("nodes"));
  auto array = nodes.has_value() ? nodes->try_cast<json::Array>() : std::nullopt;
  if (!array.has_value()) TVM_FFI_THROW(ValueError) << "NPU graph.nodes must be a list";
  return *array;
}

/*! \brief The input node `id` of nodes, with its element count and whether it is integer. */
std::pair<int64_t, bool> InputFacts(const json::Array& nodes, int64_t id) {
  auto node = id >= 0 && id < static_cast<int64_t>(nodes.size())
                  ? nodes[id].try_cast<json::Object>()
                  : std::nullopt;
  auto op = node.has_value() ? node->Get(String("op")) : std::nullopt;
  if (!op.has_value() || op->try_cast<String>().value_or("") != "input") {
    TVM_FFI_THROW(ValueError) << "NPU graph: a runtime parameter refers to node " << id
                              << ", which is not an input";
  }
  auto shape = node->Get(String("shape"));
  auto dims = shape.has_value() ? shape->try_cast<json::Array>() : std::nullopt;
  auto dtype_field = node->Get(String("dtype"));
  auto dtype_name = dtype_field.has_value() ? dtype_field->try_cast<String>() : std::nullopt;
  if (!dims.has_value() || !dtype_name.has_value()) {
    TVM_FFI_THROW(ValueError) << "NPU graph: runtime parameter node " << id
                              << " needs a shape list and a dtype string";
  }
  int64_t elements = 1;
  for (const Any& dim : *dims) {
    if (dim.type_index() != tvm::ffi::TypeIndex::kTVMFFIInt || dim.cast<int64_t>() < 0) {
      TVM_FFI_THROW(ValueError) << "NPU graph: runtime parameter node " << id
                                << " has a shape that is not a list of non-negative integers";
    }
    elements = checked::Mul(elements, dim.cast<int64_t>(), "runtime parameter element count");
  }
  if (elements > kMaxRuntimeParamElements) {
    TVM_FFI_THROW(ValueError) << "NPU graph: runtime parameter node " << id << " has " << elements
                              << " elements (a quantization parameter has at most "
                              << kMaxRuntimeParamElements << ")";
  }
  const auto dtype = ParseDType(std::string(*dtype_name));
  const bool integer = dtype.has_value() && *dtype != DType::kFloat32 && *dtype != DType::kFloat16;
  return {elements, integer};
}

Any AsJson(const std::vector<double>& values, bool integer) {
  auto element = [&](double v) -> Any {
    if (integer) {
      if (!(std::abs(v) < 0x1p62)) {
        TVM_FFI_THROW(ValueError) << "runtime parameter value " << v << " is not an integer";
      }
      return static_cast<int64_t>(v);
    }
    return v;
  };
  if (values.size() == 1) return element(values[0]);
  json::Array list;
  for (double v : values) list.push_back(element(v));
  return list;
}

}  // namespace

std::vector<int64_t> RuntimeParamInputs(const std::string& json_text) {
  json::Value value = ParseUntrustedJson(json_text, "NPU graph");
  // Malformed graphs have none; ParseGraph then names what is wrong with them.
  auto root = value.try_cast<json::Object>();
  auto nodes = root.has_value() ? root->Get(String("nodes")) : std::nullopt;
  auto list = nodes.has_value() ? nodes->try_cast<json::Array>() : std::nullopt;
  if (!list.has_value()) return {};
  std::vector<int64_t> ids;
  SubstituteNodes(*list, [&](int64_t id) -> Any {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    return nullptr;
  });
  return ids;
}

std::string BindRuntimeParams(const std::string& json_text, const RuntimeParamValues& values) {
  json::Object root = ParseRoot(json_text);
  const json::Array nodes = Nodes(root);
  int64_t bound = 0;  // elements written into attributes so far, over every reference
  root.Set(String("nodes"), SubstituteNodes(nodes, [&](int64_t id) {
             const auto [elements, integer] = InputFacts(nodes, id);
             bound += elements;
             if (bound > kMaxRuntimeParamElements) {
               TVM_FFI_THROW(ValueError)
                   << "NPU graph: the runtime parameters its attributes refer to hold more than "
                   << kMaxRuntimeParamElements << " elements in all";
             }
             const std::vector<double> given = values(id);
             if (static_cast<int64_t>(given.size()) != elements) {
               TVM_FFI_THROW(ValueError) << "runtime parameter node " << id << ": " << given.size()
                                         << " values for " << elements << " elements";
             }
             return AsJson(given, integer);
           }));
  return std::string(json::Stringify(root));
}

std::string BindPlaceholderParams(const std::string& json_text) {
  const json::Array nodes = Nodes(ParseRoot(json_text));
  return BindRuntimeParams(
      json_text, [&](int64_t id) { return std::vector<double>(InputFacts(nodes, id).first, 1.0); });
}

}  // namespace example_npu
