/*!
 * \file kernels/requantize.cc
 * \brief Requantization of integer accumulators (kernels/quantize.h): fixed-point multipliers,
 * TVM's exact rounding and TFLite's double rounding, the latter on sixteen int32 lanes where the
 * CPU has AVX-512.
 */
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/near_ties.h"
#include "kernels/quantize.h"
#include "kernels/requantize_sums.h"
#include "kernels/rounded_product.h"
#include "kernels/tflite_arithmetic.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace example_npu {
namespace kernels {

FixedPointMultiplier QuantizeMultiplier(double real) {
  TVM_FFI_ICHECK(real > 0 && std::isfinite(real)) << "requantization multiplier must be positive";
  int exponent = 0;
  const double fraction = std::frexp(real, &exponent);  // real = fraction * 2^exponent
  int64_t m0 = static_cast<int64_t>(std::llround(fraction * (1LL << 31)));
  if (m0 == (1LL << 31)) {
    m0 /= 2;
    ++exponent;
  }
  const int64_t shift = 31 - exponent;
  TVM_FFI_ICHECK(shift >= 1 && shift <= 62)
      << "requantization multiplier " << real << " is outside [2^-31, 2^30)";
  return FixedPointMultiplier{m0, shift};
}

int64_t RoundHalfEven(double value) { return static_cast<int64_t>(std::nearbyint(value)); }

namespace {

/*!
 * \brief Per-element requantization parameters of a tile, repeated over whole rows until a period
 * of at least kMinPeriod elements, so that the loops over them are long enough to vectorise even
 * for tiles of few channels (depthwise layers of 8 or 16 channels).
 */
struct PeriodicParams {
  static constexpr int64_t kMinPeriod = 64;
  int64_t period = 0;
  const int64_t* m0 = nullptr;
  const int64_t* shift = nullptr;
  const int64_t* rounding = nullptr;
  const int64_t* bias = nullptr;
};

/*! \brief Elements of a period: whole rows of `channels`, at least kMinPeriod, at most the tile. */
int64_t PeriodOf(int64_t size, int64_t channels) {
  const int64_t rows = std::max<int64_t>(1, (PeriodicParams::kMinPeriod + channels - 1) / channels);
  return std::min(size, rows * channels);
}

/*! \brief table[first, period) repeats table[0, first). */
template <typename T>
void RepeatFirstRow(T* table, int64_t first, int64_t period) {
  for (int64_t i = first; i < period; i += first) {
    std::copy_n(table, std::min(first, period - i), table + i);
  }
}

[[noreturn]] __attribute__((noinline)) void RefuseTfliteMultiplier(const FixedPointMultiplier& m) {
  TVM_FFI_THROW(InternalError) << "TFLite requantization multiplier " << m.m0 << " * 2^-" << m.shift
                               << " out of range";
  TVM_FFI_UNREACHABLE();
}

/*! \brief The multiplier of `channel` (per tensor: the only one), checked in range for TFLite's
 * rounding (the refusal kept out of line: this runs per channel of every tile). */
inline const FixedPointMultiplier& ChannelMultiplier(const Requantization& r, int64_t channel) {
  const FixedPointMultiplier& m = r.Multiplier(channel);
  if (r.rounding == Rounding::kTflite && !tflite::InMultiplierRange(m.m0, m.shift)) {
    RefuseTfliteMultiplier(m);
  }
  return m;
}

PeriodicParams MakePeriodicParams(int64_t size, int64_t channels, int64_t channel_offset,
                                  const Requantization& r) {
  thread_local std::vector<int64_t> storage;
  const int64_t period = PeriodOf(size, channels);
  storage.resize(static_cast<size_t>(4 * std::max<int64_t>(period, channels)));
  int64_t* m0 = storage.data();
  int64_t* shift = m0 + period;
  int64_t* rounding = shift + period;
  int64_t* bias = rounding + period;
  const int64_t first_row = std::min(channels, period);
  for (int64_t i = 0; i < first_row; ++i) {
    const FixedPointMultiplier& m = ChannelMultiplier(r, channel_offset + i);
    m0[i] = m.m0;
    shift[i] = m.shift;
    rounding[i] = int64_t{1} << (m.shift - 1);
    bias[i] = r.bias.empty() ? 0 : r.bias[channel_offset + i];
  }
  for (int64_t* table : {m0, shift, rounding, bias}) RepeatFirstRow(table, first_row, period);
  return PeriodicParams{period, m0, shift, rounding, bias};
}

/*! \brief out = clamp(zero point + scale(acc + bias)) over the tile, one period at a time. */
template <typename Scale>
void RequantizePeriods(const int64_t* acc, int64_t size, const PeriodicParams& p,
                       const Requantization& r, Scale scale, float* out) {
  const int64_t zero_point = r.output_zero_point, lo = r.min, hi = r.max;
  for (int64_t start = 0; start < size; start += p.period) {
    const int64_t n = std::min(p.period, size - start);
    const int64_t* a = acc + start;
    float* o = out + start;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t scaled = scale(a[i] + p.bias[i], p.m0[i], p.shift[i], p.rounding[i]);
      o[i] = static_cast<float>(std::clamp(zero_point + scaled, lo, hi));
    }
  }
}

/*! \brief Whether the output range and zero point keep every step of the int32 lanes exact. */
bool FitsInt32Lanes(const Requantization& r) {
  auto fits = [](int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; };
  return fits(r.min) && fits(r.max) && fits(r.output_zero_point) &&
         fits(r.min - r.output_zero_point) && fits(r.max - r.output_zero_point);
}

/*!
 * \brief bias[j] - correction * column_sums[j] for every channel j (bias alone when column_sums
 * is null): what a fused requantization adds to each channel's int32 sums. A per-thread buffer,
 * valid until this thread's next call.
 */
const int64_t* ChannelOffsets(const int64_t* bias, const int32_t* column_sums, int64_t correction,
                              int64_t channels) {
  thread_local std::vector<int64_t> offsets;
  offsets.resize(static_cast<size_t>(channels));
  for (int64_t j = 0; j < channels; ++j) {
    offsets[j] = bias[j] - (column_sums == nullptr ? 0 : correction * column_sums[j]);
  }
  return offsets.data();
}

#if defined(__AVX512F__)
/*! \brief Sixteen int64 accumulators, each cut to its low 32 bits. */
inline __m512i LowHalves16(const int64_t* acc, __mmask16 lanes) {
  const __m256i low =
      _mm512_maskz_cvtepi64_epi32(tflite::kAllLanes, _mm512_maskz_loadu_epi64(lanes & 0xff, acc));
  const __m256i high =
      _mm512_maskz_cvtepi64_epi32(tflite::kAllLanes, _mm512_maskz_loadu_epi64(lanes >> 8, acc + 8));
  return _mm512_maskz_inserti64x4(tflite::kAllLanes, _mm512_castsi256_si512(low), high, 1);
}
#endif

/*! \brief TFLite's double rounding's int32 parameters of one channel: the bias cut to its low 32
 * bits (TFLite's int32 sum), m0 < 2^31, and the left / right shifts of the multiplier's exponent.
 */
struct DoubleRoundingChannel {
  int32_t bias, m0, left, right;
};

DoubleRoundingChannel DoubleRoundingOf(const Requantization& r, int64_t channel) {
  const FixedPointMultiplier& m = ChannelMultiplier(r, channel);
  return DoubleRoundingChannel{
      r.bias.empty() ? 0 : static_cast<int32_t>(static_cast<uint32_t>(r.bias[channel])),
      static_cast<int32_t>(m.m0), static_cast<int32_t>(std::max<int64_t>(31 - m.shift, 0)),
      static_cast<int32_t>(std::max<int64_t>(m.shift - 31, 0))};
}

/*!
 * \brief DoubleRoundingChannel's parameters over a period (PeriodOf), a table each. Built
 * straight from the requantization, with no int64 table first: for the small tiles of MobileNets
 * their set-up costs as much as the arithmetic.
 */
struct DoubleRoundingPeriod {
  int64_t period = 0;
  const int32_t *bias = nullptr, *m0 = nullptr, *left = nullptr, *right = nullptr;
};

DoubleRoundingPeriod MakeDoubleRoundingPeriod(int64_t size, int64_t channels,
                                              int64_t channel_offset, const Requantization& r) {
  const int64_t period = PeriodOf(size, channels);
  thread_local std::vector<int32_t> storage;
  storage.resize(static_cast<size_t>(4 * std::max(period, channels)));
  int32_t* bias = storage.data();
  int32_t* m0 = bias + period;
  int32_t* left = m0 + period;
  int32_t* right = left + period;
  const int64_t first_row = std::min(channels, period);
  for (int64_t i = 0; i < first_row; ++i) {
    const DoubleRoundingChannel c = DoubleRoundingOf(r, channel_offset + i);
    bias[i] = c.bias;
    m0[i] = c.m0;
    left[i] = c.left;
    right[i] = c.right;
  }
  for (int32_t* table : {bias, m0, left, right}) RepeatFirstRow(table, first_row, period);
  return DoubleRoundingPeriod{period, bias, m0, left, right};
}

/*!
 * \brief RequantizePeriods with TFLite's double rounding on int32 lanes (FitsInt32Lanes):
 * sixteen outputs to an AVX-512 vector, otherwise loops the compiler vectorises.
 */
void RequantizeTflitePeriods(const int64_t* acc, int64_t size, int64_t channels,
                             int64_t channel_offset, const Requantization& r, float* out) {
  const DoubleRoundingPeriod p = MakeDoubleRoundingPeriod(size, channels, channel_offset, r);
  const int64_t period = p.period;
  // clamp(zp + s, lo, hi) = zp + clamp(s, lo - zp, hi - zp): no int32 overflow (FitsInt32Lanes).
  const int64_t zp = r.output_zero_point;
#if defined(__AVX512F__)
  // The double rounding's lanes of each sixteen entries of the period, built once for them all.
  thread_local std::vector<int64_t> rounding;
  rounding.resize(static_cast<size_t>((period + 15) / 16) * RoundedProduct16::kWords);
  for (int64_t i = 0; i < period; i += 16) {
    const __mmask16 lanes =
        period - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (period - i)) - 1);
    RoundedProduct16::DoubleRounding(_mm512_maskz_loadu_epi32(lanes, p.m0 + i),
                                     _mm512_maskz_loadu_epi32(lanes, p.right + i))
        .Store(rounding.data() + i / 16 * RoundedProduct16::kWords);
  }
  const __m512i zero_point = _mm512_set1_epi32(static_cast<int32_t>(zp));
  const __m512i lo = _mm512_set1_epi32(static_cast<int32_t>(r.min - zp));
  const __m512i hi = _mm512_set1_epi32(static_cast<int32_t>(r.max - zp));
  for (int64_t start = 0; start < size; start += period) {
    const int64_t n = std::min(period, size - start);
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 lanes = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1);
      const __m512i value = _mm512_add_epi32(LowHalves16(acc + start + i, lanes),
                                             _mm512_maskz_loadu_epi32(lanes, p.bias + i));
      // TFLite computes in int32: only the low 32 bits of acc + bias, shifted left, matter.
      const __m512i scaled =
          RoundedProduct16::Load(rounding.data() + i / 16 * RoundedProduct16::kWords)
              .Apply(_mm512_maskz_sllv_epi32(kAll16, value,
                                             _mm512_maskz_loadu_epi32(lanes, p.left + i)));
      const __m512i clamped =
          _mm512_maskz_min_epi32(kAll16, _mm512_maskz_max_epi32(kAll16, scaled, lo), hi);
      _mm512_mask_storeu_ps(
          out + start + i, lanes,
          _mm512_maskz_cvtepi32_ps(kAll16, _mm512_add_epi32(clamped, zero_point)));
    }
  }
