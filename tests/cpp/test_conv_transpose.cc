/*!
 * \file tests/cpp/test_conv_transpose.cc
 * \brief conv2d_transpose: the phase kernel (float, and its exact integer sums for int8 / uint8 /
 * int16 activations) against the naive scatter definition (every input pixel times every tap,
 * added where it lands), tiled graphs against the whole-tensor kernel,
 * and the cost of the real multiplies only.
 */
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>
#include <vector>

#include "compiler/compiler.h"
#include "graph_test_util.h"
#include "kernels/conv_transpose.h"
#include "test_util.h"

namespace example_npu {
namespace kernels {
namespace {

using test_util::ExpectAllClose;
using test_util::RandomVector;

struct Case {
  Shape in;  // NCHW
  int64_t out_channels;
  int64_t kernel, stride, pad, output_padding, dilation, groups;
};

/*! \brief The definition: out[n, o, y*s - p + ky*d, x*s - p + kx*d] += in[n, i, y, x] * w[i, o',
 * ky, kx]. */
std::vector<double> NaiveTransposed(const std::vector<float>& in, const Case& c,
                                    const std::vector<float>& w, const Shape& out_shape) {
  const int64_t cin = c.in[1], group_in = cin / c.groups, group_out = c.out_channels / c.groups;
  std::vector<double> out(NumElements(out_shape), 0.0);
  for (int64_t n = 0; n < c.in[0]; ++n) {
    for (int64_t i = 0; i < cin; ++i) {
      const int64_t g = i / group_in;
      for (int64_t y = 0; y < c.in[2]; ++y) {
        for (int64_t x = 0; x < c.in[3]; ++x) {
          for (int64_t o = 0; o < group_out; ++o) {
            for (int64_t ky = 0; ky < c.kernel; ++ky) {
              for (int64_t kx = 0; kx < c.kernel; ++kx) {
                const int64_t oy = y * c.stride - c.pad + ky * c.dilation;
                const int64_t ox = x * c.stride - c.pad + kx * c.dilation;
                if (oy < 0 || ox < 0 || oy >= out_shape[2] || ox >= out_shape[3]) continue;
                const int64_t oc = g * group_out + o;
                out[((n * out_shape[1] + oc) * out_shape[2] + oy) * out_shape[3] + ox] +=
                    static_cast<double>(in[((n * cin + i) * c.in[2] + y) * c.in[3] + x]) *
                    w[((i * group_out + o) * c.kernel + ky) * c.kernel + kx];
              }
            }
          }
        }
      }
    }
  }
  return out;
}

Shape OutShape(const Case& c) {
  auto extent = [&](int64_t in) {
    return (in - 1) * c.stride - 2 * c.pad + c.dilation * (c.kernel - 1) + 1 + c.output_padding;
  };
  return {c.in[0], c.out_channels, extent(c.in[2]), extent(c.in[3])};
}

const std::vector<Case> kCases = {
    {{1, 4, 5, 6}, 6, 2, 2, 0, 0, 1, 1},  // U-Net's 2x2 stride-2 upsampling
    {{2, 4, 4, 3}, 6, 3, 2, 1, 1, 1, 2},  // padding, output padding, groups
    {{1, 3, 4, 4}, 5, 3, 2, 1, 0, 2, 1},  // dilation
    {{1, 2, 3, 5}, 4, 4, 3, 1, 2, 1, 1},  // stride 3
    {{1, 4, 5, 5}, 4, 3, 1, 1, 0, 1, 4},  // stride 1, depthwise
    {{1, 2, 4, 4}, 2, 1, 2, 0, 1, 1, 1},  // 1x1 kernel: every other output is 0
};

TEST(ConvTransposeTest, PhasesEqualTheScatterDefinition) {
  std::mt19937 rng(17);
  for (const Case& c : kCases) {
    const Shape w_shape = {c.in[1], c.out_channels / c.groups, c.kernel, c.kernel};
    const std::vector<float> x = RandomVector(NumElements(c.in), &rng);
    const std::vector<float> w = RandomVector(NumElements(w_shape), &rng);
    const Shape out_shape = OutShape(c);
    ConvTransposeParams p;
    p.strides = {c.stride, c.stride};
    p.dilation = {c.dilation, c.dilation};
    p.origin = {c.pad, c.pad};
    p.groups = c.groups;
    std::vector<float> y(NumElements(out_shape), -1.0f);
    Conv2dTranspose(x.data(), c.in, w.data(), w_shape, y.data(), out_shape, p);
    ExpectAllClose(y, NaiveTransposed(x, c, w, out_shape),
                   "conv2d_transpose " + test_util::ShapeToString(c.in), 1e-5, 1e-5);
  }
}

/*! \brief NCHW (or IOHW) data in the NHWC (or HWIO) order of tiles: `axes` (0, 2, 3, 1) or
 * (2, 3, 0, 1). */
template <typename T>
std::vector<T> Reordered(const std::vector<T>& data, const Shape& shape, std::array<int, 4> axes) {
  std::vector<T> out(data.size());
  const Shape to = {shape[axes[0]], shape[axes[1]], shape[axes[2]], shape[axes[3]]};
  std::array<int64_t, 4> index{};
  for (index[0] = 0; index[0] < shape[0]; ++index[0]) {
    for (index[1] = 0; index[1] < shape[1]; ++index[1]) {
      for (index[2] = 0; index[2] < shape[2]; ++index[2]) {
        for (index[3] = 0; index[3] < shape[3]; ++index[3]) {
          const int64_t from =
              ((index[0] * shape[1] + index[1]) * shape[2] + index[2]) * shape[3] + index[3];
          const int64_t at =
              ((index[axes[0]] * to[1] + index[axes[1]]) * to[2] + index[axes[2]]) * to[3] +
              index[axes[3]];
          out[at] = data[from];
        }
      }
    }
  }
  return out;
}

template <typename In>
void ExpectQuantizedEqualsScatter(int64_t zero_point, int64_t low, int64_t high) {
  std::mt19937 rng(23);
  std::uniform_int_distribution<int64_t> activation(low, high), weight_value(-128, 127);
  for (const Case& c : kCases) {
    const Shape w_shape = {c.in[1], c.out_channels / c.groups, c.kernel, c.kernel};
    std::vector<In> x(NumElements(c.in));
    std::vector<int8_t> w(NumElements(w_shape));
    std::vector<float> x_real(x.size()), w_real(w.size());  // exact: |values| < 2^24
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<In>(activation(rng));
      x_real[i] = static_cast<float>(x[i] - zero_point);
    }
    for (size_t i = 0; i < w.size(); ++i) {
      w[i] = static_cast<int8_t>(weight_value(rng));
      w_real[i] = w[i];
    }
    const Shape out_shape = OutShape(c);
    const std::vector<double> expected = NaiveTransposed(x_real, c, w_real, out_shape);
    ConvTransposeParams p;
    p.strides = {c.stride, c.stride};
    p.dilation = {c.dilation, c.dilation};
    p.origin = {c.pad, c.pad};
    p.groups = c.groups;
    p.data_layout = DataLayout::kNHWC;
    p.kernel_layout = TransposedKernelLayout::kHWIO;
    const Shape out_nhwc = {out_shape[0], out_shape[2], out_shape[3], out_shape[1]};
    const std::vector<In> x_nhwc = Reordered(x, c.in, {0, 2, 3, 1});
    const std::vector<int8_t> w_hwio = Reordered(w, w_shape, {2, 3, 0, 1});
    // Accumulating onto a first pass doubles every sum.
    std::vector<int64_t> acc(NumElements(out_shape), 12345);
    for (bool accumulate : {false, true}) {
      QuantizedConv2dTranspose(x_nhwc.data(), {c.in[0], c.in[2], c.in[3], c.in[1]}, zero_point,
                               w_hwio.data(), {c.kernel, c.kernel, c.in[1], w_shape[1]}, acc.data(),
                               out_nhwc, p, accumulate);
    }
    const std::vector<double> expected_nhwc = Reordered(expected, out_shape, {0, 2, 3, 1});
    for (size_t i = 0; i < acc.size(); ++i) {
      ASSERT_EQ(acc[i], 2 * static_cast<int64_t>(expected_nhwc[i]))
          << "quantized conv2d_transpose " << test_util::ShapeToString(c.in) << " at " << i;
    }
  }
}

TEST(ConvTransposeTest, QuantizedSumsAreTheExactIntegerScatter) {
  ExpectQuantizedEqualsScatter<int8_t>(-7, -128, 127);
  ExpectQuantizedEqualsScatter<uint8_t>(131, 0, 255);
  ExpectQuantizedEqualsScatter<int16_t>(25, -32768, 32767);
}

TEST(ConvTransposeTest, PhasesCountOnlyRealTaps) {
  // A 2x2 stride-2 kernel: four phases, one tap each; a 3x3 stride-2 one: 4 + 2 + 2 + 1 taps.
  ConvTransposeParams p;
  p.strides = {2, 2};
  int64_t taps = 0, pixels = 0;
  for (const TransposedPhase& phase : TransposedPhases(p, 8, 8, 2, 2)) {
    EXPECT_EQ(phase.taps, 1);
    pixels += phase.pixels;
  }
  EXPECT_EQ(pixels, 64);
  for (const TransposedPhase& phase : TransposedPhases(p, 8, 8, 3, 3)) taps += phase.taps;
  EXPECT_EQ(taps, 9);
}

}  // namespace
}  // namespace kernels

