// TFLite's integer arithmetic (kernels/tflite_arithmetic.h) against naive references: the
// roundings as exact rational arithmetic on 128-bit integers, the fixed-point exp and reciprocal
// against the real functions, softmax against rows LiteRT's reference kernels computed, and the
// qnn ops in "tflite" rounding (kernels/quantized_ops.h) element by element.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/quantized_ops.h"
#include "kernels/requantize_sums.h"
#include "kernels/tflite_arithmetic.h"

namespace example_npu {
namespace kernels {
namespace {

/*! \brief floor(a / b) for b > 0. */
__int128 FloorDiv(__int128 a, __int128 b) {
  __int128 q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}

/*! \brief round_half_away_from_zero(a / b) for b > 0. */
__int128 RoundHalfAway(__int128 a, __int128 b) {
  return a >= 0 ? FloorDiv(2 * a + b, 2 * b) : -FloorDiv(-2 * a + b, 2 * b);
}

/*!
 * \brief TFLite's double rounding stated as exact rationals: h = round_half_up(x 2^l m0 / 2^31),
 * then round_half_away_from_zero(h / 2^r), with l = max(e, 0), r = max(-e, 0), e = 31 - shift.
 */
int64_t NaiveMultiply(int64_t x, const FixedPointMultiplier& m) {
  const int64_t e = 31 - m.shift;
  const __int128 v = static_cast<__int128>(x) * (int64_t{1} << std::max<int64_t>(e, 0)) * m.m0;
  const __int128 h =
      FloorDiv(2 * v + (static_cast<__int128>(1) << 31), static_cast<__int128>(1) << 32);
  return static_cast<int64_t>(
      RoundHalfAway(h, static_cast<__int128>(1) << std::max<int64_t>(-e, 0)));
}

TEST(TfliteArithmeticTest, MultiplyByQuantizedMultiplierRoundsTwice) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> value(-(int64_t{1} << 24), int64_t{1} << 24);
  std::uniform_real_distribution<double> real(-30.0, 8.0);
  for (int i = 0; i < 20000; ++i) {
    const FixedPointMultiplier m = QuantizeMultiplier(std::exp2(real(rng)));
    int64_t x = value(rng);
    // Keep x * 2^left_shift inside int32, as TFLite's callers do.
    const int64_t left = std::max<int64_t>(31 - m.shift, 0);
    x >>= left;
    ASSERT_EQ(tflite::MultiplyByQuantizedMultiplier(x, m), NaiveMultiply(x, m))
        << x << " * " << m.m0 << " >> " << m.shift;
  }
  // Ties: +0.5 and -0.5 after the first rounding go to 1 and 0; after the second, away from 0.
  const FixedPointMultiplier half{int64_t{1} << 30, 32};  // 0.25
  EXPECT_EQ(tflite::MultiplyByQuantizedMultiplier(2, half), 1);
  EXPECT_EQ(tflite::MultiplyByQuantizedMultiplier(-2, half), -1);
  EXPECT_EQ(tflite::MultiplyByQuantizedMultiplier(6, half), 2);
  EXPECT_EQ(tflite::MultiplyByQuantizedMultiplier(-6, half), -2);
}

TEST(TfliteArithmeticTest, AccumulatorRequantizationRoundsTwicePerChannel) {
  // A conv tile's int32 accumulators + bias, per-channel multipliers above and below 1 / 2^31
  // exponents on both sides, from channel 3 of the layer on (the row loop's vector path).
  std::mt19937 rng(8);
  std::uniform_int_distribution<int64_t> value(-(int64_t{1} << 20), int64_t{1} << 20);
  std::uniform_real_distribution<double> real(-20.0, 0.5);
  const int64_t channels = 37, rows = 9, offset = 3;
  Requantization r;
  r.rounding = Rounding::kTflite;
  r.output_zero_point = -7;
  r.min = -128;
  r.max = 100;
  for (int64_t c = 0; c < offset + channels; ++c) {
    r.multipliers.push_back(QuantizeMultiplier(std::exp2(real(rng))));
    r.bias.push_back(value(rng) / 16);
  }
  std::vector<int64_t> acc(rows * channels);
  for (int64_t& a : acc) a = value(rng);
  std::vector<float> out(acc.size());
  Requantize(acc.data(), static_cast<int64_t>(acc.size()), channels, offset, r, out.data());
  for (size_t i = 0; i < acc.size(); ++i) {
    const int64_t c = offset + static_cast<int64_t>(i) % channels;
    const FixedPointMultiplier& m = r.multipliers[c];
    // Keep x * 2^left_shift inside int32, as TFLite's callers do.
    const int64_t left = std::max<int64_t>(31 - m.shift, 0);
    const int64_t scaled = (acc[i] + r.bias[c]) * (int64_t{1} << left);  // no UB shift
    if (scaled != static_cast<int32_t>(scaled)) {
      continue;
    }
    const int64_t expected = NaiveMultiply(acc[i] + r.bias[c], m) - 7;
    ASSERT_EQ(out[i], std::clamp<int64_t>(expected, -128, 100)) << i;
  }
}

TEST(TfliteArithmeticTest, RequantizeLanesEqualTheElementwiseLoop) {
  // Requantize's sixteen int32 lanes against RequantizeElementwise (the scalar
  // MultiplyByQuantizedMultiplierInRange): accumulators beyond 32 bits (only their low 32 bits
  // count, as in TFLite's int32 arithmetic), multipliers above 1 (left shifts, whose int32
  // product wraps) and far below, the int32 extremes, every tile width around 16 lanes.
  std::mt19937_64 rng(21);
  std::uniform_int_distribution<int64_t> wide(-(int64_t{1} << 40), int64_t{1} << 40);
  std::uniform_int_distribution<int64_t> narrow(-(int64_t{1} << 20), int64_t{1} << 20);
  std::uniform_real_distribution<double> exponent(-30.0, 20.0);
  const int64_t extremes[] = {0,
                              1,
                              -1,
                              std::numeric_limits<int32_t>::min(),
                              std::numeric_limits<int32_t>::max(),
                              int64_t{1} << 31,
                              -(int64_t{1} << 31) - 1};
  for (const int64_t channels : {1, 3, 8, 15, 16, 17, 33, 64, 100}) {
    for (const int64_t rows : {1, 2, 7}) {
      for (int variant = 0; variant < 4; ++variant) {
        Requantization r;
        r.rounding = Rounding::kTflite;
        const int64_t offset = variant % 2 ? 5 : 0;
        for (int64_t c = 0; c < (variant == 2 ? 1 : offset + channels); ++c) {
          r.multipliers.push_back(QuantizeMultiplier(std::exp2(exponent(rng))));
        }
        for (int64_t c = 0; c < offset + channels; ++c) r.bias.push_back(wide(rng));
        r.output_zero_point = variant == 3 ? 100 : -7;
        r.min = variant == 3 ? std::numeric_limits<int32_t>::min() : -128;
        r.max = variant == 3 ? std::numeric_limits<int32_t>::max() - 100 : 127;
        std::vector<int64_t> acc(static_cast<size_t>(rows * channels));
        for (size_t i = 0; i < acc.size(); ++i) {
          acc[i] = i % 5 == 4 ? extremes[i / 5 % 7] : (i % 2 ? wide(rng) : narrow(rng));
        }
        std::vector<float> lanes(acc.size()), loop(acc.size());
        const auto size = static_cast<int64_t>(acc.size());
        Requantize(acc.data(), size, channels, offset, r, lanes.data());
        RequantizeElementwise(acc.data(), size, channels, offset, r, loop.data());
        for (size_t i = 0; i < acc.size(); ++i) {
          ASSERT_EQ(lanes[i], loop[i]) << channels << " channels, variant " << variant << ", at "
                                       << i << " (acc " << acc[i] << ")";
        }
      }
    }
  }
}

/*!
 * \brief Requantize and the fused PreparedRequantization (int32 sums) against the scalar
 * RequantizeElementwise on kRows x 6 values i / 6 - kRows / 2 - i % 3 (and every 97th row
 * `wide`, beyond 32 bits: those take the int64 lanes beside the int32 ones of their block), with
 * m0 = 2^30 and shifts first_shift + c for channel c.
 */
void ExpectLanesRoundTiesAsTheScalarForm(Rounding rounding, bool single, int64_t first_shift,
                                         int64_t wide) {
  constexpr int64_t kChannels = 6, kRows = 1001;
  Requantization r;
  r.rounding = rounding;
  r.single_rounding = single;
  for (int64_t c = 0; c < kChannels; ++c) {
    r.multipliers.push_back(FixedPointMultiplier{int64_t{1} << 30, first_shift + c});
  }
  r.output_zero_point = 3;
  r.min = std::numeric_limits<int16_t>::min();
  r.max = std::numeric_limits<int16_t>::max();
  std::vector<int64_t> acc;
  std::vector<int32_t> sums;
  for (int64_t i = 0; i < kRows * kChannels; ++i) {
    const int64_t row = i / kChannels;
    acc.push_back(row % 97 == 50 ? wide + i : row - kRows / 2 - i % 3);
    sums.push_back(static_cast<int32_t>(acc.back()));
  }
  const auto size = static_cast<int64_t>(acc.size());
  std::vector<float> lanes(acc.size()), fused(acc.size()), loop(acc.size());
  Requantize(acc.data(), size, kChannels, 0, r, lanes.data());
  RequantizeElementwise(acc.data(), size, kChannels, 0, r, loop.data());
  // The fused form takes int32 sums: the wide rows' come from their int64 row terms.
  std::vector<int64_t> row_terms(kRows);
  for (int64_t i = 0; i < kRows; ++i) {
    row_terms[i] = sums[i * kChannels] - acc[i * kChannels];
  }
  PreparedRequantization(r, kChannels)
      .Run(sums.data(), kChannels, row_terms.data(), nullptr, 0, kRows, fused.data(), kChannels,
           SumsType::kFloat32);
  for (size_t i = 0; i < acc.size(); ++i) {
    const int64_t c = static_cast<int64_t>(i) % kChannels;
    if (rounding == Rounding::kTflite && !single && acc[i] == sums[i]) {
      EXPECT_EQ(loop[i], std::clamp(r.output_zero_point + tflite::MultiplyByQuantizedMultiplier(
                                                              acc[i], r.multipliers[c]),
                                    r.min, r.max))
          << "acc " << acc[i] << ", channel " << c;
    }
    ASSERT_EQ(lanes[i], loop[i]) << "acc " << acc[i] << ", channel " << c;
    ASSERT_EQ(fused[i], loop[i]) << "fused, acc " << acc[i] << ", channel " << c;
  }
}

TEST(TfliteArithmeticTest, RequantizeLanesRoundEveryTieAsTheScalarForm) {
  // m0 = 2^30 makes x m0 + 2^30 = (x + 1) 2^30: TFLite's doubling high multiply meets a tie at
  // every odd x, and right shifts of 0 to 5 put the second rounding's ties (and their negatives)
  // among every few consecutive x; the single roundings (TVM's, TFLite's FULLY_CONNECTED) meet
  // theirs at shifts 31 to 36 in the same way.
  ExpectLanesRoundTiesAsTheScalarForm(Rounding::kTflite, false, 31, int64_t{1} << 33);
  // TFLite's single rounding multiplies in int64 (its values are int32 sums): wide rows stay
  // below 2^32 so that the scalar form's product does not overflow either.
  ExpectLanesRoundTiesAsTheScalarForm(Rounding::kTflite, true, 31, (int64_t{1} << 31) + 12345);
  ExpectLanesRoundTiesAsTheScalarForm(Rounding::kTvm, false, 31, int64_t{1} << 33);
  ExpectLanesRoundTiesAsTheScalarForm(Rounding::kTvm, false, 31, -(int64_t{1} << 31) - 7);
}

/*! \brief One rounding of x m0 / 2^shift, halves up, as exact rationals. */
int64_t NaiveSingleRounding(int64_t x, const FixedPointMultiplier& m) {
  return static_cast<int64_t>(
      FloorDiv(static_cast<__int128>(x) * m.m0 * 2 + (__int128{1} << m.shift),
               __int128{1} << (m.shift + 1)));
}

/*!
 * \brief The fused requantization's 8-bit results, which AVX-512 estimates in float32 and
 * recomputes exactly only where the estimate is unsure (EstimatedRounding16), against the
 * rounding as exact rationals: TFLite's double rounding (NaiveMultiply), or one rounding
 * (`single`: TFLite's FULLY_CONNECTED, TVM's). A quarter of the sums are built next to the values
 * whose exact product is a half-integer, at distances from 0 to 3 sums; right shifts 0 (one
 * rounding) to 22; bounds of the whole type (variant 0: scales at most 1/2, so unclamped
 * estimates) and of a fused relu; and (variant 3) a multiplier above 1. The single roundings also
 * take column and row terms, some beyond the bounds of their int32 lanes (then the int64 lanes).
 */
void ExpectFused8BitsExactNextToTies(Rounding rounding, bool single) {
  std::mt19937_64 rng(29);
  std::uniform_real_distribution<double> exponent(-22.0, -0.01);
  std::uniform_int_distribution<int64_t> small(-1000, 1000), narrow(-(1 << 16), 1 << 16);
  std::uniform_int_distribution<int64_t> level(-300, 300), step(-3, 3);
  const bool terms = rounding == Rounding::kTvm || single;
  int64_t next_to_ties = 0, checked = 0;
  for (const int64_t channels : {1, 5, 16, 21, 40}) {
    for (int variant = 0; variant < 4; ++variant) {
      const bool unsigned_out = variant % 2 == 1;
      Requantization r;
      r.rounding = rounding;
      r.single_rounding = single;
      for (int64_t c = 0; c < channels; ++c) {
        // Variant 0: every scale at most 1/2 on the whole int8 range (the estimate unclamped,
        // the store saturating); the others a scale of 0.73 or 1.7 (clamped in float32).
        const double first = variant == 3 ? 1.7 : (variant == 0 ? 0.43 : 0.73);
        const double real = c == 0 ? first : std::exp2(exponent(rng));
        r.multipliers.push_back(QuantizeMultiplier(real));
        r.bias.push_back(narrow(rng));
      }
      r.output_zero_point = unsigned_out ? 200 : (variant == 2 ? 127 : -5);
      r.min = unsigned_out ? 0 : -128;
      r.max = unsigned_out ? 255 : 127;
      if (variant == 2) r.min = r.output_zero_point - 100;  // a fused relu's bound inside
      const int64_t rows = 64;
      // Column terms correction * column_sums[c] and row terms, some beyond the int32 lanes'
      // bounds (a negative sum's value beyond -2^31): variant 1's channel 0 a column term below
      // -2^29 (rows 6 of 16 add a row term just below 2^29), rows 14 of 16 a row term of 1.1e9.
      const int64_t correction = terms ? (variant == 1 ? 128 : 37) : 0;
      std::vector<int32_t> column_sums(channels);
      std::vector<int64_t> row_terms(rows);
      for (int64_t c = 0; c < channels && terms; ++c) {
        column_sums[c] = static_cast<int32_t>(c == 0 && variant == 1 ? 7 << 20 : small(rng));
      }
      for (int64_t i = 0; i < rows && terms; ++i) {
        row_terms[i] = i % 16 == 6    ? (int64_t{1} << 29) - 1000
                       : i % 16 == 14 ? int64_t{1100000000}
                                      : narrow(rng);
      }
      auto offset = [&](int64_t i, int64_t c) {
        return r.bias[c] - correction * column_sums[c] - row_terms[i];
      };
      std::vector<int32_t> sums;
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t c = 0; c < channels; ++c) {
          const FixedPointMultiplier& m = r.multipliers[c];
          int64_t sum = 0;
          switch ((i + c) % 4) {
            case 0: {  // next to a sum whose product is k + 1/2
              const double real = std::ldexp(static_cast<double>(m.m0), static_cast<int>(-m.shift));
              sum = std::llround((static_cast<double>(level(rng)) + 0.5) / real) + step(rng) -
                    offset(i, c);
              break;
            }
            case 1:
              sum = narrow(rng);
              break;
            case 2:
              sum = (i % 8 < 4 ? int64_t{1} << 30 : -(int64_t{1} << 30)) + small(rng);
              // Near 2^31 (with the terms: the value beyond it).
              if (terms && i % 8 == 1) sum = (int64_t{1} << 31) - 2000 + small(rng);
              break;
            default:
              sum = small(rng);
          }
          // The double rounding's multiplier above 1: no product beyond int32 after its shift.
          if (variant == 3 && !single && rounding == Rounding::kTflite) sum = small(rng);
          sums.push_back(static_cast<int32_t>(std::clamp<int64_t>(
              sum, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max())));
        }
      }
      std::vector<uint8_t> out(sums.size());
      PreparedRequantization(r, channels)
          .Run(sums.data(), channels, terms ? row_terms.data() : nullptr,
               terms ? column_sums.data() : nullptr, correction, rows, out.data(), channels,
               unsigned_out ? SumsType::kUInt8 : SumsType::kInt8);
      for (size_t e = 0; e < sums.size(); ++e) {
        const int64_t i = static_cast<int64_t>(e) / channels,
                      c = static_cast<int64_t>(e) % channels;
        const FixedPointMultiplier& m = r.multipliers[c];
        const int64_t value = int64_t{sums[e]} + offset(i, c);  // within int32 for the double
        const int64_t expected = std::clamp(
            r.output_zero_point + (terms ? NaiveSingleRounding(value, m) : NaiveMultiply(value, m)),
            r.min, r.max);
        const int64_t got = unsigned_out ? int64_t{out[e]} : int64_t{static_cast<int8_t>(out[e])};
        ASSERT_EQ(got, expected) << "variant " << variant << ", channel " << c << " of " << channels
                                 << ", value " << value << ", m0 " << m.m0 << ", shift " << m.shift;
        // Next to a tie: the product within 2^-(r + 1) + 2^-13 of a half-integer.
        const double product = static_cast<double>(value) *
                               std::ldexp(static_cast<double>(m.m0), static_cast<int>(-m.shift));
        const double window =
            (m.shift > 31 && !terms ? std::ldexp(1.0, static_cast<int>(30 - m.shift)) : 0.0) +
            std::ldexp(1.0, -13);
        next_to_ties += std::abs(product - std::floor(product) - 0.5) < window;
        ++checked;
      }
    }
  }
  // The sums built next to ties land there often enough to test the exact recomputation.
  EXPECT_GT(next_to_ties, 200) << "of " << checked;
}

