/*!
 * \file kernels/tflite_arithmetic.cc
 * \brief TFLite's integer arithmetic (tflite_arithmetic.h). gemmlowp's fixed-point values are
 * int32 raws with a fixed number of integer bits (Q<i>.<31 - i>); additions wrap as on the
 * hardware they were written for, so they are done in uint32 here (no signed overflow).
 */
#include "kernels/tflite_arithmetic.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace example_npu {
namespace kernels {
namespace tflite {
namespace {

constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();

int32_t WrappingAdd(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

int32_t WrappingSub(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b));
}

/*! \brief x * 2^exponent, saturating to the int32 range (gemmlowp's positive-exponent
 * SaturatingRoundingMultiplyByPOT: a Rescale to fewer integer bits). */
int32_t SaturatingShiftLeft(int32_t x, int exponent) {
  const int32_t threshold = static_cast<int32_t>((int64_t{1} << (31 - exponent)) - 1);
  if (x > threshold) return kInt32Max;
  if (x < -threshold) return kInt32Min;
  return static_cast<int32_t>(static_cast<int64_t>(x) * (int64_t{1} << exponent));
}

/*! \brief exp(a) for a in [-1/4, 0), Q0.31: a Taylor expansion around -1/8. */
int32_t ExpOnIntervalNegativeQuarterToZero(int32_t a) {
  constexpr int32_t kExpMinusOneEighth = 1895147668;   // exp(-1/8) in Q0.31
  constexpr int32_t kOneThird = 715827883;             // 1/3 in Q0.31
  const int32_t x = WrappingAdd(a, int32_t{1} << 28);  // a + 1/8
  const int32_t x2 = SaturatingRoundingDoublingHighMul(x, x);
  const int32_t x3 = SaturatingRoundingDoublingHighMul(x2, x);
  const int32_t x4 = SaturatingRoundingDoublingHighMul(x2, x2);
  const int32_t x4_over_4 = RoundingDivideByPowerOfTwo(x4, 2);
  const int32_t polynomial = RoundingDivideByPowerOfTwo(
      WrappingAdd(SaturatingRoundingDoublingHighMul(WrappingAdd(x4_over_4, x3), kOneThird), x2), 1);
  return WrappingAdd(kExpMinusOneEighth, SaturatingRoundingDoublingHighMul(
                                             kExpMinusOneEighth, WrappingAdd(x, polynomial)));
}

}  // namespace

int32_t SaturatingRoundingDoublingHighMul(int32_t a, int32_t b) {
  if (a == kInt32Min && b == kInt32Min) return kInt32Max;
  const int64_t product = static_cast<int64_t>(a) * b;
  const int64_t nudge = product >= 0 ? (int64_t{1} << 30) : 1 - (int64_t{1} << 30);
  return static_cast<int32_t>((product + nudge) / (int64_t{1} << 31));
}

int32_t RoundingDivideByPowerOfTwo(int32_t x, int exponent) {
  TVM_FFI_ICHECK(exponent >= 0 && exponent <= 31) << "rounding shift " << exponent;
  const int32_t mask = static_cast<int32_t>((int64_t{1} << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

void CheckInMultiplierRange(const FixedPointMultiplier& m) {
  TVM_FFI_ICHECK(InMultiplierRange(m.m0, m.shift))
      << "multiplier " << m.m0 << " * 2^-" << m.shift << " is outside TFLite's range";
}

int64_t MultiplyByQuantizedMultiplier(int64_t x, const FixedPointMultiplier& m) {
  CheckInMultiplierRange(m);
  return MultiplyByQuantizedMultiplierInRange(x, m.m0, m.shift);
}

int64_t RoundedAverage(int64_t sum, int64_t count) {
  return sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
}

FixedPointMultiplier MeanMultiplier(const FixedPointMultiplier& m, int64_t count) {
  TVM_FFI_ICHECK(count > 0) << "a mean over no elements";
  const int64_t exponent = 31 - m.shift;
  int64_t shift = 63 - __builtin_clzll(static_cast<uint64_t>(count));
  shift = std::min<int64_t>({shift, 32, 31 + exponent});
  return FixedPointMultiplier{(m.m0 << shift) / count, m.shift + shift};
}

AddRealMultipliers MakeAddRealMultipliers(float lhs_scale, float rhs_scale, float output_scale) {
  // As TFLite's Prepare computes them: twice the larger input scale in float32, the ratios in
  // double, 2^20 times the output scale in float32.
  const double twice_max = 2 * std::max(lhs_scale, rhs_scale);
  const float shifted_output =
      static_cast<float>(1 << AddRealMultipliers::kLeftShift) * output_scale;
  return AddRealMultipliers{lhs_scale / twice_max, rhs_scale / twice_max,
                            twice_max / shifted_output};
}

double MulRealMultiplier(float lhs_scale, float rhs_scale, float output_scale) {
  return static_cast<float>(lhs_scale * rhs_scale / output_scale);
}

int32_t ExpOnNegativeValues(int32_t a) {
  constexpr int kFractionalBits = 26;  // Q5.26
  constexpr int32_t kOneQuarter = int32_t{1} << (kFractionalBits - 2);
  const int32_t a_mod_quarter_minus_quarter = WrappingSub(a & (kOneQuarter - 1), kOneQuarter);
  int32_t result =
      ExpOnIntervalNegativeQuarterToZero(SaturatingShiftLeft(a_mod_quarter_minus_quarter, 5));
  const int32_t remainder = WrappingSub(a_mod_quarter_minus_quarter, a);
  // exp(-2^k) in Q0.31 for k = -2 .. 4: one factor per bit of the remaining multiple of 1/4.
  constexpr struct {
    int exponent;
    int32_t factor;
  } kFactors[] = {{-2, 1672461947}, {-1, 1302514674}, {0, 790015084}, {1, 290630308},
                  {2, 39332535},    {3, 720401},      {4, 242}};
  for (const auto& f : kFactors) {
    if (remainder & (int32_t{1} << (kFractionalBits + f.exponent))) {
      result = SaturatingRoundingDoublingHighMul(result, f.factor);
    }
  }
  return a == 0 ? kInt32Max : result;
}

int32_t OneOverOnePlusX(int32_t a) {
  constexpr int32_t kOneQ2 = int32_t{1} << 29;              // 1.0 in Q2.29
  constexpr int32_t k48Over17 = 1515870810;                 // Q2.29
  constexpr int32_t kMinus32Over17 = -1010580540;           // Q2.29
  const int64_t sum = static_cast<int64_t>(a) + kInt32Max;  // (a + 1) / 2, rounded half away
  const int32_t half_denominator = static_cast<int32_t>((sum + (sum >= 0 ? 1 : -1)) / 2);
  int32_t x =
      WrappingAdd(k48Over17, SaturatingRoundingDoublingHighMul(half_denominator, kMinus32Over17));
  for (int i = 0; i < 3; ++i) {  // Newton-Raphson steps in Q2.29
    const int32_t one_minus_dx =
        WrappingSub(kOneQ2, SaturatingRoundingDoublingHighMul(half_denominator, x));
    x = WrappingAdd(x, SaturatingShiftLeft(SaturatingRoundingDoublingHighMul(x, one_minus_dx), 2));
  }
  return SaturatingShiftLeft(x, 1);  // x / 2 in Q1.30, as Q0.31
}

SoftmaxTables MakeSoftmaxTables(double input_scale) {
  constexpr int kScaledDiffIntegerBits = 5;
  constexpr int kAccumulationIntegerBits = 12;
  const double real =
      std::min(input_scale * static_cast<double>(1 << (31 - kScaledDiffIntegerBits)),
               static_cast<double>((int64_t{1} << 31) - 1));
  const FixedPointMultiplier multiplier = QuantizeMultiplier(real);
  const int64_t left_shift = 31 - multiplier.shift;
  TVM_FFI_ICHECK(left_shift >= 0 && left_shift <= 31) << "softmax input scale " << input_scale;
  SoftmaxTables tables;
  tables.diff_min = -static_cast<int32_t>(
      std::floor(static_cast<double>((1 << kScaledDiffIntegerBits) - 1) *
                 static_cast<double>(int64_t{1} << (31 - kScaledDiffIntegerBits)) /
                 static_cast<double>(int64_t{1} << left_shift)));
  for (int32_t d = 0; d <= 255; ++d) {
    int32_t exp_q0_31 = 0;
    if (-d >= tables.diff_min) {
      const int32_t scaled =
          SaturatingRoundingDoublingHighMul(static_cast<int32_t>(-d * (int64_t{1} << left_shift)),
                                            static_cast<int32_t>(multiplier.m0));
      exp_q0_31 = ExpOnNegativeValues(scaled);
    }
    tables.exp_q0_31.push_back(exp_q0_31);
    tables.exp_q12_19.push_back(RoundingDivideByPowerOfTwo(exp_q0_31, kAccumulationIntegerBits));
  }
  return tables;
}

void SoftmaxRow(const float* x, int64_t length, int64_t stride, const SoftmaxTables& tables,
                int64_t out_min, int64_t out_max, float* out) {
  constexpr int kAccumulationIntegerBits = 12;
  int64_t max_q = static_cast<int64_t>(x[0]);
  for (int64_t a = 1; a < length; ++a) max_q = std::max(max_q, static_cast<int64_t>(x[a * stride]));
  auto difference = [&](int64_t a) {
    const int64_t d = max_q - static_cast<int64_t>(x[a * stride]);
    TVM_FFI_ICHECK(d >= 0 && d <= 255) << "softmax input is not 8-bit";
    return d;
  };
  int32_t sum = 0;  // Q12.19
  for (int64_t a = 0; a < length; ++a) {
    const int64_t d = difference(a);
    if (-d >= tables.diff_min) sum = WrappingAdd(sum, tables.exp_q12_19[d]);
  }
  // The reciprocal of the sum (at least exp(0) > 0): 1 / (1 + x) of its mantissa.
  const int headroom_plus_one = __builtin_clz(static_cast<uint32_t>(sum));
  const int num_bits_over_unit = kAccumulationIntegerBits - headroom_plus_one;
  const int32_t shifted_sum_minus_one = static_cast<int32_t>(
      (static_cast<uint32_t>(sum) << headroom_plus_one) - (static_cast<uint32_t>(1) << 31));
  const int32_t shifted_scale = OneOverOnePlusX(shifted_sum_minus_one);
  // TFLite stops on an exponent above 31 (more than ~500 maximal entries in a row); clamp it.
  const int exponent = std::min(num_bits_over_unit + 31 - 8, 31);
  for (int64_t a = 0; a < length; ++a) {
    const int64_t d = difference(a);
    int64_t y = out_min;
    if (-d >= tables.diff_min) {
      const int32_t unsaturated = RoundingDivideByPowerOfTwo(
          SaturatingRoundingDoublingHighMul(shifted_scale, tables.exp_q0_31[d]), exponent);
      y = std::clamp(unsaturated + out_min, out_min, out_max);
    }
    out[a * stride] = static_cast<float>(y);
  }
}

}  // namespace tflite
}  // namespace kernels
}  // namespace example_npu
