/*!
 * \file kernels/rounded_product.h
 * \brief RoundedProduct16: a rounded fixed-point product of sixteen int32 lanes, the vector step of
 * the integer requantizations (requantize.cc: the layers' fused requantization; quantized_ops.cc:
 * TFLite's ADD); EstimatedRounding16, its float32 estimate for 8-bit results. AVX-512 builds only.
 */
#ifndef EXAMPLE_NPU_KERNELS_ROUNDED_PRODUCT_H_
#define EXAMPLE_NPU_KERNELS_ROUNDED_PRODUCT_H_

#if defined(__AVX512F__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/tflite_arithmetic.h"

namespace example_npu {
namespace kernels {

// All sixteen int32 lanes, for the maskz forms (GCC 12 warns about the plain intrinsics).
constexpr __mmask16 kAll16 = 0xffff;

/*!
 * \brief The quick near-tie test of kernels/near_ties.h for a block of sixteen channels, laid out
 * as RoundedProduct16's even and odd lanes: an output is a candidate where its nudged product
 * (x m0 + 2^(shift-1)) plus `window` leaves a remainder below 2 window modulo 2^shift. Channels
 * past the block's end never are (width 0).
 */
struct NearTieLanes16 {
  __m512i window[2], mask[2], width[2];

  static constexpr size_t kWords = 48;

  /*! \brief Written from `count` (<= 16) channels' windows and shifts. */
  static void Build(const int64_t* window, const int64_t* shift, int64_t count, int64_t* words) {
    std::fill(words, words + kWords, 0);
    for (int64_t c = 0; c < count; ++c) {
      const int64_t lane = 8 * (c % 2) + c / 2;
      words[lane] = window[c];
      words[16 + lane] = (int64_t{1} << shift[c]) - 1;
      words[32 + lane] = 2 * window[c];
    }
  }
  static NearTieLanes16 Load(const int64_t* words) {
    NearTieLanes16 n;
    __m512i* vectors[] = {&n.window[0], &n.window[1], &n.mask[0],
                          &n.mask[1],   &n.width[0],  &n.width[1]};
    for (__m512i* v : vectors) {
      *v = _mm512_loadu_si512(words);
      words += 8;
    }
    return n;
  }
};

/*!
 * \brief A rounded fixed-point product of sixteen int32 lanes, floor((x m0 + nudge - [x m0 <
 * -2^30] fix) / 2^shift) per channel, with its parameters laid out as the even and the odd lanes'
 * 32 x 32 -> 64-bit products take them (index 0: channels 0, 2, .., 14 of the block; 1: channels
 * 1, 3, .., 15); exact in 64 bits for m0 < 2^31.
 *
 * TFLite's double rounding: the doubling high multiply t = floor((x m0 + 2^30) / 2^31), then t /
 * 2^r rounded half away from zero, (t + 2^(r-1) - [t < 0]) / 2^r rounded down for r >= 1. Both
 * are floors of quotients by powers of two, so they make one: nudge = 2^30 + 2^(30+r), fix = 2^31,
 * shift = 31 + r (nudge = 2^30 and fix = 0 for r = 0). Five operations per eight lanes where the
 * two roundings took eight. One rounding half up (TVM's, TFLite's single rounding): nudge =
 * 2^(shift-1), fix = 0, one 32-bit product where a 64-bit multiply takes three operations.
 */
struct RoundedProduct16 {
  __m512i m0[2], nudge[2], fix[2], shift[2];

  static constexpr size_t kWords = 64;  // a block as Store writes it

  /*! \brief TFLite's double rounding from sixteen channels' m0 and right shifts (int32 lanes). */
  static RoundedProduct16 DoubleRounding(__m512i m0, __m512i right) {
    const __m512i low = _mm512_set1_epi64(0xffffffff);
    const __m512i rights[2] = {_mm512_and_si512(right, low),
                               _mm512_maskz_srli_epi64(tflite::kAllLanes, right, 32)};
    RoundedProduct16 d;
    d.m0[0] = m0;
    d.m0[1] = _mm512_maskz_srli_epi64(tflite::kAllLanes, m0, 32);
    for (int h = 0; h < 2; ++h) {
      const __mmask8 shifts = _mm512_cmpgt_epi64_mask(rights[h], _mm512_setzero_si512());
      d.nudge[h] = _mm512_add_epi64(
          _mm512_set1_epi64(int64_t{1} << 30),
          _mm512_maskz_sllv_epi64(shifts, _mm512_set1_epi64(int64_t{1} << 30), rights[h]));
      d.fix[h] = _mm512_maskz_mov_epi64(shifts, _mm512_set1_epi64(int64_t{1} << 31));
      d.shift[h] = _mm512_add_epi64(rights[h], _mm512_set1_epi64(31));
    }
    return d;
  }