TEST(TfliteArithmeticTest, FusedRequantizationInto8BitsIsExactNextToEveryTie) {
  ExpectFused8BitsExactNextToTies(Rounding::kTflite, false);
  ExpectFused8BitsExactNextToTies(Rounding::kTflite, true);
  ExpectFused8BitsExactNextToTies(Rounding::kTvm, false);
}

TEST(TfliteArithmeticTest, PrimitivesMatchTheirDefinitions) {
  EXPECT_EQ(tflite::SaturatingRoundingDoublingHighMul(std::numeric_limits<int32_t>::min(),
                                                      std::numeric_limits<int32_t>::min()),
            std::numeric_limits<int32_t>::max());
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> any(std::numeric_limits<int32_t>::min() + 1,
                                             std::numeric_limits<int32_t>::max());
  for (int i = 0; i < 20000; ++i) {
    const int32_t a = any(rng), b = any(rng);
    const __int128 v = static_cast<__int128>(a) * b;
    ASSERT_EQ(tflite::SaturatingRoundingDoublingHighMul(a, b),
              FloorDiv(2 * v + (static_cast<__int128>(1) << 31), static_cast<__int128>(1) << 32))
        << a << " " << b;
    const int exponent = static_cast<int>(static_cast<uint32_t>(a) % 32);
    ASSERT_EQ(tflite::RoundingDivideByPowerOfTwo(b, exponent),
              RoundHalfAway(b, static_cast<__int128>(1) << exponent))
        << b << " / 2^" << exponent;
  }
}

