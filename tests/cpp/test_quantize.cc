#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/quantize.h"
#include "kernels/quantized_depthwise.h"
#include "kernels/requantize_sums.h"
#include "kernels/tflite_arithmetic.h"

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

TEST(QuantizeTest, TfliteSingleRoundingIsFullyConnectedsOneRounding) {
  // LiteRT's reference FULLY_CONNECTED: (x * m0 + 2^(shift-1)) >> shift, one rounding half up.
  // 968 * 0.00154895... = 1.49941: one rounding gives 1, MultiplyByQuantizedMultiplier's two
  // (to 2^-31 first: 767.7 -> 768, then 768 / 512 = 1.5 -> 2) give 2.
  Requantization r;
  r.multipliers = {QuantizeMultiplier(0.0015489541328480407)};
  r.rounding = Rounding::kTflite;
  const std::vector<int64_t> acc = {968};
  float out = 0;
  Requantize(acc.data(), 1, 1, 0, r, &out);
  EXPECT_EQ(out, 2);
  r.single_rounding = true;
  Requantize(acc.data(), 1, 1, 0, r, &out);
  EXPECT_EQ(out, 1);
  // Against the exact rational rounding half up, over signed accumulators and multipliers.
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> value(-(int64_t{1} << 24), int64_t{1} << 24);
  std::uniform_real_distribution<double> real(1e-5, 0.9);
  for (int trial = 0; trial < 2000; ++trial) {
    r.multipliers = {QuantizeMultiplier(real(rng))};
    r.min = std::numeric_limits<int32_t>::min();
    r.max = std::numeric_limits<int32_t>::max();
    const int64_t x = value(rng);
    Requantize(&x, 1, 1, 0, r, &out);
    const FixedPointMultiplier& m = r.multipliers[0];
    const __int128 product = static_cast<__int128>(x) * m.m0;
    const __int128 half = static_cast<__int128>(1) << (m.shift - 1);
    const __int128 scale = static_cast<__int128>(1) << m.shift;
    __int128 expected = (product + half) / scale;  // toward zero, then fixed to the floor
    if ((product + half) % scale != 0 && product + half < 0) expected -= 1;
    ASSERT_EQ(static_cast<int64_t>(out), static_cast<int64_t>(expected)) << x;
  }
}

/*! \brief One output of Requantize from its definition: the checked scalar TFLite multiply or
 * the exact 128-bit rounding, element by element. */
int64_t NaiveRequantized(int64_t acc, int64_t channel, const Requantization& r) {
  const FixedPointMultiplier& m = r.multipliers[r.multipliers.size() > 1 ? channel : 0];
  const int64_t value = acc + (r.bias.empty() ? 0 : r.bias[channel]);
  int64_t scaled = ScaleRounded(value, m);
  if (r.rounding == Rounding::kTflite && !r.single_rounding) {
    scaled = tflite::MultiplyByQuantizedMultiplier(value, m);
  }
  return std::clamp(r.output_zero_point + scaled, r.min, r.max);
}

TEST(QuantizeTest, RequantizeMatchesTheElementwiseDefinitionOnEveryTileShape) {
  // The kernel repeats the channel parameters over rows and vectorises whole periods: tiles of
  // few and many channels, channel offsets, per-tensor and per-channel multipliers, both
  // roundings and accumulators beyond 32 bits (int16 activations) must all agree with it.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> real(1e-4, 0.9);
  std::uniform_int_distribution<int64_t> narrow(-(int64_t{1} << 20), int64_t{1} << 20);
  std::uniform_int_distribution<int64_t> wide(-(int64_t{1} << 40), int64_t{1} << 40);
  for (const int64_t channels : {1, 3, 8, 16, 17, 40, 64, 100}) {
    for (const int64_t rows : {1, 2, 5, 33}) {
      for (int variant = 0; variant < 6; ++variant) {
        const int64_t offset = variant % 2 ? 4 : 0;
        Requantization r;
        r.rounding = variant < 4 ? Rounding::kTflite : Rounding::kTvm;
        r.single_rounding = variant >= 2 && variant < 4;
        const int64_t total = offset + channels;
        for (int64_t c = 0; c < (variant % 3 == 0 ? 1 : total); ++c) {
          r.multipliers.push_back(QuantizeMultiplier(real(rng)));
        }
        for (int64_t c = 0; c < total; ++c) r.bias.push_back(narrow(rng));
        r.output_zero_point = variant - 3;
        r.min = -100 + variant;
        r.max = 120;
        std::vector<int64_t> acc(static_cast<size_t>(rows * channels));
        for (int64_t& a : acc) a = variant == 5 ? wide(rng) : narrow(rng);
        std::vector<float> out(acc.size());
        Requantize(acc.data(), static_cast<int64_t>(acc.size()), channels, offset, r, out.data());
        for (size_t i = 0; i < acc.size(); ++i) {
          const int64_t channel = offset + static_cast<int64_t>(i) % channels;
          ASSERT_EQ(static_cast<int64_t>(out[i]), NaiveRequantized(acc[i], channel, r))
              << channels << " channels, " << rows << " rows, variant " << variant << ", at " << i;
        }
      }
    }
  }
}