#else
  const int32_t lo = static_cast<int32_t>(r.min - zp), hi = static_cast<int32_t>(r.max - zp);
  for (int64_t start = 0; start < size; start += period) {
    const int64_t n = std::min(period, size - start);
    const int64_t* a = acc + start;
    float* o = out + start;
    for (int64_t i = 0; i < n; ++i) {
      // TFLite computes in int32: only the low 32 bits of acc + bias matter.
      const int32_t value =
          static_cast<int32_t>(static_cast<uint32_t>(a[i]) + static_cast<uint32_t>(p.bias[i]));
      const int32_t scaled = tflite::DoubleRounding(value, p.left[i], p.m0[i], p.right[i]);
      o[i] = static_cast<float>(std::clamp(scaled, lo, hi) + static_cast<int32_t>(zp));
    }
  }
#endif
}

}  // namespace

void Requantize(const int64_t* acc, int64_t size, int64_t channels, int64_t channel_offset,
                const Requantization& r, float* out) {
  if (size > 0 && r.rounding == Rounding::kTflite && !r.single_rounding && FitsInt32Lanes(r)) {
    RequantizeTflitePeriods(acc, size, channels, channel_offset, r, out);
    return;
  }
  RequantizeElementwise(acc, size, channels, channel_offset, r, out);
}