TEST(TfliteArithmeticTest, AveragePoolRoundsHalfAwayFromZero) {
  for (int64_t count = 1; count <= 30; ++count) {
    for (int64_t sum = -128 * count; sum <= 127 * count; ++sum) {
      ASSERT_EQ(tflite::RoundedAverage(sum, count),
                static_cast<int64_t>(std::round(static_cast<double>(sum) / count)))
          << sum << " / " << count;
    }
  }
}

TEST(TfliteArithmeticTest, MeanMultiplierFoldsTheCountIntoTheRescale) {
  for (double real : {0.3, 0.97, 1.0, 1.7}) {
    const FixedPointMultiplier m = QuantizeMultiplier(real);
    for (int64_t count : {1, 2, 3, 49, 64, 100, 196, 1 << 20}) {
      const FixedPointMultiplier folded = tflite::MeanMultiplier(m, count);
      // (m0 << k) / n truncated, k = floor(log2 n): within 2^-30 of real / n (relative).
      const double value = std::ldexp(static_cast<double>(folded.m0), -folded.shift);
      EXPECT_NEAR(value * count / real, 1.0, std::ldexp(1.0, -29)) << real << " / " << count;
      EXPECT_LT(folded.m0, int64_t{1} << 31);
      EXPECT_LE(folded.shift, 62);
    }
  }
}