/*! \brief The quantized convolution summed straight from its definition (NHWC / HWIO). */
template <typename T>
std::vector<int64_t> NaiveQuantizedConv(const std::vector<T>& x, const Shape& in_shape, int64_t zp,
                                        const std::vector<int8_t>& w, const Shape& w_shape,
                                        const Shape& out_shape, const Conv2dParams& p) {
  const int64_t h = in_shape[1], wd = in_shape[2], c = in_shape[3];
  const int64_t kh = w_shape[0], kw = w_shape[1], ci = w_shape[2], co = w_shape[3];
  std::vector<int64_t> out(NumElements(out_shape));
  for (int64_t n = 0; n < out_shape[0]; ++n) {
    for (int64_t y = 0; y < out_shape[1]; ++y) {
      for (int64_t xo = 0; xo < out_shape[2]; ++xo) {
        for (int64_t o = 0; o < co; ++o) {
          const int64_t g = o / (co / p.groups);
          int64_t sum = 0;
          for (int64_t ky = 0; ky < kh; ++ky) {
            for (int64_t kx = 0; kx < kw; ++kx) {
              const int64_t iy = y * p.strides[0] - p.padding[0] + ky * p.dilation[0];
              const int64_t ix = xo * p.strides[1] - p.padding[1] + kx * p.dilation[1];
              if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
              for (int64_t i = 0; i < ci; ++i) {
                sum += (int64_t{x[((n * h + iy) * wd + ix) * c + g * ci + i]} - zp) *
                       w[((ky * kw + kx) * ci + i) * co + o];
              }
            }
          }
          out[((n * out_shape[1] + y) * out_shape[2] + xo) * co + o] = sum;
        }
      }
    }
  }
  return out;
}

/*! \brief Seeded integers over T's whole range, with the extremes planted. */
template <typename T>
std::vector<T> RandomIntegers(int64_t size, std::mt19937* rng) {
  std::uniform_int_distribution<int> value(std::numeric_limits<T>::min(),
                                           std::numeric_limits<T>::max());
  std::vector<T> v(size);
  for (int64_t i = 0; i < size; ++i) {
    v[i] = i % 11 == 0 ? std::numeric_limits<T>::min()
                       : (i % 13 == 0 ? std::numeric_limits<T>::max() : value(*rng));
  }
  return v;
}

/*!
 * \brief Requantizations of `channels` channels in every rounding a kernel fuses: TVM's exact
 * rounding (one channel's bias beyond 2^31, so some values take the wide rounding), TFLite's
 * double rounding (per channel, and per tensor without a bias and with a multiplier above 1),
 * TFLite's single rounding.
 */
