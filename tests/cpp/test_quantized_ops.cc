// Quantized glue-op kernels (kernels/quantized_ops.h) against naive references that take TVM's
// float32 steps one element at a time (dequantize, op, divide, round half to even), and against
// the real-valued formulas they approximate (within half a step plus float32's error).
#include <gtest/gtest.h>
#include <tvm/ffi/error.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/quantized_ops.h"
#include "test_util.h"

namespace example_npu {
namespace kernels {
namespace {

using test_util::Ravel;
using test_util::Unravel;

std::vector<float> RandomInts(int64_t n, int lo, int hi, std::mt19937* rng) {
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(dist(*rng));
  return v;
}

/*! \brief TVM's dequantize: the integer difference as float32, times the float32 scale. */
float Dequantized(int64_t q, int64_t zero_point, double scale) {
  return static_cast<float>(q - zero_point) * static_cast<float>(scale);
}

/*! \brief TVM's quantize: value / scale in float32, rounded half to even, zero point, clamp. */
float Quantized(float value, double scale, const QuantizedOutput& out) {
  const float steps = std::nearbyint(value / static_cast<float>(scale));
  return std::clamp(steps + static_cast<float>(out.zero_point), static_cast<float>(out.min),
                    static_cast<float>(out.max));
}

TEST(QuantizedOpsTest, RequantizeTakesTvmsFloat32Steps) {
  std::mt19937 rng(1);
  const QuantizedOutput out{5, -128, 127};
  const RequantizeParams p = MakeRequantizeParams(0.05, -3, 0.07, out);
  const std::vector<float> x = RandomInts(500, -128, 127, &rng);
  std::vector<float> y(x.size());
  Requantize(x.data(), x.size(), p, y.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t q = static_cast<int64_t>(x[i]);
    EXPECT_EQ(y[i], Quantized(Dequantized(q, -3, 0.05), 0.07, out)) << i;
    const double real = 5 + (q + 3) * 0.05 / 0.07;
    if (real > -127 && real < 126) EXPECT_LE(std::abs(y[i] - real), 0.5 + 1e-5) << i;
  }
  // Halving the scale makes every odd input a tie: TVM's quantize rounds it to even.
  const std::vector<float> odd = {1, 3, 5, -1, -3, -5};
  std::vector<float> halved(odd.size());
  Requantize(odd.data(), odd.size(), MakeRequantizeParams(0.25, 0, 0.5, {0, -128, 127}),
             halved.data());
  EXPECT_EQ(halved, (std::vector<float>{0, 2, 2, 0, -2, -2}));
  EXPECT_TRUE(
      IsIdentity(MakeRequantizeParams(0.1, 4, 0.1, QuantizedOutput{4, -128, 127}), -128, 127));
  EXPECT_FALSE(
      IsIdentity(MakeRequantizeParams(0.1, 4, 0.1, QuantizedOutput{4, 4, 127}), -128, 127));
}

TEST(QuantizedOpsTest, AddTakesTvmsFloat32StepsWithBroadcasting) {
  std::mt19937 rng(2);
  struct Case {
    double lhs_scale, rhs_scale, out_scale;
    int lo, hi;  // the operands' dtype range
    QuantizedOutput out;
  };
  const std::vector<Case> cases = {
      {0.031, 0.0042, 0.04, -128, 127, {-7, -128, 127}},
      {0.5, 0.25, 1.0, -128, 127, {0, -128, 127}},  // exact halves: ties round to even
      {0.125, 0.5, 1.0, -128, 127, {0, -128, 127}},
      {0.0042, 0.031, 0.04, -128, 127, {-7, -128, 127}},  // the larger shift on the left
      {1e-6, 0.5, 0.3, 0, 255, {128, 0, 255}},            // scales 2^19 apart, uint8
      {0.5, 3e-7, 0.01, 0, 255, {3, 0, 255}},
      {0.013, 0.013, 0.013, -32768, 32767, {0, -32768, 32767}},  // int16 extremes
      {2.0, 1e-4, 1e-3, -32768, 32767, {-5, -32768, 32767}},
  };
  // Contiguous, broadcast row, broadcast scalar on either side.
  const std::vector<std::array<Shape, 2>> shapes = {
      {Shape{2, 3, 4, 5}, Shape{3, 1, 5}},
      {Shape{2, 3, 4, 5}, Shape{2, 3, 4, 5}},
      {Shape{1}, Shape{2, 3, 4, 5}},
      {Shape{2, 3, 4, 5}, Shape{2, 3, 4, 1}},
  };
  for (const Case& c : cases) {
    std::uniform_int_distribution<int> zero_point(c.lo, c.hi);
    const int64_t za = zero_point(rng), zb = zero_point(rng);
    const QuantizedBinaryParams p = MakeQuantizedBinaryParams(
        QuantizedBinaryKind::kAdd, c.lhs_scale, za, c.rhs_scale, zb, c.out_scale, c.out);
    for (const auto& [a_shape, b_shape] : shapes) {
      const Shape out_shape{2, 3, 4, 5};
      const std::vector<float> a = RandomInts(NumElements(a_shape), c.lo, c.hi, &rng);
      const std::vector<float> b = RandomInts(NumElements(b_shape), c.lo, c.hi, &rng);
      std::vector<float> y(NumElements(out_shape));
      QuantizedBinary(a.data(), a_shape, b.data(), b_shape, y.data(), out_shape, p);
      for (int64_t i = 0; i < NumElements(out_shape); ++i) {
        const auto idx = Unravel(i, out_shape);
        auto at = [&](const std::vector<float>& v, const Shape& s) {
          std::vector<int64_t> pos(s.size());
          for (size_t d = 0; d < s.size(); ++d) {
            pos[d] = s[d] == 1 ? 0 : idx[idx.size() - s.size() + d];
          }
          return static_cast<int64_t>(v[Ravel(pos, s)]);
        };
        const int64_t av = at(a, a_shape), bv = at(b, b_shape);
        const float sum = Dequantized(av, za, c.lhs_scale) + Dequantized(bv, zb, c.rhs_scale);
        ASSERT_EQ(y[i], Quantized(sum, c.out_scale, c.out))
            << "scales " << c.lhs_scale << ", " << c.rhs_scale;
        const double ta = c.lhs_scale * (av - za) / c.out_scale;
        const double tb = c.rhs_scale * (bv - zb) / c.out_scale;
        const double real = c.out.zero_point + ta + tb;
        // Half a step plus float32's error in each product, the sum and the division.
        if (real > c.out.min + 1 && real < c.out.max - 1) {
          EXPECT_LE(std::abs(y[i] - real), 0.5 + 1e-6 * (std::abs(ta) + std::abs(tb)) + 1e-6) << i;
        }
      }
    }
  }
}

TEST(QuantizedOpsTest, Float32OverflowClampsInsteadOfNarrowingANaN) {
  // Scales near float32's limit: D(127) and D(-128) overflow to +inf and -inf, their sum is NaN
  // (the lowest value); two +inf, or 3e38 + 3e38 (past float32's range), clamp to the highest.
  const QuantizedBinaryParams p =
      MakeQuantizedBinaryParams(QuantizedBinaryKind::kAdd, 3e38, 0, 3e38, 0, 3e38, {0, -128, 127});
  const std::vector<float> a = {127, 127, 1}, b = {-128, 127, 1};
  std::vector<float> y(3);
  QuantizedBinary(a.data(), {3}, b.data(), {3}, y.data(), {3}, p);
  EXPECT_EQ(y, (std::vector<float>{-128, 127, 127}));
}

TEST(QuantizedOpsTest, MultiplyTakesTvmsFloat32Steps) {
  std::mt19937 rng(3);
  const QuantizedOutput out{0, 0, 255};  // uint8 output
  const QuantizedBinaryParams p =
      MakeQuantizedBinaryParams(QuantizedBinaryKind::kMultiply, 0.02, 128, 0.004, 0, 0.01, out);
  const Shape a_shape{1, 4, 3, 3}, b_shape{1, 4, 1, 1};
  const std::vector<float> a = RandomInts(36, 0, 255, &rng);
  const std::vector<float> b = RandomInts(4, 0, 255, &rng);
  std::vector<float> y(36);
  QuantizedBinary(a.data(), a_shape, b.data(), b_shape, y.data(), a_shape, p);
  for (int64_t i = 0; i < 36; ++i) {
    const float product = Dequantized(static_cast<int64_t>(a[i]), 128, 0.02) *
                          Dequantized(static_cast<int64_t>(b[i / 9]), 0, 0.004);
    EXPECT_EQ(y[i], Quantized(product, 0.01, out)) << i;
    const double real = (a[i] - 128) * 0.02 * b[i / 9] * 0.004 / 0.01;
    if (real > 1 && real < 254) EXPECT_LE(std::abs(y[i] - real), 0.5 + 1e-5) << i;
  }
}

/*! \brief TVM's float32 pooling of one NHWC pixel/channel by direct enumeration of the window:
 * the dequantized taps summed (or maxed) in window order, the sum divided by the count. */
float PoolReference(const std::vector<float>& x, const Shape& s, const QuantizedPoolParams& q,
                    int64_t n, int64_t oh, int64_t ow, int64_t c) {
  const Pool2dParams& p = q.pool;
  const bool is_max = p.kind == PoolKind::kMax;
  float acc = is_max ? -INFINITY : 0.0f;
  int64_t inside = 0, padded = 0;
  for (int64_t kh = 0; kh < p.pool_size[0]; ++kh) {
    for (int64_t kw = 0; kw < p.pool_size[1]; ++kw) {
      const int64_t ih = oh * p.strides[0] - p.padding[0] + kh * p.dilation[0];
      const int64_t iw = ow * p.strides[1] - p.padding[1] + kw * p.dilation[1];
      const bool in_padded = ih >= -p.padding[0] && ih < s[1] + p.padding[2] &&
                             iw >= -p.padding[1] && iw < s[2] + p.padding[3];
      padded += in_padded;
      if (ih < 0 || ih >= s[1] || iw < 0 || iw >= s[2]) continue;
      ++inside;
      const float v = Dequantized(static_cast<int64_t>(x[((n * s[1] + ih) * s[2] + iw) * s[3] + c]),
                                  q.input_zero_point, q.input_scale);
      acc = is_max ? std::max(acc, v) : acc + v;
    }
  }
  if (is_max) return Quantized(acc, q.output_scale, q.out);
  const int64_t count = p.count_include_pad ? padded : std::max<int64_t>(inside, 1);
  return Quantized(acc / static_cast<float>(count), q.output_scale, q.out);
}

TEST(QuantizedOpsTest, PoolingMatchesWindowEnumeration) {
  std::mt19937 rng(4);
  for (int variant = 0; variant < 4; ++variant) {
    Pool2dParams pool;
    pool.kind = variant % 2 ? PoolKind::kAvg : PoolKind::kMax;
    pool.pool_size = {3, 2};
    pool.strides = {2, 1};
    pool.padding = {1, 0, 1, 1};
    pool.count_include_pad = variant >= 2;
    pool.layout = DataLayout::kNHWC;
    const Shape in_shape{2, 7, 6, 5}, out_shape{2, 4, 6, 5};
    const QuantizedOutput out{3, -128, 127};
    const QuantizedPoolParams q = MakeQuantizedPoolParams(pool, 0.02, -4, 0.015, out);
    const std::vector<float> x = RandomInts(NumElements(in_shape), -128, 127, &rng);
    std::vector<float> y(NumElements(out_shape));
    QuantizedPool2d(x.data(), in_shape, y.data(), out_shape, q);
    for (int64_t i = 0; i < NumElements(out_shape); ++i) {
      const auto idx = Unravel(i, out_shape);
      ASSERT_EQ(y[i], PoolReference(x, in_shape, q, idx[0], idx[1], idx[2], idx[3]))
          << "variant " << variant << " element " << i;
    }
  }
}

TEST(QuantizedOpsTest, GlobalAveragePoolRoundsTheMeanHalfToEven) {
  Pool2dParams pool;
  pool.kind = PoolKind::kAvg;
  pool.pool_size = {4, 4};
  pool.layout = DataLayout::kNHWC;
  const QuantizedPoolParams q = MakeQuantizedPoolParams(pool, 0.5, 0, 0.5, {0, -128, 127});
  std::vector<float> x(16, 0.0f), y(1);
  // The mean of sixteen values in output steps: one nonzero value of 8, 24 or -8 gives 0.5, 1.5
  // or -0.5 steps, which round to 0, 2 and 0.
  for (const auto& [value, rounded] : {std::pair{8.0f, 0.0f}, {24.0f, 2.0f}, {-8.0f, 0.0f}}) {
    x[0] = value;
    QuantizedPool2d(x.data(), {1, 4, 4, 1}, y.data(), {1, 1, 1, 1}, q);
    EXPECT_EQ(y[0], rounded) << value;
  }
}

TEST(QuantizedOpsTest, LookupTableIndexesFromTheInputMinimum) {
  LookupTable table;
  table.index_offset = -128;
  for (int v = -128; v < 128; ++v) table.values.push_back(static_cast<float>(-v / 2));
  const std::vector<float> x = {-128, -1, 0, 127};
  std::vector<float> y(4);
  ApplyLookupTable(x.data(), 4, table, y.data());
  EXPECT_EQ(y, (std::vector<float>{64, 0, 0, -63}));
  // Every input value, in vectors of sixteen and a tail, against the table read one at a time.
  std::vector<float> all;
  for (int v = -128; v < 128; ++v)
    all.push_back(static_cast<float>(((v * 37) % 256 + 256) % 256 - 128));
  all.resize(all.size() + 5, 7.0f);
  std::vector<float> looked_up(all.size());
  ApplyLookupTable(all.data(), static_cast<int64_t>(all.size()), table, looked_up.data());
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(looked_up[i], table.values[static_cast<size_t>(static_cast<int>(all[i]) + 128)])
        << all[i];
  }
  // An input outside the table, in a vector or in the tail, is an error, never a read past it.
  for (size_t at : {size_t{3}, size_t{200}, all.size() - 1}) {
    for (const float outside : {-129.0f, 128.0f, 1e6f}) {
      std::vector<float> bad = all;
      bad[at] = outside;
      EXPECT_THROW(
          ApplyLookupTable(bad.data(), static_cast<int64_t>(bad.size()), table, looked_up.data()),
          tvm::ffi::Error)
          << outside << " at " << at;
    }
  }
}

TEST(QuantizedOpsTest, SoftmaxTakesTvmsFloat32Steps) {
  std::mt19937 rng(5);
  const QuantizedOutput out{-128, -128, 127};
  const QuantizedSoftmaxParams p = MakeQuantizedSoftmaxParams(0.05, 3, 1.0 / 256, out);
  const Shape shape{3, 6, 4};
  const std::vector<float> x = RandomInts(NumElements(shape), -128, 127, &rng);
  std::vector<float> y(x.size());
  QuantizedSoftmax(x.data(), shape, 1, p, y.data());
  auto real_of = [&](int64_t i) { return Dequantized(static_cast<int64_t>(x[i]), 3, 0.05); };
  for (int64_t n = 0; n < 3; ++n) {
    for (int64_t j = 0; j < 4; ++j) {
      // TVM's softmax of the dequantized row: max, exp(x - max), the sum in row order, divide.
      float largest = real_of(Ravel({n, 0, j}, shape)), sum = 0.0f;
      for (int64_t a = 1; a < 6; ++a) largest = std::max(largest, real_of(Ravel({n, a, j}, shape)));
      for (int64_t a = 0; a < 6; ++a) sum += std::exp(real_of(Ravel({n, a, j}, shape)) - largest);
      double real_sum = 0;
      for (int64_t a = 0; a < 6; ++a) real_sum += std::exp(0.05 * x[Ravel({n, a, j}, shape)]);
      for (int64_t a = 0; a < 6; ++a) {
        const int64_t i = Ravel({n, a, j}, shape);
        EXPECT_EQ(y[i], Quantized(std::exp(real_of(i) - largest) / sum, 1.0 / 256, out)) << i;
        const double real = -128 + std::exp(0.05 * x[i]) / real_sum * 256;
        if (real < 126.5) EXPECT_LE(std::abs(y[i] - real), 0.5 + 1e-4) << i;
      }
    }
  }
}

TEST(QuantizedOpsTest, ConcatRequantizesEachInputIntoItsSlice) {
  const QuantizedOutput out{0, -128, 127};
  const std::vector<RequantizeParams> params = {MakeRequantizeParams(0.1, 0, 0.1, out),
                                                MakeRequantizeParams(0.2, 1, 0.1, out)};
  const std::vector<float> a = {1, 2, 3, 4}, b = {1, 2};  // [2, 2] and [2, 1] along axis 1
  std::vector<float> y(6);
  QuantizedConcat({a.data(), b.data()}, {{2, 2}, {2, 1}}, 1, params, y.data());
  EXPECT_EQ(y, (std::vector<float>{1, 2, 0, 3, 4, 2}));
}

}  // namespace
}  // namespace kernels
}  // namespace example_npu