TEST(TfliteArithmeticTest, FixedPointExpAndReciprocalApproximateTheRealFunctions) {
  EXPECT_EQ(tflite::ExpOnNegativeValues(0), std::numeric_limits<int32_t>::max());
  for (int32_t raw = -(31 << 26); raw < 0; raw += 12345) {
    const double x = std::ldexp(static_cast<double>(raw), -26);
    const double got = std::ldexp(static_cast<double>(tflite::ExpOnNegativeValues(raw)), -31);
    ASSERT_NEAR(got, std::exp(x), 5e-7) << x;  // the Taylor series: ~2e-7
  }
  for (int32_t raw = 0; raw >= 0 && raw < std::numeric_limits<int32_t>::max() - 4000000;
       raw += 3999989) {
    const double x = std::ldexp(static_cast<double>(raw), -31);
    const double got = std::ldexp(static_cast<double>(tflite::OneOverOnePlusX(raw)), -31);
    ASSERT_NEAR(got, 1.0 / (1.0 + x), 2e-8) << x;
  }
}

/*! \brief Rows LiteRT 2.3.0 computed with TFLite's reference SOFTMAX kernel (BUILTIN_REF) for
 * int8 inputs of the given scale (a Keras Dense -> softmax converted by TFLiteConverter). */
struct SoftmaxGolden {
  double input_scale;
  std::vector<int> input;
  std::vector<int> output;
};

