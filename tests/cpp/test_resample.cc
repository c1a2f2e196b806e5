/*!
 * \file tests/cpp/test_resample.cc
 * \brief resize2d, pad and adaptive average pooling: the kernels against naive per-element
 * references, and tiled graphs (tiles with their own origins, a tiny L1) against the untiled
 * kernels, bit for bit.
 */
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "graph_test_util.h"
#include "kernels/resample.h"
#include "runtime/executor.h"
#include "test_util.h"

namespace example_npu {
namespace kernels {
namespace {

using test_util::RandomVector;
using test_util::ShapeToString;
using test_util::Unravel;

/*! \brief TVM's resize2d for one output coordinate, written out per element (topi get_inx,
 * get_closest_index, _lerp): the reference the tap tables of the kernel must reproduce. */
float NaiveCoordinate(CoordinateMode mode, int64_t in, int64_t out, int64_t x) {
  const float scale = static_cast<float>(static_cast<double>(in) / out);
  switch (mode) {
    case CoordinateMode::kHalfPixel:
      return (static_cast<float>(x) + 0.5f) * scale - 0.5f;
    case CoordinateMode::kAlignCorners:
      return static_cast<float>(static_cast<double>(in - 1) / (out - 1)) * static_cast<float>(x);
    case CoordinateMode::kAsymmetric:
      return scale * static_cast<float>(x);
    case CoordinateMode::kPytorchHalfPixel:
      return out > 1 ? (static_cast<float>(x) + 0.5f) * scale - 0.5f : 0.0f;
    case CoordinateMode::kTfHalfPixelForNn:
      return (static_cast<float>(x) + 0.5f) * scale;
  }
  return 0.0f;
}

std::vector<float> NaiveResize(const std::vector<float>& in, const Shape& in_shape,
                               const Shape& out_shape, const Resize2dParams& p) {
  const bool nchw = p.layout == DataLayout::kNCHW;
  std::vector<float> out(NumElements(out_shape));
  auto at = [&](int64_t n, int64_t c, int64_t y, int64_t x) {
    y = std::min<int64_t>(std::max<int64_t>(y, 0), p.in_size[0] - 1);
    x = std::min<int64_t>(std::max<int64_t>(x, 0), p.in_size[1] - 1);
    return in[nchw ? ((n * in_shape[1] + c) * in_shape[2] + y) * in_shape[3] + x
                   : ((n * in_shape[1] + y) * in_shape[2] + x) * in_shape[3] + c];
  };
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    const std::vector<int64_t> o = Unravel(i, out_shape);
    const int64_t n = o[0], c = nchw ? o[1] : o[3], y = nchw ? o[2] : o[1], x = nchw ? o[3] : o[2];
    const float cy = NaiveCoordinate(p.mode, p.in_size[0], p.out_size[0], y);
    const float cx = NaiveCoordinate(p.mode, p.in_size[1], p.out_size[1], x);
    if (p.method == ResizeMethod::kLinear) {
      const float fy = std::floor(cy), fx = std::floor(cx);
      const int64_t y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
      const float ty = cy - fy, tx = cx - fx;
      const float top = at(n, c, y0, x0) * (1.0f - tx) + at(n, c, y0, x0 + 1) * tx;
      const float bottom = at(n, c, y0 + 1, x0) * (1.0f - tx) + at(n, c, y0 + 1, x0 + 1) * tx;
      out[i] = top * (1.0f - ty) + bottom * ty;
      continue;
    }
    auto round = [&](float v, int64_t in_extent, int64_t out_extent, int64_t index) -> int64_t {
      if (p.mode == CoordinateMode::kAsymmetric && p.rounding == NearestRounding::kFloor &&
          out_extent % in_extent == 0) {
        return index / (out_extent / in_extent);
      }
      switch (p.rounding) {
        case NearestRounding::kRound:
          return static_cast<int64_t>(std::nearbyint(v));
        case NearestRounding::kFloor:
          return static_cast<int64_t>(std::floor(v + 1e-5f));
        case NearestRounding::kCeil:
          return static_cast<int64_t>(std::ceil(v - 1e-5f));
        case NearestRounding::kRoundPreferFloor:
          return static_cast<int64_t>(std::ceil(v - 0.5f));
        case NearestRounding::kRoundPreferCeil:
          return static_cast<int64_t>(std::floor(v + 0.5f));
      }
      return 0;
    };
    out[i] = at(n, c, round(cy, p.in_size[0], p.out_size[0], y),
                round(cx, p.in_size[1], p.out_size[1], x));
  }
  return out;
}

TEST(Resize2dTest, EveryModeAndRoundingMatchesTheNaiveFormula) {
  std::mt19937 rng(5);
  const std::vector<CoordinateMode> modes = {
      CoordinateMode::kHalfPixel, CoordinateMode::kAlignCorners, CoordinateMode::kAsymmetric,
      CoordinateMode::kPytorchHalfPixel, CoordinateMode::kTfHalfPixelForNn};
  const std::vector<NearestRounding> roundings = {
      NearestRounding::kRound, NearestRounding::kFloor, NearestRounding::kCeil,
      NearestRounding::kRoundPreferFloor, NearestRounding::kRoundPreferCeil};
  // Upsampling by integer and fractional factors, downsampling, an output of 1.
  const std::vector<std::pair<std::array<int64_t, 2>, std::array<int64_t, 2>>> sizes = {
      {{4, 5}, {8, 10}}, {{3, 7}, {7, 16}}, {{9, 8}, {4, 3}}, {{5, 6}, {1, 6}}, {{2, 2}, {6, 3}}};
  for (const DataLayout layout : {DataLayout::kNCHW, DataLayout::kNHWC}) {
    for (const auto& [in, out] : sizes) {
      const bool nchw = layout == DataLayout::kNCHW;
      const Shape in_shape = nchw ? Shape{2, 3, in[0], in[1]} : Shape{2, in[0], in[1], 3};
      const Shape out_shape = nchw ? Shape{2, 3, out[0], out[1]} : Shape{2, out[0], out[1], 3};
      const std::vector<float> x = RandomVector(NumElements(in_shape), &rng, -2.0f, 2.0f);
      for (CoordinateMode mode : modes) {
        if (mode == CoordinateMode::kAlignCorners && (out[0] == 1 || out[1] == 1)) continue;
        for (const ResizeMethod method : {ResizeMethod::kNearest, ResizeMethod::kLinear}) {
          for (NearestRounding rounding : roundings) {
            if (method == ResizeMethod::kLinear && rounding != NearestRounding::kFloor) continue;
            Resize2dParams p;
            p.layout = layout;
            p.method = method;
            p.mode = mode;
            p.rounding = rounding;
            p.in_size = in;
            p.out_size = out;
            std::vector<float> y(NumElements(out_shape));
            Resize2d(x.data(), in_shape, y.data(), out_shape, p);
            EXPECT_EQ(y, NaiveResize(x, in_shape, out_shape, p))
                << ShapeToString(in_shape) << " -> " << ShapeToString(out_shape) << " mode "
                << static_cast<int>(mode) << " method " << static_cast<int>(method) << " rounding "
                << static_cast<int>(rounding);
          }
        }
      }
    }
  }
}

TEST(PadTest, EveryModeFollowsNumpysDefinition) {
  const Shape shape = {2, 3, 4};
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  const std::vector<int64_t> before = {0, 2, 1}, after = {1, 1, 3};
  // numpy.pad's index maps: reflect (no edge repeat), edge, wrap.
  auto reflect = [](int64_t i, int64_t n) {
    while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
    return i;
  };
  for (const PadMode mode :
       {PadMode::kConstant, PadMode::kReflect, PadMode::kReplicate, PadMode::kCircular}) {
    PadParams p;
    p.mode = mode;
    p.value = -7.5f;
    p.before = before;
    p.after = after;
    p.in_shape = shape;
    p.in_begin = p.out_begin = {0, 0, 0};
    const Shape out_shape = {3, 6, 8};
    std::vector<float> y(NumElements(out_shape));
    Pad(x.data(), shape, y.data(), out_shape, p);
    for (int64_t i = 0; i < NumElements(out_shape); ++i) {
      const std::vector<int64_t> o = Unravel(i, out_shape);
      std::vector<int64_t> src(3);
      bool outside = false;
      for (int d = 0; d < 3; ++d) {
        const int64_t k = o[d] - before[d], n = shape[d];
        outside |= k < 0 || k >= n;
        src[d] = mode == PadMode::kReflect     ? reflect(k, n)
                 : mode == PadMode::kReplicate ? std::min(std::max<int64_t>(k, 0), n - 1)
                                               : ((k % n) + n) % n;
      }
      const float want =
          mode == PadMode::kConstant && outside ? -7.5f : x[(src[0] * 3 + src[1]) * 4 + src[2]];
      EXPECT_EQ(y[i], want) << "mode " << static_cast<int>(mode) << " element " << i;
    }
  }
}

TEST(AdaptiveAvgPool2dTest, UnevenOverlappingWindowsAveragePyTorchsRanges) {
  std::mt19937 rng(9);
  const Shape in_shape = {1, 2, 7, 10}, out_shape = {1, 2, 3, 4};
  const std::vector<float> x = RandomVector(NumElements(in_shape), &rng);
  AdaptivePoolParams p;
  p.in_size = {7, 10};
  p.out_size = {3, 4};
  std::vector<float> y(NumElements(out_shape));
  AdaptiveAvgPool2d(x.data(), in_shape, y.data(), out_shape, p);
  for (int64_t i = 0; i < NumElements(out_shape); ++i) {
    const std::vector<int64_t> o = Unravel(i, out_shape);
    // PyTorch: start = floor(o * in / out), end = ceil((o + 1) * in / out).
    const int64_t y0 = static_cast<int64_t>(std::floor(o[2] * 7.0 / 3)),
                  y1 = static_cast<int64_t>(std::ceil((o[2] + 1) * 7.0 / 3));
    const int64_t x0 = static_cast<int64_t>(std::floor(o[3] * 10.0 / 4)),
                  x1 = static_cast<int64_t>(std::ceil((o[3] + 1) * 10.0 / 4));
    double sum = 0.0;
    for (int64_t r = y0; r < y1; ++r) {
      for (int64_t c = x0; c < x1; ++c) sum += x[(o[1] * 7 + r) * 10 + c];
    }
    EXPECT_NEAR(y[i], sum / ((y1 - y0) * (x1 - x0)), 1e-6) << i;
  }
}

/*! \brief TFLite's int8 ResizeBilinear (reference_ops), one output element at a time, NHWC. */
std::vector<float> NaiveTfliteBilinear(const std::vector<float>& in, const Shape& in_shape,
                                       const Shape& out_shape, CoordinateMode mode) {
  const int64_t ih = in_shape[1], iw = in_shape[2], oh = out_shape[1], ow = out_shape[2];
  const int64_t channels = in_shape[3];
  const bool align = mode == CoordinateMode::kAlignCorners,
             half = mode == CoordinateMode::kHalfPixel;
  const int64_t sy =
      align && oh > 1 ? (1024 * (ih - 1) + (oh - 1) / 2) / (oh - 1) : (1024 * ih + oh / 2) / oh;
  const int64_t sx =
      align && ow > 1 ? (1024 * (iw - 1) + (ow - 1) / 2) / (ow - 1) : (1024 * iw + ow / 2) / ow;
  std::vector<float> out(NumElements(out_shape));
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    const std::vector<int64_t> o = Unravel(i, out_shape);
    const int64_t n = o[0], y = o[1], x = o[2], c = o[3];
    const int64_t cy = y * sy + (half ? sy / 2 - 512 : 0);
    const int64_t cx = x * sx + (half ? sx / 2 - 512 : 0);
    const int64_t y0 = std::max<int64_t>(cy / 1024, 0),
                  y1 = std::min<int64_t>((cy + 1023) / 1024, ih - 1);
    const int64_t x0 = std::max<int64_t>(cx / 1024, 0),
                  x1 = std::min<int64_t>((cx + 1023) / 1024, iw - 1);
    auto at = [&](int64_t yy, int64_t xx) {
      return static_cast<int64_t>(in[((n * ih + yy) * iw + xx) * channels + c]);
    };
    const int64_t dy = cy - 1024 * y0, dx = cx - 1024 * x0;
    const int64_t sum = at(y0, x0) * (1024 - dy) * (1024 - dx) + at(y1, x0) * dy * (1024 - dx) +
                        at(y0, x1) * (1024 - dy) * dx + at(y1, x1) * dy * dx;
    out[i] = static_cast<float>((sum + (sum > 0 ? 1 << 19 : -(1 << 19))) / (1 << 20));
  }
  return out;
}

TEST(Resize2dTest, TfliteIntegerBilinearMatchesTflitesKernelPerElement) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> byte(-128, 127);
  const std::vector<std::pair<std::array<int64_t, 2>, std::array<int64_t, 2>>> sizes = {
      {{4, 5}, {8, 10}}, {{7, 5}, {16, 11}}, {{9, 8}, {4, 3}}, {{1, 3}, {5, 7}}, {{6, 6}, {1, 1}}};
  for (const auto& [in, out] : sizes) {
    const Shape in_shape{2, in[0], in[1], 3}, out_shape{2, out[0], out[1], 3};
    std::vector<float> x(NumElements(in_shape));
    for (float& v : x) v = static_cast<float>(byte(rng));
    for (CoordinateMode mode :
         {CoordinateMode::kHalfPixel, CoordinateMode::kAlignCorners, CoordinateMode::kAsymmetric}) {
      Resize2dParams p{
          DataLayout::kNHWC, ResizeMethod::kLinear, mode, NearestRounding::kFloor, in, out};
      p.tflite_integer = true;
      std::vector<float> y(NumElements(out_shape));
      Resize2d(x.data(), in_shape, y.data(), out_shape, p);
      EXPECT_EQ(y, NaiveTfliteBilinear(x, in_shape, out_shape, mode))
          << ShapeToString(in_shape) << " -> " << ShapeToString(out_shape) << " mode "
          << static_cast<int>(mode);
    }
  }
}

}  // namespace
}  // namespace kernels

