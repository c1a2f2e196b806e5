#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/quantize.h"

namespace example_npu {
namespace kernels {
namespace {

TEST(QuantizeTest, MultiplierReconstructsTheRealScale) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> exponent(-30, 29);
  for (int i = 0; i < 1000; ++i) {
    const double real = std::pow(2.0, exponent(rng));
    FixedPointMultiplier m = QuantizeMultiplier(real);
    EXPECT_GE(m.m0, 1LL << 30);
    EXPECT_LT(m.m0, 1LL << 31);
    EXPECT_NEAR(std::ldexp(static_cast<double>(m.m0), -static_cast<int>(m.shift)), real,
                real * 1e-9);
  }
  EXPECT_EQ(QuantizeMultiplier(0.5).m0, 1LL << 30);
  EXPECT_EQ(QuantizeMultiplier(0.5).shift, 31);
}

TEST(QuantizeTest, RoundHalfEvenMatchesRelax) {
  EXPECT_EQ(RoundHalfEven(2.5), 2);
  EXPECT_EQ(RoundHalfEven(3.5), 4);
  EXPECT_EQ(RoundHalfEven(-2.5), -2);
  EXPECT_EQ(RoundHalfEven(-0.4), 0);
}

TEST(QuantizeTest, RequantizeRoundsHalfUpAndClamps) {
  Requantization r;
  r.multipliers = {QuantizeMultiplier(0.25)};
  r.output_zero_point = 10;
  r.min = -128;
  r.max = 127;
  const std::vector<int64_t> acc = {0, 1, 2, 6, -2, -6, 1000, -1000};
  std::vector<float> out(acc.size());
  Requantize(acc.data(), acc.size(), 1, 0, r, out.data());
  // x * 0.25 rounded half up: 0, 0.25->0, 0.5->1, 1.5->2, -0.5->0, -1.5->-1, 250 -> clamp.
  const std::vector<float> expected = {10, 10, 11, 12, 10, 9, 127, -128};
  EXPECT_EQ(out, expected);
}

TEST(QuantizeTest, PerChannelBiasAndReluClamp) {
  Requantization r;
  r.multipliers = {QuantizeMultiplier(1.0 / 8), QuantizeMultiplier(1.0 / 4)};
  r.bias = {8, -8};
  r.output_zero_point = -3;
  r.min = -3;  // relu: nothing below the zero point
  r.max = 127;
  const std::vector<int64_t> acc = {16, 16, -64, 0};  // [2 pixels, 2 channels]
  std::vector<float> out(4);
  Requantize(acc.data(), 4, 2, 0, r, out.data());
  EXPECT_EQ(out, (std::vector<float>{0, -1, -3, -3}));
  // A tile starting at channel 1 uses channel 1's parameters.
  Requantize(acc.data(), 1, 1, 1, r, out.data());
  EXPECT_EQ(out[0], -1);
}

TEST(QuantizeTest, QuantizedConvMatchesANaiveSum) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> value(-128, 127);
  const Shape in_shape{1, 5, 6, 4}, w_shape{3, 3, 2, 6}, out_shape{1, 3, 6, 6};
  Conv2dParams p;
  p.strides = {2, 1};
  p.padding = {1, 1, 1, 1};
  p.groups = 2;
  p.data_layout = DataLayout::kNHWC;
  p.kernel_layout = KernelLayout::kHWIO;
  std::vector<float> x(NumElements(in_shape)), w(NumElements(w_shape));
  for (float& v : x) v = static_cast<float>(value(rng));
  for (float& v : w) v = static_cast<float>(value(rng));
  std::vector<int64_t> acc(NumElements(out_shape));
  QuantizedConv2d(x.data(), in_shape, 5, w.data(), w_shape, acc.data(), out_shape, p);
  for (int64_t y = 0; y < 3; ++y) {
    for (int64_t xo = 0; xo < 6; ++xo) {
      for (int64_t o = 0; o < 6; ++o) {
        int64_t expected = 0;
        const int64_t g = o / 3;
        for (int64_t ky = 0; ky < 3; ++ky) {
          for (int64_t kx = 0; kx < 3; ++kx) {
            const int64_t iy = y * 2 - 1 + ky, ix = xo - 1 + kx;
            if (iy < 0 || iy >= 5 || ix < 0 || ix >= 6) continue;
            for (int64_t i = 0; i < 2; ++i) {
              const int64_t xv = static_cast<int64_t>(x[(iy * 6 + ix) * 4 + g * 2 + i]) - 5;
              expected += xv * static_cast<int64_t>(w[((ky * 3 + kx) * 2 + i) * 6 + o]);
            }
          }
        }
        EXPECT_EQ(acc[(y * 6 + xo) * 6 + o], expected);
      }
    }
  }
}

TEST(QuantizeTest, QuantizeSaturatesAndDequantizeIsExact) {
  const std::vector<float> x = {0.0185f, -0.0185f, 1e9f, -1e9f, 0.37f};
  std::vector<float> q(x.size()), back(x.size());
  Quantize(x.data(), x.size(), 0.037f, 7, -128, 127, q.data());
  EXPECT_EQ(q, (std::vector<float>{7, 7, 127, -128, 17}));
  Dequantize(q.data(), q.size(), 0.037f, 7, back.data());
  EXPECT_EQ(back[4], 0.037f * 10.0f);
}

}  // namespace
}  // namespace kernels
}  // namespace example_npu