const std::vector<SoftmaxGolden>& SoftmaxGoldens() {
  static const std::vector<SoftmaxGolden> goldens = {
      {0.02124256081879139,
       {0, -45, -78, 9, -125, -9, 101, 54, 49, 5, -57, 4},
       {-116, -123, -126, -113, -127, -118, -22, -89, -93, -114, -124, -115}},
      {0.02124256081879139,
       {-65, 22, -114, 7, 15, 16, 34, 5, 6, -64, -20, 13},
       {-123, -95, -126, -104, -100, -99, -86, -105, -105, -123, -115, -101}},
      {0.15229007601737976,
       {12,   44, 127, -82, -128, 111, 51,  -67, 106, 68,   -99, 127, 85, -117,
        -101, 79, 87,  -9,  -105, 17,  104, -20, -54, -114, 80,  73,  27, 22,
        -79,  32, 109, -44, 127,  -33, 126, 35,  -47, -64,  20,  -112},
       {-128, -128, -65,  -128, -128, -123, -128, -128, -125, -128, -128, -65,  -128, -128,
        -128, -128, -128, -128, -128, -128, -126, -128, -128, -128, -128, -128, -128, -128,
        -128, -128, -124, -128, -65,  -128, -74,  -128, -128, -128, -128, -128}},
  };
  return goldens;
}