namespace {

NPUConfig TinyL1() {
  NPUConfig config;
  config.l1_sram_kb = 4;
  return config;
}

/*! \brief Compiles `json` for the default NPU and a 4 KB L1: every tiling computes the untiled
 * kernels' bits, with and without DMA forwarding. */
void ExpectTilingsMatchUntiled(const std::string& json) {
  test_util::ExpectTiledRunsMatchUntiled(ParseGraph(json), {NPUConfig(), TinyL1()}, 1, 0.0);
}

TEST(ResampleGraphTest, TiledResizePadAndAdaptivePoolingEqualTheWholeTensorKernels) {
  // bilinear upsampling -> nearest downsampling -> reflect pad -> adaptive pooling -> relu.
  ExpectTilingsMatchUntiled(R"({"version": 1, "symbol": "resample", "nodes": [
  {"op": "input", "name": "x", "shape": [1, 6, 9, 11], "dtype": "float32"},
  {"op": "image.resize2d", "name": "up", "inputs": [0], "shape": [1, 6, 23, 30],
   "dtype": "float32", "attrs": {"layout": "NCHW", "method": "linear",
   "coordinate_transformation_mode": "half_pixel", "rounding_method": "", "out_dtype": ""}},
  {"op": "image.resize2d", "name": "down", "inputs": [1], "shape": [1, 6, 17, 13],
   "dtype": "float32", "attrs": {"layout": "NCHW", "method": "nearest_neighbor",
   "coordinate_transformation_mode": "asymmetric", "rounding_method": "round_prefer_ceil"}},
  {"op": "nn.pad", "name": "pad", "inputs": [2], "shape": [1, 7, 20, 16], "dtype": "float32",
   "attrs": {"pad_width": [0, 0, 1, 0, 2, 1, 3, 0], "pad_mode": "reflect", "pad_value": 0.0}},
  {"op": "nn.adaptive_avg_pool2d", "name": "pool", "inputs": [3], "shape": [1, 7, 6, 5],
   "dtype": "float32", "attrs": {"layout": "NCHW", "out_layout": "NCHW"}},
  {"op": "nn.relu", "name": "out", "inputs": [4], "shape": [1, 7, 6, 5], "dtype": "float32"}],
  "arg_nodes": [0], "heads": [5]})");
}

