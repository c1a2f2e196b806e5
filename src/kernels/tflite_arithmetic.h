/*!
 * \file kernels/tflite_arithmetic.h
 * \brief TFLite's integer arithmetic, for qnn ops whose "rounding" is "tflite".
 *
 * A full-integer TFLite model means what TFLite's integer kernels compute (its reference kernels
 * are the specification real NPUs are verified against). Those kernels differ from the NPU's
 * default rounding (one exact rounding, half up, quantize.h) in the places below; each function
 * here is written from TFLite's documented behaviour, with a naive reference beside it in
 * tests/cpp/test_tflite_arithmetic.cc.
 *
 *  - Requantization (MultiplyByQuantizedMultiplier, gemmlowp's double rounding): the multiplier
 *    m0 * 2^(e - 31) (QuantizeMultiplier's m0, e = 31 - shift); x * 2^max(e, 0) is multiplied by
 *    m0 and rounded to the high 32 bits half up ("saturating rounding doubling high mul"), then
 *    divided by 2^max(-e, 0) rounding half away from zero.
 *  - ADD: both inputs are shifted left by 20 bits, each rescaled by s_i / (2 max(s_a, s_b)), the
 *    sum rescaled by 2 max(s_a, s_b) / (2^20 s_out); every rescale rounds as above.
 *  - AVERAGE_POOL_2D: the raw int8 values of the in-bounds taps are summed and divided by their
 *    count, rounding half away from zero (input and output share scale and zero point).
 *  - MEAN: (sum - zp_in * n) rescaled by s_in / s_out with 1/n folded into the multiplier:
 *    m0' = (m0 << k) / n (truncated), e' = e - k, k = min(floor(log2 n), 32, 31 + e).
 *  - SOFTMAX (int8 / uint8 input, output scale 1/256 and zero point at the dtype's minimum):
 *    input differences to the row maximum, scaled to Q5.26, go through gemmlowp's fixed-point
 *    exp; the Q12.19 sum's reciprocal is gemmlowp's Newton-Raphson 1 / (1 + x); differences
 *    below diff_min give the minimum output.
 * Logistic, tanh, hard-swish and the other unary int8 kernels are 256-entry tables evaluated at
 * compile time (python: frontend, qnn.lut), so they need nothing here.
 */
#ifndef EXAMPLE_NPU_KERNELS_TFLITE_ARITHMETIC_H_
#define EXAMPLE_NPU_KERNELS_TFLITE_ARITHMETIC_H_

#include <cstdint>
#include <vector>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kernels/quantize.h"