namespace {

std::string TransposedGraph(const kernels::Case& c) {
  const Shape out = kernels::OutShape(c);
  auto list = [](const Shape& s) {
    std::string text = "[";
    for (size_t i = 0; i < s.size(); ++i) text += (i ? ", " : "") + std::to_string(s[i]);
    return text + "]";
  };
  const Shape w = {c.in[1], c.out_channels / c.groups, c.kernel, c.kernel};
  const std::string p = std::to_string(c.pad), s = std::to_string(c.stride),
                    d = std::to_string(c.dilation), op = std::to_string(c.output_padding);
  return R"({"version": 1, "symbol": "ct", "nodes": [
    {"op": "input", "name": "x", "shape": )" +
         list(c.in) + R"(, "dtype": "float32"},
    {"op": "const", "name": "w", "shape": )" +
         list(w) + R"(, "dtype": "float32"},
    {"op": "const", "name": "b", "shape": [1, )" +
         std::to_string(c.out_channels) + R"(, 1, 1], "dtype": "float32"},
    {"op": "nn.conv2d_transpose", "name": "up", "inputs": [0, 1], "shape": )" +
         list(out) + R"(, "dtype": "float32", "attrs": {"strides": [)" + s + ", " + s +
         R"(], "padding": [)" + p + ", " + p + ", " + p + ", " + p + R"(], "output_padding": [)" +
         op + ", " + op + R"(], "dilation": [)" + d + ", " + d + R"(], "groups": )" +
         std::to_string(c.groups) +
         R"(, "data_layout": "NCHW", "kernel_layout": "IOHW", "out_layout": "NCHW"}},
    {"op": "add", "name": "bias", "inputs": [3, 2], "shape": )" +
         list(out) + R"(, "dtype": "float32"},
    {"op": "nn.leakyrelu", "name": "act", "inputs": [4], "shape": )" +
         list(out) + R"(, "dtype": "float32", "attrs": {"alpha": 0.1}}],
    "arg_nodes": [0], "heads": [5]})";
}