TEST(ResampleGraphTest, NhwcNearestUpsamplingAndConstantPadding) {
  ExpectTilingsMatchUntiled(R"({"version": 1, "symbol": "nhwc", "nodes": [
  {"op": "input", "name": "x", "shape": [2, 5, 4, 24], "dtype": "float32"},
  {"op": "nn.pad", "name": "pad", "inputs": [0], "shape": [2, 9, 4, 27], "dtype": "float32",
   "attrs": {"pad_width": [0, 0, 3, 1, 0, 0, 1, 2], "pad_mode": "constant", "pad_value": 0.25}},
  {"op": "image.resize2d", "name": "up", "inputs": [1], "shape": [2, 18, 8, 27],
   "dtype": "float32", "attrs": {"layout": "NHWC", "method": "nearest_neighbor",
   "coordinate_transformation_mode": "asymmetric", "rounding_method": "floor"}}],
  "arg_nodes": [0], "heads": [2]})");
}

TEST(ResampleGraphTest, TiledTfliteIntegerBilinearRunsTflitesKernel) {
  // int8 in and out through the executor: a roomy L1 and 8x8 tiles in 1 KB (many tiles, each
  // reading its own source box), both equal to the per-element kernel.
  const std::string json = R"({"version": 1, "symbol": "tflite_bilinear", "nodes": [
  {"op": "input", "name": "x", "shape": [1, 13, 11, 40], "dtype": "int8"},
  {"op": "image.resize2d", "name": "up", "inputs": [0], "shape": [1, 30, 23, 40],
   "dtype": "int8", "attrs": {"layout": "NHWC", "method": "linear", "rounding": "tflite",
   "coordinate_transformation_mode": "half_pixel", "rounding_method": ""}}],
  "arg_nodes": [0], "heads": [1]})";
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::vector<int8_t> input(13 * 11 * 40);
  for (int8_t& v : input) v = static_cast<int8_t>(byte(rng));
  const std::vector<float> expected =
      kernels::NaiveTfliteBilinear(std::vector<float>(input.begin(), input.end()), {1, 13, 11, 40},
                                   {1, 30, 23, 40}, kernels::CoordinateMode::kHalfPixel);
  NPUConfig tiny;
  tiny.l1_sram_kb = 1;
  tiny.tile_height = 8;
  tiny.tile_width = 8;
  for (const NPUConfig& config : {NPUConfig(), tiny}) {
    Executor executor(ParseGraph(json), config);
    std::vector<int64_t> in_shape = {1, 13, 11, 40}, out_shape = {1, 30, 23, 40};
    std::vector<int8_t> output(30 * 23 * 40);
    auto view = [](std::vector<int8_t>* data, std::vector<int64_t>* shape) {
      DLTensor t{};
      t.data = data->data();
      t.device = DLDevice{kDLCPU, 0};
      t.ndim = static_cast<int32_t>(shape->size());
      t.dtype = DLDataType{kDLInt, 8, 1};
      t.shape = shape->data();
      return t;
    };
    DLTensor x = view(&input, &in_shape), y = view(&output, &out_shape);
    executor.Run({&x}, {&y});
    EXPECT_EQ(std::vector<float>(output.begin(), output.end()), expected) << config.l1_sram_kb;
  }
}

