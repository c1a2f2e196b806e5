#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/near_ties.h"
#include "kernels/quantize.h"
#include "kernels/requantize_sums.h"

namespace example_npu {
namespace kernels {
namespace {

/*! \brief A per-tensor requantization by `real` into int8 with float32 operands. */
Requantization Float32Requantization(double real, int64_t zero_point = 0) {
  Requantization r;
  r.multipliers = {QuantizeMultiplier(real)};
  r.output_zero_point = zero_point;
  r.float32.input_scale = 1.0f;
  r.float32.output_scale = static_cast<float>(1.0 / real);
  r.float32.weight_scales = {1.0f};
  return r;
}

bool Near(int64_t value, const Requantization& r) {
  return NearTie(value, r.Multiplier(0), NearTieWindow(r, 0), r.output_zero_point, r.min, r.max);
}

TEST(NearTiesTest, ValuesWithinTheWindowOfATieAreNear) {
  Requantization quarter = Float32Requantization(0.25);
  EXPECT_TRUE(Near(2, quarter));     // 0.5
  EXPECT_TRUE(Near(6, quarter));     // 1.5
  EXPECT_TRUE(Near(-6, quarter));    // -1.5
  EXPECT_FALSE(Near(5, quarter));    // 1.25
  EXPECT_FALSE(Near(0, quarter));    // 0
  EXPECT_FALSE(Near(510, quarter));  // 127.5: both integers clamp to 127
  quarter.min = 0;
  EXPECT_FALSE(Near(-2, quarter));  // -0.5: both clamp to 0
  EXPECT_TRUE(Near(2, quarter));
  // 2^-12 steps from a tie is near, 2^-9 is not (the window is 2^-10 steps).
  EXPECT_TRUE(Near(1, Float32Requantization(0.5 + std::ldexp(1.0, -12))));
  EXPECT_FALSE(Near(1, Float32Requantization(0.5 + std::ldexp(1.0, -9))));
  EXPECT_TRUE(Near(1, Float32Requantization(0.5 - std::ldexp(1.0, -12))));
  // Wider than 32 bits (int16 activations): 128-bit arithmetic. 1024.5 steps, less 1024.
  EXPECT_TRUE(Near((int64_t{1} << 40) + (int64_t{1} << 29),
                   Float32Requantization(std::ldexp(1.0, -30), -1024)));
}

TEST(NearTiesTest, TheWindowWidensByTheBiasRounding) {
  // TVM adds a float32 bias of 0.4 accumulator units where the NPU adds 0: 2 * 0.3 = 0.6 steps
  // lies 0.1 from a tie, 0.02 with TVM's bias.
  Requantization r = Float32Requantization(0.3);
  r.bias = {0};
  r.float32.bias = {0.0f};
  EXPECT_FALSE(Near(2, r));
  r.float32.bias = {0.4f};
  EXPECT_TRUE(Near(2, r));
  EXPECT_FALSE(Near(3, r));  // 0.9 steps
}

TEST(NearTiesTest, PreparedScanFindsWhatTheAccumulatorScanFinds) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> sum(-(1 << 9), 1 << 9);
  std::uniform_real_distribution<double> real(1e-3, 0.2);
  for (const int64_t channels : {1, 7, 16, 33}) {
    Requantization r;
    for (int64_t c = 0; c < channels; ++c) {
      // Half the channels an eighth (a tie every eighth value), half anything.
      r.multipliers.push_back(QuantizeMultiplier(c % 2 ? real(rng) : 0.125));
      r.bias.push_back(sum(rng) / 8);
      r.float32.weight_scales.push_back(1.0f);
    }
    r.float32.input_scale = r.float32.output_scale = 1.0f;
    r.output_zero_point = 3;
    const int64_t rows = 40, correction = -7;
    std::vector<int32_t> sums(rows * channels), column_sums(channels);
    std::vector<int64_t> row_terms(rows), acc(rows * channels);
    for (int32_t& s : sums) s = sum(rng);
    for (int32_t& s : column_sums) s = sum(rng) / 32;
    for (int64_t& t : row_terms) t = sum(rng);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < channels; ++j) {
        acc[i * channels + j] = sums[i * channels + j] - row_terms[i] - correction * column_sums[j];
      }
    }
    std::vector<int64_t> expected;
    for (int64_t i = 0; i < rows * channels; ++i) {
      const int64_t j = i % channels;
      if (NearTie(acc[i] + r.bias[j], r.Multiplier(j), NearTieWindow(r, j), r.output_zero_point,
                  r.min, r.max)) {
        expected.push_back(i);
      }
    }
    EXPECT_GT(expected.size(), 0u) << channels;
    std::vector<int64_t> scanned, prepared_scan;
    FindNearTies(acc.data(), rows, channels, r, &scanned);
    const PreparedRequantization prepared(r, channels);
    prepared.FindNearTies(sums.data(), channels, row_terms.data(), column_sums.data(), correction,
                          rows, 0, &prepared_scan);
    EXPECT_EQ(scanned, expected) << channels;
    EXPECT_EQ(prepared_scan, expected) << channels;
    // Requantizing with the scan: Run's outputs and the same ties (in block order). A bias past
    // the int32 lanes sends rows to the int64 lanes, and the scan to FindNearTies.
    for (const bool wide : {false, true}) {
      Requantization rw = r;
      if (wide) rw.bias[0] += int64_t{1} << 40;
      const PreparedRequantization p(rw, channels);
      std::vector<int64_t> want, got;
      p.FindNearTies(sums.data(), channels, row_terms.data(), column_sums.data(), correction, rows,
                     2, &want);
      std::vector<int16_t> run_out(rows * channels), fused_out(rows * channels);
      p.Run(sums.data(), channels, row_terms.data(), column_sums.data(), correction, rows,
            run_out.data(), channels, SumsType::kInt16);
      p.RunFindingNearTies(sums.data(), channels, row_terms.data(), column_sums.data(), correction,
                           rows, fused_out.data(), channels, SumsType::kInt16, 2, &got);
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, want) << channels << (wide ? ", wide" : "");
      EXPECT_EQ(fused_out, run_out) << channels << (wide ? ", wide" : "");
      if (!wide) EXPECT_EQ(want.size(), expected.size());
    }
  }
}