void RequantizeElementwise(const int64_t* acc, int64_t size, int64_t channels,
                           int64_t channel_offset, const Requantization& r, float* out) {
  if (size <= 0) return;
  const PeriodicParams p = MakePeriodicParams(size, channels, channel_offset, r);
  // One rounding of the 64-bit product: exact while |value| < 2^31 (|value * m0| < 2^62).
  auto single = [](int64_t value, int64_t m0, int64_t shift, int64_t rounding) {
    return (value * m0 + rounding) >> shift;
  };
  if (r.rounding == Rounding::kTflite) {
    if (r.single_rounding) {
      RequantizePeriods(acc, size, p, r, single, out);
    } else {
      RequantizePeriods(
          acc, size, p, r,
          [](int64_t value, int64_t m0, int64_t shift, int64_t) {
            return tflite::MultiplyByQuantizedMultiplierInRange(value, m0, shift);
          },
          out);
    }
    return;
  }
  // kTvm rounds exactly: the 64-bit form when every accumulator is narrow, 128 bits otherwise.
  constexpr int64_t kLimit = int64_t{1} << 31;
  int64_t lo = 0, hi = 0;  // min / max reductions vectorise, a flag would not
  for (int64_t i = 0; i < size; ++i) {
    lo = std::min(lo, acc[i]);
    hi = std::max(hi, acc[i]);
  }
  int64_t bias_lo = 0, bias_hi = 0;
  for (int64_t i = 0; i < p.period; ++i) {
    bias_lo = std::min(bias_lo, p.bias[i]);
    bias_hi = std::max(bias_hi, p.bias[i]);
  }
  if (lo >= -kLimit && hi < kLimit && bias_lo >= -kLimit && bias_hi < kLimit &&
      lo + bias_lo >= -kLimit && hi + bias_hi < kLimit) {
    RequantizePeriods(acc, size, p, r, single, out);
  } else {
    RequantizePeriods(
        acc, size, p, r,
        [](int64_t value, int64_t m0, int64_t shift, int64_t) {
          return ScaleRounded(value, FixedPointMultiplier{m0, shift});
        },
        out);
  }
}

namespace {

/*! \brief Whether every estimate scale is at most 1/2 (PreparedRequantization's
 * estimate_saturates_). */
bool ScalesAtMostHalf(const std::vector<float>& scales) {
  return std::all_of(scales.begin(), scales.end(), [](float scale) { return scale <= 0.5f; });
}

}  // namespace

