/*!
 * \file graph/spatial_attrs.cc
 * \brief Attributes of the upsampling, padding, transposed-convolution and normalisation ops of
 * detection and segmentation networks, read from the graph JSON (Relax's attribute names).
 * Shape-dependent fields (whole-tensor sizes, instance norm's group count) are filled in by
 * NormalizeAxes, which sees the input shapes.
 */
#include <string>
#include <utility>
#include <vector>

#include "graph/attr_parsers.h"

namespace example_npu {
namespace {

template <typename Enum, size_t N>
Enum ParseChoice(const JsonObject& attrs, const char* key,
                 const std::array<std::pair<const char*, Enum>, N>& choices) {
  const std::string value = attrs.String_(key);
  for (const auto& [name, choice] : choices) {
    if (value == name) return choice;
  }
  std::string names;
  for (const auto& [name, choice] : choices) names += std::string(names.empty() ? "" : ", ") + name;
  TVM_FFI_THROW(ValueError) << attrs.Field(key) << " " << Printable(value) << " is not supported ("
                            << names << ")";
  TVM_FFI_UNREACHABLE();
}

kernels::DataLayout ParseImageLayout(const JsonObject& attrs, const char* key) {
  const kernels::DataLayout layout = ParseChoice<kernels::DataLayout, 2>(
      attrs, key, {{{"NCHW", kernels::DataLayout::kNCHW}, {"NHWC", kernels::DataLayout::kNHWC}}});
  if (attrs.Has("out_layout") && attrs.String_("out_layout") != attrs.String_(key)) {
    TVM_FFI_THROW(ValueError) << attrs.Field("out_layout") << " must equal " << key;
  }
  return layout;
}

void CheckSameOutDtype(const JsonObject& attrs) {
  if (!attrs.Has("out_dtype")) return;
  const std::string out_dtype = attrs.String_("out_dtype");
  if (!out_dtype.empty() && out_dtype != "void") {
    TVM_FFI_THROW(ValueError) << attrs.Field("out_dtype")
                              << " must be empty: the NPU keeps the input dtype";
  }
}

}  // namespace

ResizeAttrs ParseResizeAttrs(const JsonObject& attrs) {
  using kernels::CoordinateMode;
  using kernels::NearestRounding;
  ResizeAttrs result;
  kernels::Resize2dParams& p = result.params;
  p.layout = ParseImageLayout(attrs, "layout");
  p.method =
      ParseChoice<kernels::ResizeMethod, 2>(attrs, "method",
                                            {{{"nearest_neighbor", kernels::ResizeMethod::kNearest},
                                              {"linear", kernels::ResizeMethod::kLinear}}});
  p.mode = ParseChoice<CoordinateMode, 5>(
      attrs, "coordinate_transformation_mode",
      {{{"half_pixel", CoordinateMode::kHalfPixel},
        {"align_corners", CoordinateMode::kAlignCorners},
        {"asymmetric", CoordinateMode::kAsymmetric},
        {"pytorch_half_pixel", CoordinateMode::kPytorchHalfPixel},
        {"tf_half_pixel_for_nn", CoordinateMode::kTfHalfPixelForNn}}});
  // TVM's default rounding: round for align_corners, floor otherwise.
  const bool default_rounding =
      !attrs.Has("rounding_method") || attrs.String_("rounding_method").empty();
  p.rounding = default_rounding
                   ? (p.mode == CoordinateMode::kAlignCorners ? NearestRounding::kRound
                                                              : NearestRounding::kFloor)
                   : ParseChoice<NearestRounding, 5>(
                         attrs, "rounding_method",
                         {{{"round", NearestRounding::kRound},
                           {"floor", NearestRounding::kFloor},
                           {"ceil", NearestRounding::kCeil},
                           {"round_prefer_floor", NearestRounding::kRoundPreferFloor},
                           {"round_prefer_ceil", NearestRounding::kRoundPreferCeil}}});
  // "rounding": "tflite" (a TFLite model's int8 bilinear resize: TFLite's integer kernel).
  p.tflite_integer = attrs.Has("rounding") &&
                     ParseChoice<bool, 2>(attrs, "rounding", {{{"tvm", false}, {"tflite", true}}});
  CheckSameOutDtype(attrs);
  return result;
}

PadAttrs ParsePadAttrs(const JsonObject& attrs) {
  PadAttrs result;
  kernels::PadParams& p = result.params;
  p.mode = ParseChoice<kernels::PadMode, 4>(attrs, "pad_mode",
                                            {{{"constant", kernels::PadMode::kConstant},
                                              {"reflect", kernels::PadMode::kReflect},
                                              {"replicate", kernels::PadMode::kReplicate},
                                              {"circular", kernels::PadMode::kCircular}}});
  const std::vector<int64_t> widths = attrs.Ints("pad_width");
  if (widths.size() % 2 != 0) {
    TVM_FFI_THROW(ValueError) << attrs.Field("pad_width") << " must hold (before, after) pairs";
  }
  for (size_t k = 0; k < widths.size(); k += 2) {
    if (widths[k] < 0 || widths[k + 1] < 0 || widths[k] > (1 << 24) || widths[k + 1] > (1 << 24)) {
      TVM_FFI_THROW(ValueError) << attrs.Field("pad_width")
                                << ": widths must be in [0, 2^24] (negative padding crops)";
    }
    p.before.push_back(widths[k]);
    p.after.push_back(widths[k + 1]);
  }
  p.value = attrs.Has("pad_value") ? Float32(attrs, "pad_value") : 0.0f;
  return result;
}

AdaptivePoolAttrs ParseAdaptivePoolAttrs(const JsonObject& attrs) {
  AdaptivePoolAttrs result;
  result.params.layout = ParseImageLayout(attrs, "layout");
  return result;
}

ConvTransposeAttrs ParseConvTransposeAttrs(const JsonObject& attrs) {
  ConvTransposeAttrs result;
  kernels::ConvTransposeParams& p = result.params;
  p.strides = FixedInts<2>(attrs, "strides");
  p.dilation = FixedInts<2>(attrs, "dilation");
  result.padding = FixedInts<4>(attrs, "padding");
  result.output_padding = FixedInts<2>(attrs, "output_padding");
  p.groups = attrs.Int("groups");
  p.data_layout = ParseImageLayout(attrs, "data_layout");
  p.kernel_layout = ParseChoice<kernels::TransposedKernelLayout, 1>(
      attrs, "kernel_layout", {{{"IOHW", kernels::TransposedKernelLayout::kIOHW}}});
  for (int s = 0; s < 2; ++s) {
    if (p.strides[s] < 1 || p.dilation[s] < 1 || p.strides[s] > (1 << 16) ||
        p.dilation[s] > (1 << 16)) {
      TVM_FFI_THROW(ValueError) << attrs.Field("strides")
                                << ": strides and dilation must be in [1, 65536]";
    }
    if (result.output_padding[s] < 0 || result.output_padding[s] >= p.strides[s]) {
      TVM_FFI_THROW(ValueError) << attrs.Field("output_padding")
                                << " must be in [0, stride) (TVM's conv2d_transpose)";
    }
  }
  for (int64_t pad : result.padding) {
    if (pad < 0 || pad > (1 << 24)) {
      TVM_FFI_THROW(ValueError) << attrs.Field("padding") << " must be in [0, 2^24]";
    }
  }
  p.origin = {result.padding[0], result.padding[1]};
  CheckSameOutDtype(attrs);
  return result;
}

NormAttrs ParseNormAttrs(OpKind kind, const JsonObject& attrs) {
  NormAttrs result;
  kernels::GroupNormParams& p = result.params;
  p.channel_axis = attrs.Int("channel_axis");
  p.axes = attrs.Ints("axes");
  p.epsilon = Float32(attrs, "epsilon");
  // 0 until NormalizeAxes knows the channel count (instance norm: one channel per group).
  p.groups = kind == OpKind::kGroupNorm ? attrs.Int("num_groups") : 0;
  // TVM's legalization applies gamma and beta whatever center / scale say: only the form it
  // computes is accepted.
  for (const char* key : {"center", "scale"}) {
    if (attrs.Has(key) && !attrs.Bool(key)) {
      TVM_FFI_THROW(ValueError) << attrs.Field(key)
                                << " is false, which TVM's group / instance norm ignores";
    }
  }
  return result;
}

TopkAttrs ParseTopkAttrs(const JsonObject& attrs) {
  TopkAttrs result;
  kernels::TopkParams& p = result.params;
  p.axis = attrs.Int("axis");
  p.k = attrs.Int("k");  // checked against the axis extent by shape inference
  p.largest = attrs.Bool("largest");
  const std::string output = attrs.String_("output");
  if (output != "values" && output != "indices") {
    TVM_FFI_THROW(ValueError) << attrs.Field("output") << " must be \"values\" or \"indices\"";
  }
  p.indices = output == "indices";
  return result;
}

}  // namespace example_npu