std::vector<Requantization> FusableRequantizations(int64_t channels, std::mt19937* rng) {
  std::uniform_real_distribution<double> scale(1e-4, 2e-2);
  std::uniform_int_distribution<int64_t> bias(-50000, 50000);
  Requantization per_channel;
  for (int64_t c = 0; c < channels; ++c) {
    per_channel.multipliers.push_back(QuantizeMultiplier(scale(*rng)));
    per_channel.bias.push_back(bias(*rng));
  }
  per_channel.output_zero_point = -7;
  per_channel.min = -7;  // a fused relu
  per_channel.max = 127;
  Requantization tvm = per_channel;
  tvm.bias[channels / 2] = (int64_t{1} << 33) + 5;
  tvm.max = 300;  // 16-bit-like range: clamps past int8
  Requantization tflite = per_channel;
  tflite.rounding = Rounding::kTflite;
  Requantization per_tensor;  // a multiplier above 1: TFLite's left shift
  per_tensor.multipliers = {QuantizeMultiplier(1.5 + scale(*rng))};
  per_tensor.rounding = Rounding::kTflite;
  per_tensor.output_zero_point = 3;
  Requantization single = tflite;
  single.single_rounding = true;
  single.output_zero_point = 120;  // a uint8 output
  single.min = 0;
  single.max = 255;
  return {tvm, tflite, per_tensor, single};
}

/*!
 * \brief `run(to)` with `to` requantizing (the kernel's fused path) gives Requantize of the
 * exact accumulators `expected`, for every fusable requantization.
 */
template <typename Run>
void ExpectFusedRequantization(const std::vector<int64_t>& expected, int64_t channels,
                               std::mt19937* rng, const std::string& what, Run run) {
  const int64_t size = static_cast<int64_t>(expected.size());
  for (const Requantization& r : FusableRequantizations(channels, rng)) {
    std::vector<float> want(expected.size()), got(expected.size(), -1000.0f);
    RequantizeElementwise(expected.data(), size, channels, 0, r, want.data());
    const PreparedRequantization prepared(r, channels);
    const std::string settings =
        what + ", rounding " + std::to_string(static_cast<int>(r.rounding)) + " single " +
        std::to_string(r.single_rounding) + " multipliers " + std::to_string(r.multipliers.size());
    run(SumsOut{nullptr, false, &prepared, got.data()});
    EXPECT_EQ(got, want) << settings;
    // Written as the output integers themselves, where their range holds the clamp's.
    auto expect_integers = [&](auto zero, SumsType type) {
      using T = decltype(zero);
      if (r.min < std::numeric_limits<T>::min() || r.max > std::numeric_limits<T>::max()) return;
      std::vector<T> integers(expected.size(), T{99});
      run(SumsOut{nullptr, false, &prepared, integers.data(), type});
      EXPECT_EQ(std::vector<float>(integers.begin(), integers.end()), want)
          << settings << ", " << sizeof(T) * 8 << "-bit output";
    };
    expect_integers(int8_t{0}, SumsType::kInt8);
    expect_integers(uint8_t{0}, SumsType::kUInt8);
    expect_integers(int16_t{0}, SumsType::kInt16);
  }
}

struct QConvCase {
  int64_t n, h, w, c, kh, kw, co;
  std::array<int64_t, 2> strides;
  std::array<int64_t, 4> padding;
  std::array<int64_t, 2> dilation;
  int64_t groups;
};