PreparedRequantization::PreparedRequantization(const Requantization& requant, int64_t channels)
    : requant_(requant), channels_(channels), near_(requant, channels) {
  const Requantization& r = requant;
  if (r.rounding == Rounding::kTflite && !r.single_rounding) {
    if (FitsInt32Lanes(r)) lanes_ = Lanes::kInt32;
  } else {
    lanes_ = Lanes::kInt64;
  }
  if (lanes_ == Lanes::kInt32) {
    for (int64_t j = 0; j < channels; ++j) {
      const DoubleRoundingChannel c = DoubleRoundingOf(r, j);
      bias32_.push_back(c.bias);
      m0_32_.push_back(c.m0);
      left_.push_back(c.left);
      right_.push_back(c.right);
      left_shifts_ |= c.left != 0;
    }
#if defined(__AVX512F__) && defined(__AVX512DQ__)
    // Each block of sixteen channels: its RoundedProduct16, eight vectors of eight words.
    for (int64_t j = 0; j < channels; j += 16) {
      const __mmask16 lanes =
          channels - j >= 16 ? 0xffff : static_cast<__mmask16>((1u << (channels - j)) - 1);
      const RoundedProduct16 d =
          RoundedProduct16::DoubleRounding(_mm512_maskz_loadu_epi32(lanes, m0_32_.data() + j),
                                           _mm512_maskz_loadu_epi32(lanes, right_.data() + j));
      products_.resize(products_.size() + RoundedProduct16::kWords);
      d.Store(products_.data() + products_.size() - RoundedProduct16::kWords);
    }
    if (!left_shifts_) {
      estimate_scales_.resize(static_cast<size_t>(channels));
      estimate_sure_below_.resize(static_cast<size_t>(channels));
      for (int64_t j = 0; j < channels; ++j) {
        EstimatedRounding16::DoubleRoundingChannel(m0_32_[j], right_[j], &estimate_scales_[j],
                                                   &estimate_sure_below_[j]);
      }
      estimate_saturates_ = ScalesAtMostHalf(estimate_scales_);
    }
#endif
  } else if (lanes_ == Lanes::kInt64) {
    bool narrow = true;
    for (int64_t j = 0; j < channels; ++j) {
      const FixedPointMultiplier& m = ChannelMultiplier(r, j);
      bias64_.push_back(r.bias.empty() ? 0 : r.bias[j]);
      m0_64_.push_back(m.m0);
      shift_.push_back(m.shift);
      rounding_.push_back(int64_t{1} << (m.shift - 1));
      narrow &= m.m0 > 0 && m.m0 < (int64_t{1} << 31) && m.shift >= 1 && m.shift <= 62;
    }
#if defined(__AVX512F__) && defined(__AVX512DQ__)
    // Blocks whose sums take the int32 lanes: the rounding's lanes, and the largest |value| whose
    // product rounds to below 2^31 in every channel of the block (then it fits the lanes).
    if (narrow && FitsInt32Lanes(r)) {
      // The bias on int32 lanes where every |bias| < 2^28 (Requantized's bound).
      constexpr int64_t kBiasBound = int64_t{1} << 28;
      if (std::all_of(bias64_.begin(), bias64_.end(),
                      [](int64_t b) { return b > -kBiasBound && b < kBiasBound; })) {
        bias32_.assign(bias64_.begin(), bias64_.end());
      }
      for (int64_t j = 0; j < channels; j += 16) {
        const int64_t count = std::min<int64_t>(16, channels - j);
        products_.resize(products_.size() + RoundedProduct16::kWords);
        RoundedProduct16::SingleRounding(
            m0_64_.data() + j, shift_.data() + j, count,
            products_.data() + products_.size() - RoundedProduct16::kWords);
        int64_t limit = INT32_MAX;
        for (int64_t c = j; c < j + count; ++c) {
          const __int128 fits = (static_cast<__int128>(INT32_MAX - 1) << shift_[c]) / m0_64_[c];
          limit = std::min<int64_t>(limit, static_cast<int64_t>(std::min<__int128>(fits, limit)));
        }
        value_limits_.push_back(limit);
      }
      estimate_scales_.resize(static_cast<size_t>(channels));
      estimate_sure_below_.resize(static_cast<size_t>(channels));
      for (int64_t j = 0; j < channels; ++j) {
        EstimatedRounding16::SingleRoundingChannel(m0_64_[j], shift_[j], &estimate_scales_[j],
                                                   &estimate_sure_below_[j]);
      }
      estimate_saturates_ = ScalesAtMostHalf(estimate_scales_);
      // FindNearTies's quick test on the same products (RunFindingNearTies).
      for (int64_t j = 0; j < channels && !near_.empty(); j += 16) {
        const int64_t count = std::min<int64_t>(16, channels - j);
        near_words_.resize(near_words_.size() + NearTieLanes16::kWords);
        NearTieLanes16::Build(near_.windows() + j, shift_.data() + j, count,
                              near_words_.data() + near_words_.size() - NearTieLanes16::kWords);
      }
    }
#endif
  }
}

void StoreRequantized(const float* values, int64_t pixels, int64_t channels, SumsType type,
                      void* out, int64_t pixel_stride) {
  WithSumsType(type, out, [&](auto* dst) {
    using T = std::remove_pointer_t<decltype(dst)>;
    for (int64_t p = 0; p < pixels; ++p) {
      for (int64_t c = 0; c < channels; ++c) {
        dst[p * pixel_stride + c] = static_cast<T>(values[p * channels + c]);
      }
    }
  });
}

void PreparedRequantization::FindNearTies(const int32_t* sums, int64_t ld_sums,
                                          const int64_t* row_terms, const int32_t* column_sums,
                                          int64_t correction, int64_t rows, int64_t first_pixel,
                                          std::vector<int64_t>* ties) const {
  if (near_.empty()) return;
  const int64_t* offsets = ChannelOffsets(near_.bias(), column_sums, correction, channels_);
  for (int64_t i = 0; i < rows; ++i) {
    near_.ScanRow(sums + i * ld_sums, offsets, row_terms == nullptr ? 0 : row_terms[i],
                  (first_pixel + i) * channels_, ties);
  }
}

void PreparedRequantization::RunElementwise(const int32_t* sums, int64_t row_term,
                                            const int32_t* column_sums, int64_t correction,
                                            void* out, SumsType out_type) const {
  thread_local std::vector<int64_t> acc;
  thread_local std::vector<float> values;
  acc.resize(static_cast<size_t>(channels_));
  values.resize(static_cast<size_t>(channels_));
  for (int64_t j = 0; j < channels_; ++j) {
    acc[j] = sums[j] - row_term - (column_sums == nullptr ? 0 : correction * column_sums[j]);
  }
  RequantizeElementwise(acc.data(), channels_, channels_, 0, requant_, values.data());
  StoreRequantized(values.data(), 1, channels_, out_type, out, channels_);
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)
namespace {

/*! \brief Sixteen exact int32 results (masked) stored as `type`. */
inline void Store16(__m512i values, __mmask16 lanes, SumsType type, void* out) {
  switch (type) {
    case SumsType::kFloat32:
      _mm512_mask_storeu_ps(out, lanes, _mm512_maskz_cvtepi32_ps(kAll16, values));
      return;
    case SumsType::kInt8:
    case SumsType::kUInt8:  // values in [0, 255]: the low byte
      _mm512_mask_cvtepi32_storeu_epi8(out, lanes, values);
      return;
    case SumsType::kInt16:
      _mm512_mask_cvtepi32_storeu_epi16(out, lanes, values);
      return;
  }
}

/*! \brief Eight exact int64 results (masked) stored as `type`. */
inline void Store8(__m512i values, __mmask8 lanes, SumsType type, void* out) {
  switch (type) {
    case SumsType::kFloat32:
      _mm256_mask_storeu_ps(out, lanes, _mm512_cvtepi64_ps(values));
      return;
    case SumsType::kInt8:
    case SumsType::kUInt8:
      _mm512_mask_cvtepi64_storeu_epi8(out, lanes, values);
      return;
    case SumsType::kInt16:
      _mm512_mask_cvtepi64_storeu_epi16(out, lanes, values);
      return;
  }
}

}  // namespace
#endif