TEST(NearTiesTest, BrokenTiesOfAMatmulAreTvmsFloat32Rounding) {
  // Power-of-two scales: every float32 step is exact, so TVM's result is the exact value
  // rounded half to even, where the NPU's exact rounding goes half up.
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> value(-128, 127);
  const int64_t m = 9, k = 21, n = 20, zp = 5;
  std::vector<int8_t> x(m * k), w(k * n);
  for (int8_t& v : x) v = static_cast<int8_t>(value(rng));
  for (int8_t& v : w) v = static_cast<int8_t>(value(rng) / 16);
  Requantization r;
  r.float32.input_scale = 0.5f;
  r.float32.output_scale = 4.0f;
  for (int64_t c = 0; c < n; ++c) {
    const float weight_scale = c % 2 ? 0.25f : 0.125f;
    r.float32.weight_scales.push_back(weight_scale);
    r.multipliers.push_back(QuantizeMultiplier(0.5 * weight_scale / 4.0));
  }
  std::vector<int8_t> out(m * n);
  std::vector<int64_t> ties;
  const PreparedRequantization prepared(r, n);
  SumsOut to{nullptr, false, &prepared, out.data(), SumsType::kInt8};
  to.near_ties = &ties;
  QuantizedMatmul(x.data(), zp, w.data(), m, k, n, to);
  std::vector<int8_t> exact = out;
  std::vector<int64_t> results;
  Float32MatmulResults(ties, x.data(), zp, w.data(), n, 0, k, n, r, &results);
  StoreResults(ties, results, n, out.data(), SumsType::kInt8, n);
  int64_t parted = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double steps = 0;
      for (int64_t p = 0; p < k; ++p) {
        steps += (x[i * k + p] - zp) * 0.5 * w[p * n + j] * r.float32.weight_scales[j] / 4.0;
      }
      const double tvm = std::clamp(std::nearbyint(steps), -128.0, 127.0);
      EXPECT_EQ(out[i * n + j], tvm) << i << ", " << j << ": " << steps;
      parted += exact[i * n + j] != tvm;
    }
  }
  EXPECT_GT(parted, 0);  // ties the exact rounding takes upward
}

}  // namespace
}  // namespace kernels
}  // namespace example_npu