template <typename T>
void CheckQuantizedConv(const QConvCase& k, int64_t zp, std::mt19937* rng) {
  Conv2dParams p;
  p.strides = k.strides;
  p.padding = k.padding;
  p.dilation = k.dilation;
  p.groups = k.groups;
  p.data_layout = DataLayout::kNHWC;
  p.kernel_layout = KernelLayout::kHWIO;
  const int64_t oh =
      (k.h + k.padding[0] + k.padding[2] - (k.kh - 1) * k.dilation[0] - 1) / k.strides[0] + 1;
  const int64_t ow =
      (k.w + k.padding[1] + k.padding[3] - (k.kw - 1) * k.dilation[1] - 1) / k.strides[1] + 1;
  const Shape in_shape{k.n, k.h, k.w, k.c}, w_shape{k.kh, k.kw, k.c / k.groups, k.co};
  const Shape out_shape{k.n, oh, ow, k.co};
  const std::vector<T> x = RandomIntegers<T>(NumElements(in_shape), rng);
  const std::vector<int8_t> w = RandomIntegers<int8_t>(NumElements(w_shape), rng);
  const std::vector<int64_t> expected =
      NaiveQuantizedConv(x, in_shape, zp, w, w_shape, out_shape, p);
  std::vector<int64_t> acc(expected.size());
  QuantizedConv2d(x.data(), in_shape, zp, w.data(), w_shape, SumsOut{acc.data(), false}, out_shape,
                  p);
  EXPECT_EQ(acc, expected) << sizeof(T) * 8 << "-bit, zp " << zp << ", C" << k.c << " O" << k.co
                           << " g" << k.groups;
  // Accumulating adds the same sums onto what is there.
  std::vector<int64_t> twice = expected;
  for (int64_t& v : twice) v *= 2;
  QuantizedConv2d(x.data(), in_shape, zp, w.data(), w_shape, SumsOut{acc.data(), true}, out_shape,
                  p);
  EXPECT_EQ(acc, twice);
  const std::string what = std::to_string(sizeof(T) * 8) + "-bit conv, zp " + std::to_string(zp) +
                           ", C" + std::to_string(k.c) + " O" + std::to_string(k.co) + " g" +
                           std::to_string(k.groups);
  ExpectFusedRequantization(expected, k.co, rng, what, [&](const SumsOut& to) {
    QuantizedConv2d(x.data(), in_shape, zp, w.data(), w_shape, to, out_shape, p);
  });
  // With the weights' packing kept: packed on the first call, reused on the second.
  WeightPackCache packs;
  for (int call = 0; call < 2; ++call) {
    QuantizedConv2d(x.data(), in_shape, zp, w.data(), w_shape, SumsOut{acc.data(), false},
                    out_shape, p, &packs);
    EXPECT_EQ(acc, expected) << "kept packing, call " << call << ", C" << k.c << " O" << k.co;
  }
  // The input as a box of a larger tensor (3 more channels on each side, 2 more pixels per row,
  // 1 more row per image), read where it lies: what the emulator passes for a tile of a tensor in
  // DRAM. The values around the box would change any sum that read them.
  const PixelStrides wide{(k.h + 1) * (k.w + 2) * (k.c + 6), (k.w + 2) * (k.c + 6), k.c + 6};
  std::vector<T> tensor(static_cast<size_t>(k.n * wide.batch), std::numeric_limits<T>::max());
  const PixelStrides dense = DensePixelStrides(in_shape);
  for (int64_t y = 0; y < k.n * k.h; ++y) {
    for (int64_t x0 = 0; x0 < k.w; ++x0) {
      std::copy_n(x.data() + y * dense.row + x0 * dense.pixel, k.c,
                  tensor.data() + y / k.h * wide.batch + (y % k.h + 1) * wide.row +
                      (x0 + 1) * wide.pixel + 3);
    }
  }
  const T* box = tensor.data() + wide.row + wide.pixel + 3;
  QuantizedConv2d(box, in_shape, zp, w.data(), w_shape, SumsOut{acc.data(), false}, out_shape, p,
                  nullptr, &wide);
  EXPECT_EQ(acc, expected) << "a box of a larger tensor, " << what;
  if constexpr (sizeof(T) == 1) {
    if (!IsQuantizedDepthwise(in_shape, zp, w_shape, out_shape, p)) return;
    QuantizedDepthwise(box, in_shape, zp, w.data(), w_shape, SumsOut{acc.data(), false}, out_shape,
                       p, /*portable=*/true, nullptr, &wide);
    EXPECT_EQ(acc, expected) << "portable, a box of a larger tensor, " << what;
    // The depthwise kernel's portable loop, which CPUs without AVX2 run.
    QuantizedDepthwise(x.data(), in_shape, zp, w.data(), w_shape, SumsOut{acc.data(), false},
                       out_shape, p, /*portable=*/true);
    EXPECT_EQ(acc, expected) << "portable, zp " << zp << ", C" << k.c;
    QuantizedDepthwise(x.data(), in_shape, zp, w.data(), w_shape, SumsOut{acc.data(), true},
                       out_shape, p, /*portable=*/true);
    EXPECT_EQ(acc, twice) << "portable, zp " << zp << ", C" << k.c;
    ExpectFusedRequantization(expected, k.co, rng, "portable " + what, [&](const SumsOut& to) {
      QuantizedDepthwise(x.data(), in_shape, zp, w.data(), w_shape, to, out_shape, p,
                         /*portable=*/true);
    });
  }
}