TEST(TfliteArithmeticTest, SoftmaxMatchesLiteRtReferenceKernel) {
  for (const SoftmaxGolden& golden : SoftmaxGoldens()) {
    const tflite::SoftmaxTables tables = tflite::MakeSoftmaxTables(golden.input_scale);
    const std::vector<float> x(golden.input.begin(), golden.input.end());
    std::vector<float> y(x.size());
    tflite::SoftmaxRow(x.data(), static_cast<int64_t>(x.size()), 1, tables, -128, 127, y.data());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], golden.output[i]) << i;
  }
}

TEST(TfliteArithmeticTest, SoftmaxIsWithinAStepOfTheRealSoftmax) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> value(-128, 127);
  for (double scale : {0.004, 0.02, 0.1, 0.5}) {
    const tflite::SoftmaxTables tables = tflite::MakeSoftmaxTables(scale);
    for (int row = 0; row < 50; ++row) {
      std::vector<float> x(1 + row % 30);
      for (float& v : x) v = static_cast<float>(value(rng));
      std::vector<float> y(x.size());
      tflite::SoftmaxRow(x.data(), static_cast<int64_t>(x.size()), 1, tables, -128, 127, y.data());
      const float max = *std::max_element(x.begin(), x.end());
      double sum = 0;
      for (float v : x) sum += std::exp(scale * (v - max));
      for (size_t i = 0; i < x.size(); ++i) {
        const double real = std::exp(scale * (x[i] - max)) / sum * 256 - 128;
        ASSERT_LE(std::abs(y[i] - std::clamp(real, -128.0, 127.0)), 1.0) << scale << " " << i;
      }
    }
  }
}

TEST(TfliteArithmeticTest, QnnOpsInTfliteRoundingFollowTheKernels) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> value(-128, 127);
  const QuantizedOutput out{-3, -128, 127};
  std::vector<float> a(400), b(400), y(400);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(value(rng));
    b[i] = static_cast<float>(value(rng));
  }
  // Requantize: (x - zp) rescaled once, as TFLite's QUANTIZE int8 -> int8.
  const RequantizeParams requant = MakeRequantizeParams(0.031f, 7, 0.017f, out, Rounding::kTflite);
  Requantize(a.data(), static_cast<int64_t>(a.size()), requant, y.data());
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t expected = NaiveMultiply(static_cast<int64_t>(a[i]) - 7, requant.multiplier);
    ASSERT_EQ(y[i], std::clamp<int64_t>(expected - 3, -128, 127)) << i;
  }
  // ADD: 20 bits up, each input rescaled by s_i / (2 max s), the sum by 2 max s / (2^20 s_out).
  const float sa = 0.05f, sb = 0.02f, so = 0.06f;
  const QuantizedBinaryParams add = MakeQuantizedBinaryParams(QuantizedBinaryKind::kAdd, sa, 4, sb,
                                                              -9, so, out, Rounding::kTflite);
  const Shape shape = {20, 20};
  QuantizedBinary(a.data(), shape, b.data(), shape, y.data(), shape, add);
  const FixedPointMultiplier ma = QuantizeMultiplier(sa / (2.0 * sa));
  const FixedPointMultiplier mb = QuantizeMultiplier(sb / (2.0 * sa));
  const FixedPointMultiplier mo = QuantizeMultiplier(2.0 * sa / (1048576.0 * so));
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t sum = NaiveMultiply((static_cast<int64_t>(a[i]) - 4) * (int64_t{1} << 20), ma) +
                        NaiveMultiply((static_cast<int64_t>(b[i]) + 9) * (int64_t{1} << 20), mb);
    ASSERT_EQ(y[i], std::clamp<int64_t>(NaiveMultiply(sum, mo) - 3, -128, 127)) << i;
  }
  // MUL: the product of the offset inputs, rescaled by float32(float32(sa sb) / so).
  const QuantizedBinaryParams mul = MakeQuantizedBinaryParams(QuantizedBinaryKind::kMultiply, sa, 4,
                                                              sb, -9, so, out, Rounding::kTflite);
  QuantizedBinary(a.data(), shape, b.data(), shape, y.data(), shape, mul);
  const FixedPointMultiplier mm = QuantizeMultiplier(static_cast<float>(sa * sb / so));
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t product = (static_cast<int64_t>(a[i]) - 4) * (static_cast<int64_t>(b[i]) + 9);
    ASSERT_EQ(y[i], std::clamp<int64_t>(NaiveMultiply(product, mm) - 3, -128, 127)) << i;
  }
}