  /*! \brief One rounding half up of x m0 / 2^shift for `count` (<= 16) channels, written as
   * Store writes a block (m0 in (0, 2^31), shift in [1, 62]). */
  static void SingleRounding(const int64_t* m0, const int64_t* shift, int64_t count,
                             int64_t* words) {
    std::fill(words, words + kWords, 0);
    for (int64_t c = 0; c < count; ++c) {
      const int64_t lane = 8 * (c % 2) + c / 2;
      words[lane] = m0[c];
      words[16 + lane] = int64_t{1} << (shift[c] - 1);
      words[48 + lane] = shift[c];
    }
  }

  void Store(int64_t* words) const {
    const __m512i* vectors[] = {&m0[0],  &m0[1],  &nudge[0], &nudge[1],
                                &fix[0], &fix[1], &shift[0], &shift[1]};
    for (const __m512i* v : vectors) {
      _mm512_storeu_si512(words, *v);
      words += 8;
    }
  }
  static RoundedProduct16 Load(const int64_t* words) {
    RoundedProduct16 d;
    __m512i* vectors[] = {&d.m0[0],  &d.m0[1],  &d.nudge[0], &d.nudge[1],
                          &d.fix[0], &d.fix[1], &d.shift[0], &d.shift[1]};
    for (__m512i* v : vectors) {
      *v = _mm512_loadu_si512(words);
      words += 8;
    }
    return d;
  }

  /*! \brief The rounded products of sixteen int32 lanes. */
  __m512i Apply(__m512i shifted) const { return Rounded<false>(shifted, nullptr, nullptr); }

  /*! \brief Apply, and in *candidates the channels (bit c: channel c of the block) whose product
   * passes `near`'s quick near-tie test, from the same products (single rounding: fix 0). */
  __m512i Apply(__m512i shifted, const NearTieLanes16& near, __mmask16* candidates) const {
    return Rounded<true>(shifted, &near, candidates);
  }

 private:
  /*! \brief Bit k of `bits` moved to bit 2k. */
  static uint32_t EvenBits(uint32_t bits) {
    bits = (bits | (bits << 4)) & 0x0f0fu;
    bits = (bits | (bits << 2)) & 0x3333u;
    return (bits | (bits << 1)) & 0x5555u;
  }

  template <bool kNearTies>
  __m512i Rounded(__m512i shifted, const NearTieLanes16* near, __mmask16* candidates) const {
    const __m512i below = _mm512_set1_epi64(-(int64_t{1} << 30));
    const __m512i lanes[2] = {shifted, _mm512_maskz_srli_epi64(tflite::kAllLanes, shifted, 32)};
    __m512i rounded[2];
    __mmask8 near_lanes[2] = {0, 0};
    for (int h = 0; h < 2; ++h) {
      const __m512i product = _mm512_maskz_mul_epi32(tflite::kAllLanes, lanes[h], m0[h]);
      const __mmask8 negative = _mm512_cmplt_epi64_mask(product, below);
      const __m512i nudged = _mm512_add_epi64(product, nudge[h]);
      if constexpr (kNearTies) {
        const __m512i remainder =
            _mm512_and_si512(_mm512_add_epi64(nudged, near->window[h]), near->mask[h]);
        near_lanes[h] = _mm512_cmplt_epi64_mask(remainder, near->width[h]);
      }
      rounded[h] = _mm512_maskz_srav_epi64(
          tflite::kAllLanes, _mm512_mask_sub_epi64(nudged, negative, nudged, fix[h]), shift[h]);
    }
    if constexpr (kNearTies) {
      // Lane k of half 0 is channel 2k, of half 1 channel 2k + 1.
      *candidates =
          static_cast<__mmask16>(EvenBits(near_lanes[0]) | (EvenBits(near_lanes[1]) << 1));
    }
    // Results of |r| < 2^31 (as the callers keep them): lane k's low 32 bits hold channel 2k
    // (even) or 2k + 1 (odd).
    const __m512i interleave =
        _mm512_set_epi32(30, 14, 28, 12, 26, 10, 24, 8, 22, 6, 20, 4, 18, 2, 16, 0);
    return _mm512_permutex2var_epi32(rounded[0], interleave, rounded[1]);
  }
};

/*!
 * \brief A fixed-point requantization of sixteen int32 lanes estimated in float32, for results
 * stored in 8 bits: y = x s + zero point (s the multiplier in float32, one multiply-add) clamped
 * to the output range and rounded to the nearest integer, without RoundedProduct16's two 64-bit
 * products and their recombination.
 * It serves TFLite's double rounding and the single rounding (TFLite's FULLY_CONNECTED, TVM's
 * exact rounding below 2^31).
 *
 * Why that is the exact rounding's integer wherever a lane is "sure": let p be the exact product.
 * A single rounding rounds p itself (halves up), so p farther than the window from every
 * half-integer rounds to p's nearest integer. TFLite's double rounding first rounds p 2^-r
 * apart, which moves it by at most 2^-(r + 1) (half a unit of 2^-r), so where p lies farther than
 * that from every half-integer, the rounded value lies strictly on p's side of the half-integer
 * the second rounding decides at, and both round to p's nearest integer (r = 0: one rounding,
 * decided at the half-integer itself). In the output range (8-bit: |y| < 256, |y - zero point|
 * <= 512) y is within 2^-13 of p + zero point: the roundings of x and s, each relative 2^-24
 * (2^-14 together at 512), and the multiply-add's, half a unit of y (2^-17). A lane is sure where
 * |y - round(y)| < 1/2 - window - 2^-13 (window: 2^-(r + 1) for the double rounding, 0 for the
 * single); a lane clamped to the range is sure (a bound is an integer, and p rounds to it or
 * beyond). Unsure lanes are about 1 in 2^r plus 1 in 4096: then the caller takes the exact
 * product.
 */
struct EstimatedRounding16 {
  __m512 scale, sure_below;