TEST(QuantizeTest, QuantizedConvMatchesANaiveSumForEveryDtype) {
  std::mt19937 rng(9);
  const std::vector<QConvCase> cases = {
      {1, 5, 6, 4, 3, 3, 6, {2, 1}, {1, 1, 1, 1}, {1, 1}, 2},    // grouped, strided
      {1, 7, 9, 64, 3, 3, 16, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},  // a ResNet tile
      {2, 6, 5, 3, 3, 3, 33, {1, 1}, {0, 2, 1, 0}, {1, 1}, 1},   // 3 channels, odd outputs
      {1, 9, 8, 13, 3, 2, 17, {2, 3}, {2, 0, 0, 1}, {2, 1}, 1},  // dilated, asymmetric
      {1, 6, 6, 8, 3, 3, 8, {1, 1}, {1, 1, 1, 1}, {1, 1}, 8},    // depthwise
      {1, 4, 4, 20, 1, 1, 40, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2},  // pointwise, two groups of 20
      {1, 5, 5, 70, 3, 3, 16, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},  // a pixel longer than a vector
      // Whole 4-byte groups of channels, one group: each input row copied at once.
      {1, 6, 7, 8, 3, 3, 16, {1, 1}, {0, 2, 1, 1}, {1, 1}, 1},
      {2, 5, 4, 12, 3, 3, 20, {2, 1}, {1, 0, 2, 3}, {1, 1}, 1},
      // Output rows of 20 pixels: blocks of 16 along a row are evenly spaced (read in place by
      // AMX's tile loads), the others gathered; with a stride too.
      {1, 3, 20, 64, 3, 3, 16, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {1, 5, 40, 64, 3, 3, 32, {1, 2}, {1, 1, 1, 1}, {1, 1}, 1},
      // Pointwise: a matmul of the pixels read in place (channels in whole groups of four) or
      // copied (channels not), with channels below, at and beyond one 64-byte vector.
      {1, 4, 5, 16, 1, 1, 24, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {2, 3, 3, 24, 1, 1, 8, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {1, 3, 4, 6, 1, 1, 17, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {1, 2, 3, 72, 1, 1, 16, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {1, 2, 2, 130, 1, 1, 33, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {1, 5, 5, 16, 1, 1, 16, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},  // strided: not a plain matmul
      // A first layer's 1 to 3 channels, rows of whole sixteen-pixel blocks and a tail.
      {1, 4, 37, 3, 3, 3, 8, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1},
      {1, 3, 20, 1, 3, 3, 5, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {1, 3, 18, 2, 3, 3, 4, {1, 1}, {0, 1, 0, 1}, {1, 1}, 1},
  };
  for (const QConvCase& k : cases) {
    for (int64_t zp : {-128, -3, 0, 127}) CheckQuantizedConv<int8_t>(k, zp, &rng);
    for (int64_t zp : {0, 128, 255}) CheckQuantizedConv<uint8_t>(k, zp, &rng);
    for (int64_t zp : {-32768, 0, 1234}) CheckQuantizedConv<int16_t>(k, zp, &rng);
  }
}

TEST(QuantizeTest, QuantizedDepthwiseMatchesANaiveSum) {
  // Channel counts around the 16-channel vector, rows with and without blocks of four (or eight)
  // interior pixels, edges where only some taps are in bounds, strides, dilation, asymmetric
  // padding.
  std::mt19937 rng(11);
  const std::vector<QConvCase> cases = {
      {1, 9, 13, 37, 3, 3, 37, {1, 1}, {1, 1, 1, 1}, {1, 1}, 37},
      {1, 6, 9, 29, 3, 3, 29, {1, 1}, {1, 1, 1, 1}, {1, 1}, 29},  // 16 + 8 + 5 channels
      {2, 8, 11, 16, 3, 3, 16, {2, 2}, {0, 0, 1, 1}, {1, 1}, 16},
      {1, 7, 20, 5, 5, 5, 5, {1, 2}, {2, 2, 2, 2}, {1, 1}, 5},
      {1, 12, 17, 33, 3, 3, 33, {1, 1}, {2, 3, 0, 1}, {2, 2}, 33},
      {1, 3, 4, 64, 3, 3, 64, {1, 1}, {4, 5, 4, 5}, {1, 1}, 64},   // padding wider than the input
      {1, 25, 5, 64, 3, 3, 64, {1, 1}, {1, 1, 1, 1}, {1, 1}, 64},  // a keyword-spotting layer
      {1, 6, 30, 1, 1, 7, 1, {1, 1}, {0, 3, 0, 3}, {1, 1}, 1},
      // Interior rows by kernel rows: blocks of eight pixels and a tail of six, or one.
      {1, 5, 22, 48, 3, 3, 48, {1, 1}, {1, 1, 1, 1}, {1, 1}, 48},
      {1, 6, 11, 20, 3, 3, 20, {1, 1}, {1, 0, 1, 0}, {1, 1}, 20},
  };
  for (const QConvCase& k : cases) {
    for (int64_t zp : {-128, -3, 0, 127}) CheckQuantizedConv<int8_t>(k, zp, &rng);
    for (int64_t zp : {0, 128, 255}) CheckQuantizedConv<uint8_t>(k, zp, &rng);
  }
}

template <typename T>
void CheckQuantizedMatmul(int64_t m, int64_t k, int64_t n, int64_t zp, std::mt19937* rng) {
  const std::vector<T> a = RandomIntegers<T>(m * k, rng);
  const std::vector<int8_t> b = RandomIntegers<int8_t>(k * n, rng);
  std::vector<int64_t> expected(m * n, 7), acc(m * n, 7);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; ++p)
        expected[i * n + j] += (int64_t{a[i * k + p]} - zp) * b[p * n + j];
    }
  }
  QuantizedMatmul(a.data(), zp, b.data(), m, k, n, SumsOut{acc.data(), true});
  EXPECT_EQ(acc, expected) << sizeof(T) * 8 << "-bit " << m << "x" << k << "x" << n << " zp " << zp;
  WeightPackCache packs;
  for (int call = 0; call < 2; ++call) {
    std::fill(acc.begin(), acc.end(), 7);
    QuantizedMatmul(a.data(), zp, b.data(), m, k, n, SumsOut{acc.data(), true}, &packs);
    EXPECT_EQ(acc, expected) << "kept packing, call " << call;
  }
  // The same weight as columns 3 to n + 2 of a wider matrix, its rows n + 5 apart.
  std::vector<int8_t> wide(k * (n + 5), 99);
  for (int64_t p = 0; p < k; ++p) std::copy_n(b.data() + p * n, n, wide.data() + p * (n + 5) + 3);
  std::fill(acc.begin(), acc.end(), 7);
  QuantizedMatmul(a.data(), zp, wide.data() + 3, m, k, n, SumsOut{acc.data(), true}, &packs, n + 5);
  EXPECT_EQ(acc, expected) << "a slice of a wider weight";
  for (int64_t& v : expected) v -= 7;  // the sums alone
  const std::string what = std::to_string(sizeof(T) * 8) + "-bit matmul " + std::to_string(m) +
                           "x" + std::to_string(k) + "x" + std::to_string(n) + " zp " +
                           std::to_string(zp);
  ExpectFusedRequantization(expected, n, rng, what, [&](const SumsOut& to) {
    QuantizedMatmul(a.data(), zp, b.data(), m, k, n, to);
  });
}

TEST(QuantizeTest, QuantizedMatmulMatchesANaiveSumForEveryDtype) {
  std::mt19937 rng(10);
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{
           {1, 1, 1},
           {3, 5, 7},
           {13, 17, 16},
           {25, 64, 33},
           {64, 256, 32},
           {7, 301, 50},
           // Pointwise layers' few channels: row terms from eight-byte sums (one, two or seven
           // per row), four-byte sums, or B's padding column.
           {37, 8, 48},
           {29, 16, 32},
           {40, 56, 64},
           {19, 12, 16},
           {21, 24, 8}}) {
    for (int64_t zp : {-128, 5, 127}) CheckQuantizedMatmul<int8_t>(m, k, n, zp, &rng);
    for (int64_t zp : {0, 128, 255}) CheckQuantizedMatmul<uint8_t>(m, k, n, zp, &rng);
    for (int64_t zp : {-32768, 0, 32767}) CheckQuantizedMatmul<int16_t>(m, k, n, zp, &rng);
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