TEST(TfliteArithmeticTest, MultiplyOfEqualAndBroadcastShapesFollowsTheKernel) {
  // The rows of equal shapes, of a per-channel scale ([1, 6, 7, 37] x [1, 1, 1, 37], a
  // squeeze-excite) and of a scalar, against the naive double rounding of the offset product,
  // over random scales (multipliers below and above 1) and zero points.
  std::mt19937 rng(21);
  std::uniform_int_distribution<int> value(-128, 127);
  std::uniform_real_distribution<float> scale(0.001f, 0.3f);
  const Shape shape = {1, 6, 7, 37}, channels = {1, 1, 1, 37}, scalar = {1};
  const int64_t size = NumElements(shape);
  std::vector<float> a(size), b(size), y(size);
  for (int trial = 0; trial < 40; ++trial) {
    for (int64_t i = 0; i < size; ++i) {
      a[i] = static_cast<float>(value(rng));
      b[i] = static_cast<float>(value(rng));
    }
    const float sa = scale(rng), sb = scale(rng), so = trial % 4 == 0 ? 0.0005f : scale(rng);
    const int64_t za = value(rng), zb = value(rng);
    const QuantizedOutput out{value(rng), -128 + trial, 127};
    const QuantizedBinaryParams mul = MakeQuantizedBinaryParams(
        QuantizedBinaryKind::kMultiply, sa, za, sb, zb, so, out, Rounding::kTflite);
    for (const Shape& rhs_shape : {shape, channels, scalar}) {
      QuantizedBinary(a.data(), shape, b.data(), rhs_shape, y.data(), shape, mul);
      const int64_t rhs_size = NumElements(rhs_shape);
      for (int64_t i = 0; i < size; ++i) {
        const int64_t product =
            (static_cast<int64_t>(a[i]) - za) * (static_cast<int64_t>(b[i % rhs_size]) - zb);
        const float expected = static_cast<float>(std::clamp<int64_t>(
            NaiveMultiply(product, mul.lhs) + out.zero_point, out.min, out.max));
        ASSERT_EQ(y[i], expected) << "trial " << trial << ", rhs of " << rhs_size
                                  << " elements, element " << i;
      }
    }
  }
}

TEST(TfliteArithmeticTest, AddOfEqualShapesAndBroadcastAddFollowTheKernel) {
  // Equal shapes take the vector row (sixteen int32 lanes, a masked tail), others the element-wise
  // op: both against the naive double rounding, over random scales and zero points.
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> value(-128, 127);
  std::uniform_real_distribution<float> scale(0.001f, 0.2f);
  const Shape shape = {37, 5}, lifted = {1, 37, 5};
  std::vector<float> a(37 * 5), b(a.size()), same(a.size()), broadcast(a.size());
  for (int trial = 0; trial < 50; ++trial) {
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<float>(value(rng));
      b[i] = static_cast<float>(value(rng));
    }
    const float sa = scale(rng), sb = scale(rng), so = scale(rng);
    const int64_t za = value(rng), zb = value(rng);
    const QuantizedOutput out{value(rng), -128 + trial, 127};
    const QuantizedBinaryParams add = MakeQuantizedBinaryParams(QuantizedBinaryKind::kAdd, sa, za,
                                                                sb, zb, so, out, Rounding::kTflite);
    QuantizedBinary(a.data(), shape, b.data(), shape, same.data(), shape, add);
    QuantizedBinary(a.data(), shape, b.data(), lifted, broadcast.data(), lifted, add);
    for (size_t i = 0; i < a.size(); ++i) {
      const int64_t sum =
          NaiveMultiply((static_cast<int64_t>(a[i]) - za) * (int64_t{1} << 20), add.lhs) +
          NaiveMultiply((static_cast<int64_t>(b[i]) - zb) * (int64_t{1} << 20), add.rhs);
      const float expected = static_cast<float>(
          std::clamp<int64_t>(NaiveMultiply(sum, add.output) + out.zero_point, out.min, out.max));
      ASSERT_EQ(same[i], expected) << "trial " << trial << ", element " << i;
      ASSERT_EQ(broadcast[i], expected) << "trial " << trial << ", element " << i;
    }
  }
}