#if !(defined(__AVX512F__) && defined(__AVX512DQ__))
namespace {

#if defined(__AVX2__)
/*! \brief Eight exact int32 results stored as T (8-bit and 16-bit values are in range). */
template <typename T>
inline void Store8(__m256i values, T* out) {
  if constexpr (std::is_same_v<T, float>) {
    _mm256_storeu_ps(out, _mm256_cvtepi32_ps(values));
  } else {
    const __m128i words =
        _mm_packs_epi32(_mm256_castsi256_si128(values), _mm256_extracti128_si256(values, 1));
    if constexpr (std::is_same_v<T, int16_t>) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), words);
    } else if constexpr (std::is_same_v<T, int8_t>) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packs_epi16(words, words));
    } else {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(words, words));
    }
  }
}
#endif

/*! \brief PreparedRequantization's kInt32 rows without AVX-512: out[i * ld_out + j] = zp +
 * clamp(DoubleRounding(sums[i * ld_sums + j] + offsets[j] - row_terms[i]), lo, hi), all in int32
 * (TFLite's arithmetic wraps alike): eight channels to an AVX2 vector, the rest one by one. */
template <typename T>
void DoubleRoundRows(const int32_t* sums, int64_t ld_sums, const int64_t* row_terms,
                     const int32_t* offsets, const int32_t* left, const int32_t* m0,
                     const int32_t* right, int64_t channels, int64_t rows, int32_t zp, int32_t lo,
                     int32_t hi, T* out, int64_t ld_out) {
  auto row_term = [&](int64_t i) {
    return row_terms == nullptr ? 0u : static_cast<uint32_t>(row_terms[i]);
  };
  int64_t whole = 0;  // channels in blocks of eight
#if defined(__AVX2__)
  auto load = [](const int32_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  };
  const __m256i low = _mm256_set1_epi32(lo), high = _mm256_set1_epi32(hi);
  const __m256i zero_point = _mm256_set1_epi32(zp);
  // A block of eight channels at a time, its parameters in registers over the rows (what depends
  // on them alone in DoubleRounding8 is computed once per block).
  for (; whole + 8 <= channels; whole += 8) {
    const int64_t j = whole;
    const __m256i offset = load(offsets + j), shift_left = load(left + j),
                  multiplier = load(m0 + j), shift_right = load(right + j);
    for (int64_t i = 0; i < rows; ++i) {
      const __m256i value = _mm256_sub_epi32(_mm256_add_epi32(load(sums + i * ld_sums + j), offset),
                                             _mm256_set1_epi32(static_cast<int32_t>(row_term(i))));
      const __m256i scaled = tflite::DoubleRounding8(value, shift_left, multiplier, shift_right);
      Store8(_mm256_add_epi32(_mm256_min_epi32(_mm256_max_epi32(scaled, low), high), zero_point),
             out + i * ld_out + j);
    }
  }
#endif
  if (whole == channels) return;
  for (int64_t i = 0; i < rows; ++i) {
    const int32_t* s = sums + i * ld_sums;
    T* o = out + i * ld_out;
    for (int64_t j = whole; j < channels; ++j) {
      const int32_t value = static_cast<int32_t>(static_cast<uint32_t>(s[j]) +
                                                 static_cast<uint32_t>(offsets[j]) - row_term(i));
      o[j] = static_cast<T>(
          std::clamp(tflite::DoubleRounding(value, left[j], m0[j], right[j]), lo, hi) + zp);
    }
  }
}

/*!
 * \brief PreparedRequantization's kInt64 rows without AVX-512: one rounding of the 64-bit
 * product (TFLite's single rounding; TVM's exact rounding for values below 2^31, which `exact`
 * redoes with ScaleRounded beyond), as RequantizeElementwise rounds them.
 */
template <typename T>
void SingleRoundRows(const int32_t* sums, int64_t ld_sums, const int64_t* row_terms,
                     const int64_t* offsets, const int64_t* m0, const int64_t* shift,
                     const int64_t* rounding, int64_t channels, int64_t rows, bool exact,
                     const Requantization& r, T* out, int64_t ld_out) {
  constexpr int64_t kLimit = int64_t{1} << 31;
  const int64_t zp = r.output_zero_point;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t row_term = row_terms == nullptr ? 0 : row_terms[i];
    const int32_t* s = sums + i * ld_sums;
    T* o = out + i * ld_out;
    int64_t lowest = 0, highest = 0;  // min / max reductions vectorise, a flag would not
    for (int64_t j = 0; j < channels; ++j) {
      const int64_t value = s[j] + offsets[j] - row_term;
      lowest = std::min(lowest, value);
      highest = std::max(highest, value);
      // Unsigned: a wide value's product wraps (as the int64 lanes'), it is redone below.
      const int64_t scaled =
          static_cast<int64_t>(static_cast<uint64_t>(value) * static_cast<uint64_t>(m0[j]) +
                               static_cast<uint64_t>(rounding[j])) >>
          shift[j];
      o[j] = static_cast<T>(std::clamp(zp + scaled, r.min, r.max));
    }
    if (!exact || (lowest >= -kLimit && highest < kLimit)) continue;
    for (int64_t j = 0; j < channels; ++j) {
      const int64_t value = s[j] + offsets[j] - row_term;
      if (value >= -kLimit && value < kLimit) continue;
      o[j] = static_cast<T>(std::clamp(
          zp + ScaleRounded(value, FixedPointMultiplier{m0[j], shift[j]}), r.min, r.max));
    }
  }
}

}  // namespace
#endif

