/*!
 * \file graph/attr_parsers.h
 * \brief Reading op attributes from the graph JSON: shared by graph.cc (the float ops) and
 * qnn_attrs.cc (the integer qnn.* ops). Internal to the graph stage.
 */
#ifndef EXAMPLE_NPU_GRAPH_ATTR_PARSERS_H_
#define EXAMPLE_NPU_GRAPH_ATTR_PARSERS_H_

#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/json.h>

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "graph/op.h"
#include "support/json_input.h"

namespace example_npu {

namespace json = tvm::ffi::json;

/*! \brief Read access to one JSON object that names its owner in every error. */
class JsonObject {
 public:
  JsonObject(const tvm::ffi::Any& value, std::string where) : where_(std::move(where)) {
    auto obj = value.try_cast<json::Object>();
    if (!obj.has_value()) TVM_FFI_THROW(ValueError) << where_ << " must be a JSON object";
    obj_ = *obj;
  }

  bool Has(const char* key) const { return obj_.Get(tvm::ffi::String(key)).has_value(); }

  tvm::ffi::Any Get(const char* key) const {
    auto value = obj_.Get(tvm::ffi::String(key));
    if (!value.has_value()) TVM_FFI_THROW(ValueError) << where_ << " has no \"" << key << "\"";
    return *value;
  }

  std::string String_(const char* key) const {
    auto value = Get(key).try_cast<tvm::ffi::String>();
    if (!value.has_value()) TVM_FFI_THROW(ValueError) << Field(key) << " must be a string";
    // A \u escape can decode to a lone surrogate; such a name could not reach Python.
    if (!IsValidUtf8(std::string_view(value->data(), value->size()))) {
      TVM_FFI_THROW(ValueError) << Field(key) << " is not valid UTF-8";
    }
    return std::string(*value);
  }

  int64_t Int(const char* key) const { return AsInt(Get(key), Field(key)); }

  double Number(const char* key) const {
    tvm::ffi::Any value = Get(key);
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
    tvm::ffi::Any value = Get(key);
    // A runtime parameter bound from a one-element tensor arrives as a bare number.
    if (auto one = value.try_cast<double>()) return {*one};
    if (value.type_index() == tvm::ffi::TypeIndex::kTVMFFIInt) return {Number(key)};
    auto array = value.try_cast<json::Array>();
    if (!array.has_value()) TVM_FFI_THROW(ValueError) << Field(key) << " must be a list of numbers";
    std::vector<double> result;
    for (size_t i = 0; i < array->size(); ++i) {
      tvm::ffi::Any item = (*array)[i];
      if (auto as_double = item.try_cast<double>()) {
        result.push_back(*as_double);
      } else {
        result.push_back(static_cast<double>(AsInt(item, Field(key))));
      }
    }
    return result;
  }

  std::string Field(const char* key) const { return where_ + "." + key; }

  static int64_t AsInt(const tvm::ffi::Any& value, const std::string& what) {
    if (value.type_index() == tvm::ffi::TypeIndex::kTVMFFIInt) return value.cast<int64_t>();
    TVM_FFI_THROW(ValueError) << what << " must be an integer";
    TVM_FFI_UNREACHABLE();
  }

  static std::vector<int64_t> AsInts(const tvm::ffi::Any& value, const std::string& what) {
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

/*! \brief A number the kernels use as a float32: +-inf or inside the float32 range, not NaN. */
inline float Float32(const JsonObject& attrs, const char* key) {
  const double value = attrs.Number(key);
  if (!std::isinf(value) && !(std::abs(value) <= std::numeric_limits<float>::max())) {
    TVM_FFI_THROW(ValueError) << attrs.Field(key) << " = " << value << " is not a float32 value";
  }
  return static_cast<float>(value);
}

/*!
 * \brief A zero point, which lies in a quantized dtype's range (int8, uint8 or int16 together:
 * [-32768, 65535]); ValidateGraph narrows it to the input's own dtype where it knows it.
 */
inline int64_t ZeroPoint(const JsonObject& attrs, const char* key) {
  const int64_t value = attrs.Int(key);
  if (value < -32768 || value > 65535) {
    TVM_FFI_THROW(ValueError) << attrs.Field(key) << " " << value
                              << " is not a zero point of int8, uint8 or int16";
  }
  return value;
}

/*! \brief A fixed-point value computed from user scales, limited to `limit` in magnitude. */
inline int64_t BoundedRound(double value, double limit, const std::string& what) {
  if (!(std::abs(value) < limit)) {
    TVM_FFI_THROW(ValueError) << what << " = " << value << " is outside (-" << limit << ", "
                              << limit << ")";
  }
  return kernels::RoundHalfEven(value);
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

inline std::pair<int64_t, int64_t> IntegerRange(DType dtype, const std::string& where) {
  if (!IsQuantizedDType(dtype)) {
    TVM_FFI_THROW(ValueError) << where << ": quantized results must be int8, uint8 or int16";
  }
  return QuantizedRange(dtype);
}

/*! \brief Scales are float32 in every model format, and TVM's build computes with them in float32:
 * a scale is a positive normal float32 value. */
inline bool IsFloat32Scale(double scale) {
  return scale >= std::numeric_limits<float>::min() && scale <= std::numeric_limits<float>::max();
}

inline double PositiveScale(const JsonObject& attrs, const char* key) {
  const double scale = attrs.Number(key);
  if (!IsFloat32Scale(scale)) {
    TVM_FFI_THROW(ValueError) << attrs.Field(key) << " must be a positive normal float32 scale";
  }
  return scale;
}

ConvAttrs ParseConv2dAttrs(const JsonObject& attrs);
PoolAttrs ParsePoolAttrs(const JsonObject& attrs, kernels::PoolKind kind);

// spatial_attrs.cc: upsampling, padding, transposed convolution and normalisation.
ResizeAttrs ParseResizeAttrs(const JsonObject& attrs);
PadAttrs ParsePadAttrs(const JsonObject& attrs);
AdaptivePoolAttrs ParseAdaptivePoolAttrs(const JsonObject& attrs);
ConvTransposeAttrs ParseConvTransposeAttrs(const JsonObject& attrs);
NormAttrs ParseNormAttrs(OpKind kind, const JsonObject& attrs);
TopkAttrs ParseTopkAttrs(const JsonObject& attrs);

/*! \brief The typed attributes of a qnn.* op (IsQnnOp), derived values included. */
OpAttrs ParseQnnOpAttrs(OpKind kind, const JsonObject& attrs, DType dtype,
                        const std::string& where);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_GRAPH_ATTR_PARSERS_H_