TEST(TfliteArithmeticTest, AddOfUint8FollowsTheKernel) {
  // uint8 operands and zero points: the widest differences (255 x 2^20) the int32 lanes take.
  std::mt19937 rng(10);
  std::uniform_int_distribution<int> value(0, 255);
  const Shape shape = {9, 7};
  std::vector<float> a(63), b(63), y(63);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(value(rng));
    b[i] = static_cast<float>(value(rng));
  }
  const QuantizedOutput out{128, 0, 255};
  const QuantizedBinaryParams add = MakeQuantizedBinaryParams(
      QuantizedBinaryKind::kAdd, 0.03f, 0, 0.02f, 255, 0.04f, out, Rounding::kTflite);
  QuantizedBinary(a.data(), shape, b.data(), shape, y.data(), shape, add);
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t sum =
        NaiveMultiply(static_cast<int64_t>(a[i]) * (int64_t{1} << 20), add.lhs) +
        NaiveMultiply((static_cast<int64_t>(b[i]) - 255) * (int64_t{1} << 20), add.rhs);
    ASSERT_EQ(y[i], std::clamp<int64_t>(NaiveMultiply(sum, add.output) + 128, 0, 255)) << i;
  }
}

TEST(TfliteArithmeticTest, AveragePoolAndMeanFollowTheirKernels) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> value(-128, 127);
  const Shape in_shape = {1, 5, 7, 3};
  std::vector<float> x(5 * 7 * 3);
  for (float& v : x) v = static_cast<float>(value(rng));
  Pool2dParams pool;
  pool.kind = PoolKind::kAvg;
  pool.pool_size = {3, 3};
  pool.strides = {2, 2};
  pool.padding = {1, 1, 1, 1};
  pool.count_include_pad = false;
  pool.layout = DataLayout::kNHWC;
  // AVERAGE_POOL_2D: raw values of the in-bounds taps, rounded average, input zero point kept.
  const QuantizedOutput out{-5, -128, 127};
  const QuantizedPoolParams avg =
      MakeQuantizedPoolParams(pool, 0.1, -5, 0.1, out, Rounding::kTflite, false);
  const Shape out_shape = {1, 3, 4, 3};
  std::vector<float> y(3 * 4 * 3);
  QuantizedPool2d(x.data(), in_shape, y.data(), out_shape, avg);
  for (int64_t oh = 0; oh < 3; ++oh) {
    for (int64_t ow = 0; ow < 4; ++ow) {
      for (int64_t c = 0; c < 3; ++c) {
        int64_t sum = 0, count = 0;
        for (int64_t kh = 0; kh < 3; ++kh) {
          for (int64_t kw = 0; kw < 3; ++kw) {
            const int64_t ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
            if (ih < 0 || ih >= 5 || iw < 0 || iw >= 7) continue;
            sum += static_cast<int64_t>(x[(ih * 7 + iw) * 3 + c]);
            ++count;
          }
        }
        const double average = static_cast<double>(sum) / count;
        ASSERT_EQ(y[(oh * 4 + ow) * 3 + c], std::round(average)) << oh << " " << ow << " " << c;
      }
    }
  }
  // MEAN over the whole plane: (sum - zp n) rescaled by s_in / s_out with 1/n folded in.
  Pool2dParams plane = pool;
  plane.pool_size = {5, 7};
  plane.strides = {1, 1};
  plane.padding = {0, 0, 0, 0};
  const QuantizedPoolParams mean =
      MakeQuantizedPoolParams(plane, 0.1, -5, 0.08, {2, -128, 127}, Rounding::kTflite, true);
  std::vector<float> means(3);
  QuantizedPool2d(x.data(), in_shape, means.data(), {1, 1, 1, 3}, mean);
  const FixedPointMultiplier folded = tflite::MeanMultiplier(QuantizeMultiplier(0.1 / 0.08), 35);
  for (int64_t c = 0; c < 3; ++c) {
    int64_t sum = 0;
    for (int64_t p = 0; p < 35; ++p) sum += static_cast<int64_t>(x[p * 3 + c]) + 5;
    EXPECT_EQ(means[c], std::clamp<int64_t>(NaiveMultiply(sum, folded) + 2, -128, 127)) << c;
    EXPECT_NEAR(means[c], 2 + sum * 0.1 / 0.08 / 35, 0.5 + 1e-6) << c;
  }
  // The same over 37 channels: whole vectors of the channel loop and a tail.
  constexpr int64_t kWide = 37;
  std::vector<float> wide(5 * 7 * kWide), wide_means(kWide);
  for (float& v : wide) v = static_cast<float>(value(rng));
  QuantizedPool2d(wide.data(), {1, 5, 7, kWide}, wide_means.data(), {1, 1, 1, kWide}, mean);
  for (int64_t c = 0; c < kWide; ++c) {
    int64_t sum = 0;
    for (int64_t p = 0; p < 35; ++p) sum += static_cast<int64_t>(wide[p * kWide + c]) + 5;
    EXPECT_EQ(wide_means[c], std::clamp<int64_t>(NaiveMultiply(sum, folded) + 2, -128, 127)) << c;
  }
}

}  // namespace
}  // namespace kernels
}  // namespace example_npu