void PreparedRequantization::Run(const int32_t* sums, int64_t ld_sums, const int64_t* row_terms,
                                 const int32_t* column_sums, int64_t correction, int64_t rows,
                                 void* out, int64_t ld_out, SumsType out_type) const {
  Requantized(sums, ld_sums, row_terms, column_sums, correction, rows, out, ld_out, out_type, 0,
              nullptr);
}

void PreparedRequantization::RunFindingNearTies(const int32_t* sums, int64_t ld_sums,
                                                const int64_t* row_terms,
                                                const int32_t* column_sums, int64_t correction,
                                                int64_t rows, void* out, int64_t ld_out,
                                                SumsType out_type, int64_t first_pixel,
                                                std::vector<int64_t>* ties) const {
  if (!near_words_.empty()) {
    Requantized(sums, ld_sums, row_terms, column_sums, correction, rows, out, ld_out, out_type,
                first_pixel, ties);
    return;
  }
  Run(sums, ld_sums, row_terms, column_sums, correction, rows, out, ld_out, out_type);
  FindNearTies(sums, ld_sums, row_terms, column_sums, correction, rows, first_pixel, ties);
}

void PreparedRequantization::Requantized(const int32_t* sums, int64_t ld_sums,
                                         const int64_t* row_terms, const int32_t* column_sums,
                                         int64_t correction, int64_t rows, void* out,
                                         int64_t ld_out, SumsType out_type, int64_t first_pixel,
                                         std::vector<int64_t>* ties) const {
  const int64_t item = SumsTypeBytes(out_type);
  auto row_out = [&](int64_t i) { return static_cast<uint8_t*>(out) + i * ld_out * item; };
  const Requantization& r = requant_;
#if defined(__AVX512F__) && defined(__AVX512DQ__)
  const int64_t zp = r.output_zero_point;
  const int64_t channels = channels_;  // a local: the loops below then vectorise
  // 8-bit results (nearly every layer's): float32 estimates first, the exact product where one is
  // unsure (EstimatedRounding16; not with near ties, which the products find).
  const bool estimate = !estimate_scales_.empty() && SumsTypeBytes(out_type) == 1 &&
                        r.min >= -256 && r.max <= 256 && r.min - zp >= -512 && r.max - zp <= 512 &&
                        ties == nullptr;
  const EstimatedRounding16::Range range(r.min, r.max, zp);
  auto estimate_of = [&](int64_t j, __mmask16 lanes) {
    return estimate ? EstimatedRounding16::Load(estimate_scales_.data() + j,
                                                estimate_sure_below_.data() + j, lanes)
                    : EstimatedRounding16{};
  };
  // A full-range int8 output skips the estimate's clamp: the saturating store clamps.
  const bool saturate = estimate && estimate_saturates_ && out_type == SumsType::kInt8 &&
                        r.min == -128 && r.max == 127;
  // Stores the estimate of `value` where every lane is sure, and says whether it did.
  auto store_estimate = [&](const EstimatedRounding16& estimated, __m512i value, __mmask16 lanes,
                            uint8_t* to) {
    __m512i result;
    if (saturate) {
      if (!estimated.Round<false>(value, lanes, range, &result)) return false;
      _mm512_mask_cvtsepi32_storeu_epi8(to, lanes, result);
      return true;
    }
    if (!estimated.Round(value, lanes, range, &result)) return false;
    Store16(result, lanes, out_type, to);
    return true;
  };
  if (lanes_ == Lanes::kInt32) {
    // As RequantizeTflitePeriods: low 32 bits of the sum, clamped before the zero point. The
    // column term's low 32 bits are those of the int32 product.
    const __m512i zero_point = _mm512_set1_epi32(static_cast<int32_t>(zp));
    const __m512i lo = _mm512_set1_epi32(static_cast<int32_t>(r.min - zp));
    const __m512i hi = _mm512_set1_epi32(static_cast<int32_t>(r.max - zp));
    // The low 32 bits of the correction: the column terms' low 32 bits are those of the int32
    // product (the int32 sums wrap alike).
    const __m512i correction32 =
        _mm512_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(correction)));
    // A block of sixteen channels at a time, its parameters held in registers over the rows.
    auto requantize_rows = [&](auto shifts_left) {
      for (int64_t j = 0; j < channels; j += 16) {
        const __mmask16 lanes =
            channels - j >= 16 ? 0xffff : static_cast<__mmask16>((1u << (channels - j)) - 1);
        const RoundedProduct16 rounding =
            RoundedProduct16::Load(products_.data() + j / 16 * RoundedProduct16::kWords);
        // The block's bias less its column terms.
        __m512i block_offset = _mm512_maskz_loadu_epi32(lanes, bias32_.data() + j);
        if (column_sums != nullptr) {
          block_offset = _mm512_sub_epi32(
              block_offset,
              _mm512_mullo_epi32(correction32, _mm512_maskz_loadu_epi32(lanes, column_sums + j)));
        }
        const __m512i left = _mm512_maskz_loadu_epi32(lanes, left_.data() + j);
        const EstimatedRounding16 estimated = estimate_of(j, lanes);
        for (int64_t i = 0; i < rows; ++i) {
          const __m512i row_term = _mm512_set1_epi32(
              static_cast<int32_t>(static_cast<uint32_t>(row_terms == nullptr ? 0 : row_terms[i])));
          __m512i value = _mm512_sub_epi32(
              _mm512_add_epi32(_mm512_maskz_loadu_epi32(lanes, sums + i * ld_sums + j),
                               block_offset),
              row_term);
          // Multipliers below 1 (nearly all) shift nothing left: that shift is left out then.
          if constexpr (decltype(shifts_left)::value) {
            value = _mm512_maskz_sllv_epi32(kAll16, value, left);
          } else if (estimate && store_estimate(estimated, value, lanes, row_out(i) + j * item)) {
            continue;
          }
          const __m512i clamped = _mm512_maskz_min_epi32(
              kAll16, _mm512_maskz_max_epi32(kAll16, rounding.Apply(value), lo), hi);
          Store16(_mm512_add_epi32(clamped, zero_point), lanes, out_type, row_out(i) + j * item);
        }
      }
    };
    if (left_shifts_) {
      requantize_rows(std::true_type{});
    } else {
      requantize_rows(std::false_type{});
    }
    return;
  }
  if (lanes_ == Lanes::kInt64) {
    // One rounding of the 64-bit product, as RequantizeElementwise's: TFLite's single rounding
    // always, TVM's exact rounding for values below 2^31 (a wider one takes ScaleRounded).
    const bool exact = r.rounding == Rounding::kTvm;
    const __m512i limit = _mm512_set1_epi64(int64_t{1} << 31);
    const __m512i zero_point = _mm512_set1_epi64(zp);
    const __m512i lo = _mm512_set1_epi64(r.min), hi = _mm512_set1_epi64(r.max);
    const int64_t *m0 = m0_64_.data(), *shift = shift_.data(), *rounding = rounding_.data();
    // Channels [j0, j0 + count) of row i on eight int64 lanes at a time; offset[j] is channel j's
    // bias less its column term.
    auto wide_lanes = [&](int64_t i, int64_t j0, int64_t count, const int64_t* offset) {
      const int32_t* s = sums + i * ld_sums;
      uint8_t* o = row_out(i);
      const __m512i row_term = _mm512_set1_epi64(row_terms == nullptr ? 0 : row_terms[i]);
      for (int64_t j = j0; j < j0 + count; j += 8) {
        const __mmask8 lanes =
            j0 + count - j >= 8 ? 0xff : static_cast<__mmask8>((1u << (j0 + count - j)) - 1);
        const __m512i value = _mm512_sub_epi64(
            _mm512_add_epi64(
                _mm512_maskz_cvtepi32_epi64(0xff, _mm256_maskz_loadu_epi32(lanes, s + j)),
                _mm512_maskz_loadu_epi64(lanes, offset + j)),
            row_term);
        const __m512i scaled = _mm512_maskz_srav_epi64(
            tflite::kAllLanes,
            _mm512_add_epi64(_mm512_mullo_epi64(value, _mm512_maskz_loadu_epi64(lanes, m0 + j)),
                             _mm512_maskz_loadu_epi64(lanes, rounding + j)),
            _mm512_maskz_loadu_epi64(lanes, shift + j));
        const __m512i result = _mm512_maskz_min_epi64(
            tflite::kAllLanes,
            _mm512_maskz_max_epi64(tflite::kAllLanes, _mm512_add_epi64(scaled, zero_point), lo),
            hi);
        Store8(result, lanes, out_type, o + j * item);
        if (exact &&
            _mm512_mask_cmpge_epi64_mask(lanes, _mm512_maskz_abs_epi64(lanes, value), limit) != 0) {
          alignas(64) int64_t wide[8], exact_result[8];
          _mm512_store_si512(wide, value);
          _mm512_store_si512(exact_result, result);
          for (int64_t k = 0; k < 8; ++k) {
            if (((lanes >> k) & 1) == 0) continue;
            const FixedPointMultiplier m{m0[j + k], shift[j + k]};
            exact_result[k] = std::clamp(zp + ScaleRounded(wide[k], m), r.min, r.max);
          }
          Store8(_mm512_load_si512(exact_result), lanes, out_type, o + j * item);
        }
      }
    };
    if (products_.empty()) {
      const int64_t* offsets = ChannelOffsets(bias64_.data(), column_sums, correction, channels);
      for (int64_t i = 0; i < rows; ++i) wide_lanes(i, 0, channels, offsets);
      return;
    }
    // Sixteen int32 lanes where the block's values and products fit them (nearly always: 8-bit
    // sums); otherwise the int64 lanes. The int32 sum s + offset - row term is exact where |s| <
    // 2^30, |bias| < 2^28, |correction * column sum| < 2^28 and |row term| <= 2^29 (the bias and
    // the column terms are checked once per block, s per row), and the rounded product fits
    // where that sum is at most the block's value limit.
    const __m512i zero_point32 = _mm512_set1_epi32(static_cast<int32_t>(zp));
    const __m512i lo32 = _mm512_set1_epi32(static_cast<int32_t>(r.min - zp));
    const __m512i hi32 = _mm512_set1_epi32(static_cast<int32_t>(r.max - zp));
    constexpr int32_t kSumBound = int32_t{1} << 30;
    constexpr int64_t kRowTermBound = int64_t{1} << 29;
    constexpr float kTermBound = static_cast<float>((1 << 28) - 256);
    const bool small_correction = correction >= -kSumBound && correction <= kSumBound;
    const __m512i correction32 = _mm512_set1_epi32(static_cast<int32_t>(correction));
    const __m512 correction_float = _mm512_set1_ps(static_cast<float>(correction));
    // Channel c's bias less its column term, exactly (a row on the int64 lanes; a near tie).
    auto offset_of = [&](int64_t c) {
      return bias64_[c] - (column_sums == nullptr ? 0 : correction * column_sums[c]);
    };
    // With `ties`: the near-tie test on the products just made (as FindNearTies, whose pass
    // over the sums it saves), unless a row takes the int64 lanes: then FindNearTies after all.
    const size_t ties_before = ties == nullptr ? 0 : ties->size();
    bool took_int64_lanes = false;
    auto blocks = [&](auto find_ties) {
      for (int64_t j = 0; j < channels; j += 16) {
        const int64_t count = std::min<int64_t>(16, channels - j);
        const __mmask16 lanes = count == 16 ? 0xffff : static_cast<__mmask16>((1u << count) - 1);
        // The exact products' eight vectors: loaded for a row the estimate leaves unsure.
        const int64_t* product_words = products_.data() + j / 16 * RoundedProduct16::kWords;
        const EstimatedRounding16 estimated = estimate_of(j, lanes);
        NearTieLanes16 near{};
        if constexpr (decltype(find_ties)::value) {
          near = NearTieLanes16::Load(near_words_.data() + j / 16 * NearTieLanes16::kWords);
        }
        bool narrow_block = !bias32_.empty() && small_correction;
        __m512i block_offset =
            narrow_block ? _mm512_maskz_loadu_epi32(lanes, bias32_.data() + j) : __m512i{};
        if (column_sums != nullptr && narrow_block) {
          // |correction * column sum| < 2^28 checked in float32: below 2^28 - 256, its relative
          // error (two conversions and the product, each 2^-24) keeps the exact term below 2^28.
          const __m512i sums_of_columns = _mm512_maskz_loadu_epi32(lanes, column_sums + j);
          const __m512 term = _mm512_abs_ps(_mm512_maskz_mul_ps(
              kAll16, _mm512_maskz_cvtepi32_ps(kAll16, sums_of_columns), correction_float));
          narrow_block =
              _mm512_mask_cmp_ps_mask(lanes, term, _mm512_set1_ps(kTermBound), _CMP_NLT_UQ) == 0;
          block_offset =
              _mm512_sub_epi32(block_offset, _mm512_mullo_epi32(correction32, sums_of_columns));
        }
        const __m512i value_limit = _mm512_set1_epi32(static_cast<int32_t>(value_limits_[j / 16]));
        for (int64_t i = 0; i < rows; ++i) {
          const int64_t row_term = row_terms == nullptr ? 0 : row_terms[i];
          const __m512i s = _mm512_maskz_loadu_epi32(lanes, sums + i * ld_sums + j);
          const __m512i value = _mm512_sub_epi32(_mm512_add_epi32(s, block_offset),
                                                 _mm512_set1_epi32(static_cast<int32_t>(row_term)));
          const __mmask16 wide =
              _mm512_cmpge_epi32_mask(_mm512_maskz_abs_epi32(kAll16, s),
                                      _mm512_set1_epi32(kSumBound)) |
              _mm512_cmpgt_epi32_mask(_mm512_maskz_abs_epi32(kAll16, value), value_limit);
          if (!narrow_block || row_term < -kRowTermBound || row_term > kRowTermBound ||
              (wide & lanes) != 0) {
            alignas(64) int64_t block_offsets[16];
            for (int64_t c = j; c < j + count; ++c) block_offsets[c - j] = offset_of(c);
            wide_lanes(i, j, count, block_offsets - j);
            took_int64_lanes = true;
            continue;
          }
          __m512i rounded;
          if (estimate && store_estimate(estimated, value, lanes, row_out(i) + j * item)) continue;
          const RoundedProduct16 product = RoundedProduct16::Load(product_words);
          if constexpr (decltype(find_ties)::value) {
            __mmask16 candidates = 0;
            rounded = product.Apply(value, near, &candidates);
            // A candidate (one in a few hundred) gets NearTie's exact test.
            for (unsigned bits = candidates & lanes; bits != 0; bits &= bits - 1) {
              const int64_t c = j + __builtin_ctz(bits);
              const int64_t exact = int64_t{sums[i * ld_sums + c]} + offset_of(c) - row_term;
              if (NearTie(exact, r.Multiplier(c), near_.windows()[c], zp, r.min, r.max)) {
                ties->push_back((first_pixel + i) * channels + c);
              }
            }
          } else {
            rounded = product.Apply(value);
          }
          const __m512i clamped =
              _mm512_maskz_min_epi32(kAll16, _mm512_maskz_max_epi32(kAll16, rounded, lo32), hi32);
          Store16(_mm512_add_epi32(clamped, zero_point32), lanes, out_type, row_out(i) + j * item);
        }
      }
    };
    if (ties == nullptr) {
      blocks(std::false_type{});
      return;
    }
    blocks(std::true_type{});
    if (took_int64_lanes) {
      ties->resize(ties_before);
      FindNearTies(sums, ld_sums, row_terms, column_sums, correction, rows, first_pixel, ties);
    }
    return;
  }