TEST(ConvTransposeGraphTest, TiledPhasesMatchTheWholeTensorKernel) {
  NPUConfig tiny;
  tiny.l1_sram_kb = 4;
  for (const kernels::Case& c : kernels::kCases) {
    const Graph graph = ParseGraph(TransposedGraph(c));
    const auto inputs = test_util::RandomTensors(graph, graph.arg_nodes, 1);
    const auto consts = test_util::RandomTensors(graph, graph.ConstNodes(), 2);
    const std::vector<float> expected = test_util::Untiled(graph, inputs, consts)[graph.heads[0]];
    for (const NPUConfig& config : {NPUConfig(), tiny}) {
      const Program program = Compile(graph, config);
      // The bias and leaky ReLU run on the accumulator tile: one group.
      EXPECT_EQ(program.groups.size(), 1u);
      kernels::test_util::ExpectAllClose(test_util::Emulated(program, inputs, consts), expected,
                                         "tiled conv2d_transpose", 1e-5, 1e-5);
    }
  }
}

TEST(ConvTransposeGraphTest, MatrixCyclesCountPhasesNotTheZeroDilatedConvolution) {
  // A 2x2 stride-2 upsampling of 64 channels: each output pixel has one tap, so the phases do a
  // quarter of the MACs of the dilated 2x2 convolution over the zero-stuffed input.
  const kernels::Case c{{1, 64, 16, 16}, 64, 2, 2, 0, 0, 1, 1};
  const Program program = Compile(ParseGraph(TransposedGraph(c)), NPUConfig());
  int64_t macs = 0;
  for (const Command& command : program.commands) {
    if (!command.is_dma() && command.compute().engine == Engine::kMatrix)
      macs += command.compute().macs;
  }
  EXPECT_EQ(macs, 32 * 32 * 64 * 64);  // outputs x channels x one tap x input channels
}

}  // namespace
}  // namespace example_npu