TEST(ResampleGraphTest, AttributesTheNpuCannotComputeAreValueErrors) {
  auto graph = [](const std::string& attrs, const std::string& shape) {
    return R"({"version": 1, "symbol": "bad", "nodes": [
      {"op": "input", "name": "x", "shape": [1, 2, 3, 4], "dtype": "float32"},
      {"op": "image.resize2d", "name": "r", "inputs": [0], "shape": )" +
           shape + R"(, "dtype": "float32", "attrs": )" + attrs + R"(}],
      "arg_nodes": [0], "heads": [1]})";
  };
  using kernels::test_util::ExpectValueError;
  ExpectValueError(
      [&] {
        ParseGraph(graph(R"({"layout": "NCHW", "method": "cubic",
          "coordinate_transformation_mode": "half_pixel", "rounding_method": ""})",
                         "[1, 2, 6, 8]"));
      },
      "cubic");
  ExpectValueError(
      [&] {
        ParseGraph(graph(R"({"layout": "NCHW", "method": "linear",
          "coordinate_transformation_mode": "align_corners", "rounding_method": ""})",
                         "[1, 2, 1, 8]"));
      },
      "divides by zero");
  ExpectValueError(
      [&] {
        ParseGraph(R"({"version": 1, "symbol": "bad", "nodes": [
          {"op": "input", "name": "x", "shape": [1, 2, 3, 4], "dtype": "float32"},
          {"op": "nn.pad", "name": "p", "inputs": [0], "shape": [1, 2, 9, 4], "dtype": "float32",
           "attrs": {"pad_width": [0, 0, 0, 0, 3, 3, 0, 0], "pad_mode": "reflect"}}],
          "arg_nodes": [0], "heads": [1]})");
      },
      "narrower");
  ExpectValueError(
      [&] {
        ParseGraph(graph(R"({"layout": "NCHW", "method": "linear", "rounding": "tflite",
          "coordinate_transformation_mode": "half_pixel", "rounding_method": ""})",
                         "[1, 2, 6, 8]"));
      },
      "int8 tensors bilinearly");
}

}  // namespace
}  // namespace example_npu