#else
  (void)first_pixel, (void)ties;  // near ties are found on AVX-512's int32 lanes only
  if (lanes_ == Lanes::kInt32) {
    // The column terms' low 32 bits are those of the int32 product (the int32 sums wrap alike).
    thread_local std::vector<int32_t> offsets;
    offsets.resize(static_cast<size_t>(channels_));
    const uint32_t correction32 = static_cast<uint32_t>(correction);
    for (int64_t j = 0; j < channels_; ++j) {
      const uint32_t term =
          column_sums == nullptr ? 0 : correction32 * static_cast<uint32_t>(column_sums[j]);
      offsets[j] = static_cast<int32_t>(static_cast<uint32_t>(bias32_[j]) - term);
    }
    const int32_t zp = static_cast<int32_t>(r.output_zero_point);
    WithSumsType(out_type, out, [&](auto* dst) {
      DoubleRoundRows(sums, ld_sums, row_terms, offsets.data(), left_.data(), m0_32_.data(),
                      right_.data(), channels_, rows, zp, static_cast<int32_t>(r.min) - zp,
                      static_cast<int32_t>(r.max) - zp, dst, ld_out);
    });
    return;
  }
  if (lanes_ == Lanes::kInt64) {
    const int64_t* offsets = ChannelOffsets(bias64_.data(), column_sums, correction, channels_);
    WithSumsType(out_type, out, [&](auto* dst) {
      SingleRoundRows(sums, ld_sums, row_terms, offsets, m0_64_.data(), shift_.data(),
                      rounding_.data(), channels_, rows, r.rounding == Rounding::kTvm, r, dst,
                      ld_out);
    });
    return;
  }
#endif
  for (int64_t i = 0; i < rows; ++i) {
    RunElementwise(sums + i * ld_sums, row_terms == nullptr ? 0 : row_terms[i], column_sums,
                   correction, row_out(i), out_type);
  }
}

}  // namespace kernels
}  // namespace example_npu