namespace example_npu {
namespace kernels {
namespace tflite {

/*! \brief round_half_up(a * b / 2^31), saturating the one overflow (a = b = INT32_MIN). */
int32_t SaturatingRoundingDoublingHighMul(int32_t a, int32_t b);

/*! \brief x / 2^exponent rounded half away from zero, exponent in [0, 31]. */
int32_t RoundingDivideByPowerOfTwo(int32_t x, int exponent);

/*!
 * \brief TFLite's MultiplyByQuantizedMultiplier(x, m.m0, 31 - m.shift): x * m0 * 2^-shift with
 * its double rounding. m0 < 2^31 and shift in [1, 62]; x * 2^max(31 - shift, 0) must fit int32 as
 * in TFLite (the callers' values do: 8-bit operands, int32 accumulators).
 */
int64_t MultiplyByQuantizedMultiplier(int64_t x, const FixedPointMultiplier& m);

/*! \brief Whether MultiplyByQuantizedMultiplierInRange may compute x * m: m0 in (0, 2^31), shift
 * in [1, 62]. */
inline bool InMultiplierRange(int64_t m0, int64_t shift) {
  return m0 > 0 && m0 < (int64_t{1} << 31) && shift >= 1 && shift <= 62;
}

/*! \brief Raises InternalError unless InMultiplierRange(m.m0, m.shift): the check a caller makes
 * once before a loop of MultiplyByQuantizedMultiplierInRange. */
void CheckInMultiplierRange(const FixedPointMultiplier& m);

/*!
 * \brief MultiplyByQuantizedMultiplier on TFLite's int32 accumulator `value`, for a multiplier
 * InMultiplierRange given as m0 and the left (31 - shift, if positive) and right (shift - 31, if
 * positive) shifts of its exponent. Branch-free int32 arithmetic around one 32 x 32 -> 64-bit
 * product, so that row loops over it vectorise on any x86 (vpmuldq): the requantization of every
 * output on CPUs without AVX-512. m0 < 2^31 keeps the doubling high multiply off its one
 * saturating case.
 */
inline int32_t DoubleRounding(int32_t value, int32_t left_shift, int32_t m0, int32_t right_shift) {
  // TFLite computes value * 2^left_shift in int32: the low 32 bits.
  const int32_t shifted = static_cast<int32_t>(static_cast<uint32_t>(value) << left_shift);
  // round_half_up(shifted * m0 / 2^31) (TFLite's nudge, then division toward zero, is this floor
  // for either sign); it fits int32, so bits 31 to 62 of the sum are the result.
  const int64_t product = int64_t{shifted} * m0;
  const int32_t high =
      static_cast<int32_t>(static_cast<uint64_t>(product + (int64_t{1} << 30)) >> 31);
  // high / 2^right_shift rounded half away from zero (RoundingDivideByPowerOfTwo).
  const int32_t mask = static_cast<int32_t>((uint32_t{1} << right_shift) - 1u);
  const int32_t threshold = (mask >> 1) + (high < 0 ? 1 : 0);
  return (high >> right_shift) + ((high & mask) > threshold ? 1 : 0);
}

#if defined(__AVX2__)
/*!
 * \brief DoubleRounding on eight int32 lanes (AVX2): the even and the odd lanes' 64-bit products
 * (vpmuldq), their bits 31 to 62 blended back into one vector, then the rounding division.
 */
inline __m256i DoubleRounding8(__m256i value, __m256i left_shift, __m256i m0, __m256i right_shift) {
  const __m256i shifted = _mm256_sllv_epi32(value, left_shift);
  const __m256i nudge = _mm256_set1_epi64x(int64_t{1} << 30);
  const __m256i even = _mm256_add_epi64(_mm256_mul_epi32(shifted, m0), nudge);
  const __m256i odd = _mm256_add_epi64(
      _mm256_mul_epi32(_mm256_srli_epi64(shifted, 32), _mm256_srli_epi64(m0, 32)), nudge);
  const __m256i high =
      _mm256_blend_epi32(_mm256_srli_epi64(even, 31), _mm256_slli_epi64(odd, 1), 0xaa);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, right_shift), one);
  // (mask >> 1) + [high < 0]: high >> 31 is -1 for a negative high.
  const __m256i threshold =
      _mm256_sub_epi32(_mm256_srai_epi32(mask, 1), _mm256_srai_epi32(high, 31));
  const __m256i round_up = _mm256_cmpgt_epi32(_mm256_and_si256(high, mask), threshold);  // -1 or 0
  return _mm256_sub_epi32(_mm256_srav_epi32(high, right_shift), round_up);
}
#endif

/*! \brief DoubleRounding of the low 32 bits of x (TFLite's int32 sum) by m0 * 2^-shift. */
inline int64_t MultiplyByQuantizedMultiplierInRange(int64_t x, int64_t m0, int64_t shift) {
  return DoubleRounding(static_cast<int32_t>(static_cast<uint32_t>(x)),
                        static_cast<int32_t>(shift < 31 ? 31 - shift : 0), static_cast<int32_t>(m0),
                        static_cast<int32_t>(shift > 31 ? shift - 31 : 0));
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// All lanes, for the maskz forms of intrinsics whose plain forms GCC 12 warns about.
constexpr __mmask8 kAllLanes = 0xff;
#endif

/*! \brief AVERAGE_POOL_2D's rounding: sum / count, halves away from zero (count > 0). */
int64_t RoundedAverage(int64_t sum, int64_t count);

/*! \brief MEAN's multiplier for a reduction over `count` elements (see the file comment). */
FixedPointMultiplier MeanMultiplier(const FixedPointMultiplier& m, int64_t count);

/*! \brief ADD's real rescaling factors, computed in TFLite's float32 / double mix; each becomes
 * a FixedPointMultiplier. */
struct AddRealMultipliers {
  static constexpr int kLeftShift = 20;  // both inputs are shifted left by this many bits
  double lhs, rhs, output;
};
AddRealMultipliers MakeAddRealMultipliers(float lhs_scale, float rhs_scale, float output_scale);

/*! \brief MUL's real rescaling factor: float32(float32(a * b) / out), as TFLite computes it. */
double MulRealMultiplier(float lhs_scale, float rhs_scale, float output_scale);

/*! \brief gemmlowp's exp(x) for x <= 0: x in Q5.26, result in Q0.31. */
int32_t ExpOnNegativeValues(int32_t x_q5_26);

/*! \brief gemmlowp's 1 / (1 + x) for x in [0, 1): x and result in Q0.31. */
int32_t OneOverOnePlusX(int32_t x_q0_31);

/*! \brief The softmax tables of an 8-bit input with scale `input_scale` (beta 1). */
struct SoftmaxTables {
  int32_t diff_min = 0;             // differences below it contribute 0 and give the minimum
  std::vector<int32_t> exp_q0_31;   // exp of -d for d = max - x in [0, 255], Q0.31
  std::vector<int32_t> exp_q12_19;  // the same, rescaled to the Q12.19 accumulator
};
SoftmaxTables MakeSoftmaxTables(double input_scale);

/*!
 * \brief One softmax row: out[a * stride] for the 8-bit inputs x[a * stride], a < length; the
 * result's range is [out_min, out_max] (the output dtype's), its zero point out_min.
 */
void SoftmaxRow(const float* x, int64_t length, int64_t stride, const SoftmaxTables& tables,
                int64_t out_min, int64_t out_max, float* out);

}  // namespace tflite
}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_TFLITE_ARITHMETIC_H_