  /*! \brief One channel's scale and sure bound for TFLite's double rounding (m0 / 2^(31 + right),
   * the first rounding 2^-right apart). */
  static void DoubleRoundingChannel(int32_t m0, int32_t right, float* scale, float* sure_below) {
    Channel(std::ldexp(static_cast<double>(m0), -31 - right),
            right >= 1 ? std::ldexp(1.0, -right - 1) : 0.0, scale, sure_below);
  }
  /*! \brief One channel's scale and sure bound for the single rounding of m0 / 2^shift. */
  static void SingleRoundingChannel(int64_t m0, int64_t shift, float* scale, float* sure_below) {
    Channel(std::ldexp(static_cast<double>(m0), static_cast<int>(-shift)), 0.0, scale, sure_below);
  }
  static EstimatedRounding16 Load(const float* scales, const float* sure_below, __mmask16 lanes) {
    return {_mm512_maskz_loadu_ps(lanes, scales), _mm512_maskz_loadu_ps(lanes, sure_below)};
  }

  /*! \brief The output range and zero point as Round reads them. */
  struct Range {
    __m512 lo, hi, zero_point;
    Range(int64_t min, int64_t max, int64_t zero_point)
        : lo(_mm512_set1_ps(static_cast<float>(min))),
          hi(_mm512_set1_ps(static_cast<float>(max))),
          zero_point(_mm512_set1_ps(static_cast<float>(zero_point))) {}
  };

  /*!
   * \brief Where every lane of `lanes` is sure: *result = round(clamp(x s + zero point, min,
   * max)) (min and max within [-256, 256], min - zero point and max - zero point within [-512,
   * 512]) and true; else false. The zero point is added in the multiply-add's one rounding (below
   * 2^-17 where the result lies in the range, which the 2^-13 margin covers with the product's
   * 2^-14). Without kClamp the result is round(x s + zero point) unclamped, for a caller whose
   * store saturates to the range (and whose scales keep it below 2^31: no overflow).
   */
  template <bool kClamp = true>
  bool Round(__m512i x, __mmask16 lanes, const Range& range, __m512i* result) const {
    __m512 y =
        _mm512_maskz_fmadd_ps(kAll16, _mm512_maskz_cvtepi32_ps(kAll16, x), scale, range.zero_point);
    if constexpr (kClamp) {
      y = _mm512_maskz_min_ps(kAll16, _mm512_maskz_max_ps(kAll16, y, range.lo), range.hi);
    }
    // y less its nearest integer, exactly (vreduceps keeps no fraction bits).
    const __m512 distance = _mm512_abs_ps(
        _mm512_maskz_reduce_ps(kAll16, y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    if (_mm512_mask_cmp_ps_mask(lanes, distance, sure_below, _CMP_NLT_UQ) != 0) return false;
    *result =
        _mm512_maskz_cvt_roundps_epi32(kAll16, y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return true;
  }

 private:
  static void Channel(double multiplier, double window, float* scale, float* sure_below) {
    *scale = static_cast<float>(multiplier);
    // Rounded up by at most 2^-25, which the 2^-13 margin (above the roundings' 2^-14 + 2^-17)
    // covers.
    *sure_below = static_cast<float>(0.5 - window - std::ldexp(1.0, -13));
  }
};

}  // namespace kernels
}  // namespace example_npu

#endif
#endif  // EXAMPLE_NPU_KERNELS_ROUNDED_PRODUCT_H_
