/*!
 * \file kernels/quantized_depthwise.cc
 * \brief Integer depthwise convolution of 8-bit activations on channel-last tiles.
 *
 * A depthwise convolution has kernel_h * kernel_w multiply-adds per output, so the matrix path
 * (16-column dot products of a group's one channel) would waste nearly all of each vector. Here
 * the channels are the vector: for every output pixel, 16 channels of int32 sums run over the
 * in-bounds taps ((x - zero point) * w, exact in int32, see IsQuantizedDepthwise), four pixels
 * at a time so that each weight vector is loaded once for four. Output pixels whose horizontal
 * taps are all inside the row share one tap pattern shifted by the stride; edge pixels sum only
 * their valid taps (padding stands for the zero point, which contributes nothing).
 */
#include "kernels/quantized_depthwise.h"

#include <algorithm>
#include <array>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/requantize_sums.h"
#include "kernels/weight_pack_cache.h"
#include "kernels/window.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define EXAMPLE_NPU_X86_64 1
#endif

namespace example_npu {
namespace kernels {
namespace {

constexpr int64_t kBlock = 16;  // channels per step: one 512-bit vector of int32 sums
// Zero points in [-128, 255] keep |x - zp| <= 383 for any 8-bit x; the largest tap count whose
// sums of (x - zp) * w (each at most 383 * 128 in size) fit int32.
constexpr int64_t kMinZeroPoint = -128, kMaxZeroPoint = 255;
constexpr int64_t kMaxTaps = ((int64_t{1} << 31) - 1) / (383 * 128);

/*! \brief The taps shared by a block of output pixels `step` input elements apart. */
template <typename T>
struct PixelTaps {
  const T* const* in;       // tap t of the block's first pixel
  const int32_t* const* w;  // tap t's weights, channels contiguous
  int64_t count;            // taps
  int64_t step;             // input elements from one pixel to the next
};

/*!
 * \brief Where the sums of kP pixels go, `step` elements apart, channels innermost: int64
 * accumulators, or (sums32 set) int32 sums that the row's requantization reads next.
 */
struct PixelOut {
  int64_t* acc;
  int32_t* sums32;
  int64_t step;
  bool accumulate;
};

inline void StoreSums(const int32_t* sums, int64_t width, const PixelOut& out, int64_t offset) {
  if (out.sums32 != nullptr) {
    std::copy_n(sums, width, out.sums32 + offset);
    return;
  }
  int64_t* acc = out.acc + offset;
  for (int64_t c = 0; c < width; ++c) acc[c] = out.accumulate ? acc[c] + sums[c] : sums[c];
}

/*! \brief Channels [c0, c0 + width) of kP pixels, width <= kBlock, portable. */
template <int kP, typename T>
void PortableBlock(const PixelTaps<T>& taps, int64_t c0, int64_t width, int32_t zero_point,
                   const PixelOut& out) {
  int32_t sums[kP][kBlock] = {};
  for (int64_t t = 0; t < taps.count; ++t) {
    const int32_t* w = taps.w[t] + c0;
    for (int p = 0; p < kP; ++p) {
      const T* x = taps.in[t] + p * taps.step + c0;
      for (int64_t c = 0; c < width; ++c) {
        sums[p][c] += (static_cast<int32_t>(x[c]) - zero_point) * w[c];
      }
    }
  }
  for (int p = 0; p < kP; ++p) StoreSums(sums[p], width, out, p * out.step + c0);
}

/*! \brief Every channel of kP pixels, portable (the channel loop vectorises for the target). */
template <int kP, typename T>
void PixelsPortable(const PixelTaps<T>& taps, int64_t channels, int32_t zero_point,
                    const PixelOut& out) {
  for (int64_t c0 = 0; c0 < channels; c0 += kBlock) {
    PortableBlock<kP>(taps, c0, std::min(kBlock, channels - c0), zero_point, out);
  }
}

#if defined(EXAMPLE_NPU_X86_64)
#define EXAMPLE_NPU_AVX512BW __attribute__((target("avx512f,avx512bw,avx512vl")))

bool HasAvx512Bw() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl");
  return has;
}

/*! \brief 16 activations of channels [c, c + 16) (masked) widened to int32. */
template <typename T>
EXAMPLE_NPU_AVX512BW inline __m512i LoadWidened(const T* x, __mmask16 mask) {
  // A whole block widens straight from memory (one instruction); only a tail is masked.
  const __m128i raw = mask == 0xffff ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(x))
                                     : _mm_maskz_loadu_epi8(mask, x);
  if constexpr (std::is_same_v<T, int8_t>) {
    return _mm512_maskz_cvtepi8_epi32(0xffff, raw);
  } else {
    return _mm512_maskz_cvtepu8_epi32(0xffff, raw);
  }
}

/*! \brief 16 int32 sums (masked) stored as they are, or widened into 16 int64 accumulators,
 * stored or added. */
EXAMPLE_NPU_AVX512BW inline void StoreWidened(__m512i sums, __mmask16 mask, const PixelOut& to,
                                              int64_t offset) {
  if (to.sums32 != nullptr) {
    _mm512_mask_storeu_epi32(to.sums32 + offset, mask, sums);
    return;
  }
  int64_t* out = to.acc + offset;
  const bool accumulate = to.accumulate;
  const __mmask8 lo_mask = static_cast<__mmask8>(mask), hi_mask = static_cast<__mmask8>(mask >> 8);
  // (maskz forms: GCC 12 warns about the undefined register in the plain intrinsics)
  __m512i lo = _mm512_maskz_cvtepi32_epi64(0xff, _mm512_maskz_extracti64x4_epi64(0xf, sums, 0));
  __m512i hi = _mm512_maskz_cvtepi32_epi64(0xff, _mm512_maskz_extracti64x4_epi64(0xf, sums, 1));
  if (accumulate) {
    lo = _mm512_add_epi64(lo, _mm512_maskz_loadu_epi64(lo_mask, out));
    hi = _mm512_add_epi64(hi, _mm512_maskz_loadu_epi64(hi_mask, out + 8));
  }
  _mm512_mask_storeu_epi64(out, lo_mask, lo);
  _mm512_mask_storeu_epi64(out + 8, hi_mask, hi);
}

/*!
 * \brief The channel blocks of kP pixels on AVX-512, 16 channels to a vector, the last block
 * masked: sum(c0, mask, sums, &weight_sum) adds sum_t x w into sums[p] and sum_t w into
 * weight_sum; sum_t (x - zp) w = sum_t x w - zp sum_t w (exact in int32) is then stored, the zero
 * point applied once per block.
 */
template <int kP, typename Sum>
EXAMPLE_NPU_AVX512BW inline void ChannelBlocksAvx512(int64_t channels, int32_t zero_point,
                                                     const PixelOut& out, const Sum& sum) {
  const __m512i zp = _mm512_set1_epi32(zero_point);
  for (int64_t c0 = 0; c0 < channels; c0 += kBlock) {
    const int64_t width = std::min(kBlock, channels - c0);
    const __mmask16 mask = static_cast<__mmask16>((uint32_t{1} << width) - 1);
    __m512i sums[kP], weight_sum = _mm512_setzero_si512();
    for (int p = 0; p < kP; ++p) sums[p] = _mm512_setzero_si512();
    sum(c0, mask, sums, &weight_sum);
    const __m512i correction = _mm512_mullo_epi32(weight_sum, zp);
    for (int p = 0; p < kP; ++p) {
      StoreWidened(_mm512_sub_epi32(sums[p], correction), mask, out, p * out.step + c0);
    }
  }
}

/*! \brief PixelsPortable with 16 channels to an AVX-512 vector; the last block is masked. */
template <int kP, typename T>
EXAMPLE_NPU_AVX512BW void PixelsAvx512(const PixelTaps<T>& taps, int64_t channels,
                                       int32_t zero_point, const PixelOut& out) {
  ChannelBlocksAvx512<kP>(channels, zero_point, out,
                          [&](int64_t c0, __mmask16 mask, __m512i* sums, __m512i* weight_sum) {
                            for (int64_t t = 0; t < taps.count; ++t) {
                              const __m512i w = _mm512_maskz_loadu_epi32(mask, taps.w[t] + c0);
                              *weight_sum = _mm512_add_epi32(*weight_sum, w);
                              const T* x = taps.in[t] + c0;
#if defined(__AVX512VNNI__)
                              // vpdpwssd multiplies a lane's low 16 bits and its high 16 bits
                              // pairwise and adds both products: with the weight's high half zeroed
                              // that is x w exactly (|x|, |w| < 2^15), one instruction where a
                              // 32-bit multiply and an add took two.
                              const __m512i w_low = _mm512_and_si512(w, _mm512_set1_epi32(0xffff));
                              for (int p = 0; p < kP; ++p) {
                                sums[p] = _mm512_dpwssd_epi32(
                                    sums[p], LoadWidened(x + p * taps.step, mask), w_low);
                              }
#else
      for (int p = 0; p < kP; ++p) {
        sums[p] =
            _mm512_add_epi32(sums[p], _mm512_mullo_epi32(LoadWidened(x + p * taps.step, mask), w));
      }
#endif
                            }
                          });
}

#if defined(__AVX512VNNI__)
/*! \brief The depthwise kernel width RowPixelsVnni serves (MobileNets' 3 x 3). */
constexpr int64_t kRowKernelWidth = 3;

/*! \brief A block of output pixels side by side at stride 1, every tap inside the input row:
 * per kernel row, its first input pixel, its weights (high halves zeroed, kRowKernelWidth taps,
 * channels contiguous) and their sum over its taps. */
template <typename T>
struct KernelRows {
  const T* const* in;
  const int32_t* const* w_low;
  const int32_t* const* w_sum;
  int64_t rows;
  int64_t step;  // input elements from one pixel to the next
};

/*!
 * \brief PixelsAvx512 for kP pixels at stride 1 of a kW-wide kernel: input pixel q of a kernel
 * row serves tap j of output pixel q - j, so it is loaded and widened once for up to kW outputs
 * (kP + kW - 1 loads per kernel row where a load per tap took kP kW), and the weights' high
 * halves come zeroed.
 */
template <int kP, int kW, typename T>
EXAMPLE_NPU_AVX512BW void RowPixelsVnni(const KernelRows<T>& rows, int64_t channels,
                                        int32_t zero_point, const PixelOut& out) {
  ChannelBlocksAvx512<kP>(
      channels, zero_point, out,
      [&](int64_t c0, __mmask16 mask, __m512i* sums, __m512i* weight_sum) {
        for (int64_t r = 0; r < rows.rows; ++r) {
          __m512i w[kW];
          for (int j = 0; j < kW; ++j) {
            w[j] = _mm512_maskz_loadu_epi32(mask, rows.w_low[r] + j * channels + c0);
          }
          *weight_sum =
              _mm512_add_epi32(*weight_sum, _mm512_maskz_loadu_epi32(mask, rows.w_sum[r] + c0));
          const T* x = rows.in[r] + c0;
          for (int q = 0; q < kP + kW - 1; ++q) {
            const __m512i xq = LoadWidened(x + q * rows.step, mask);
            for (int j = 0; j < kW; ++j) {
              if (q - j >= 0 && q - j < kP)
                sums[q - j] = _mm512_dpwssd_epi32(sums[q - j], xq, w[j]);
            }
          }
        }
      });
}

/*! \brief RowPixelsVnni for 1 .. sizeof...(P) pixels. */
template <typename T, size_t... P>
constexpr auto RowPixelsTable(std::index_sequence<P...>) {
  return std::array<void (*)(const KernelRows<T>&, int64_t, int32_t, const PixelOut&),
                    sizeof...(P)>{&RowPixelsVnni<static_cast<int>(P) + 1, kRowKernelWidth, T>...};
}
#endif
#define EXAMPLE_NPU_AVX2 __attribute__((target("avx2")))

bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

/*! \brief 8 activations of channels [c, c + 8) widened to int32. */
template <typename T>
EXAMPLE_NPU_AVX2 inline __m256i LoadWidened8(const T* x) {
  const __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x));
  if constexpr (std::is_same_v<T, int8_t>) {
    return _mm256_cvtepi8_epi32(raw);
  } else {
    return _mm256_cvtepu8_epi32(raw);
  }
}

/*! \brief 8 int32 sums stored as they are, or widened into 8 int64 accumulators, stored or
 * added. */
EXAMPLE_NPU_AVX2 inline void StoreWidened8(__m256i sums, const PixelOut& to, int64_t offset) {
  if (to.sums32 != nullptr) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(to.sums32 + offset), sums);
    return;
  }
  __m256i* out = reinterpret_cast<__m256i*>(to.acc + offset);
  __m256i lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(sums));
  __m256i hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(sums, 1));
  if (to.accumulate) {
    lo = _mm256_add_epi64(lo, _mm256_loadu_si256(out));
    hi = _mm256_add_epi64(hi, _mm256_loadu_si256(out + 1));
  }
  _mm256_storeu_si256(out, lo);
  _mm256_storeu_si256(out + 1, hi);
}

/*! \brief Channels [c0, c0 + 8 kV) of kP pixels on kV vectors of eight int32 sums. */
template <int kP, int kV, typename T>
EXAMPLE_NPU_AVX2 inline void ChannelsAvx2(const PixelTaps<T>& taps, int64_t c0, __m256i zp,
                                          const PixelOut& out) {
  // sum_t (x - zp) w = sum_t x w - zp sum_t w (exact in int32): the zero point once per block.
  __m256i sums[kP][kV], weight_sum[kV];
  for (int v = 0; v < kV; ++v) {
    weight_sum[v] = _mm256_setzero_si256();
    for (int p = 0; p < kP; ++p) sums[p][v] = _mm256_setzero_si256();
  }
  for (int64_t t = 0; t < taps.count; ++t) {
    for (int v = 0; v < kV; ++v) {
      const int64_t c = c0 + 8 * v;
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(taps.w[t] + c));
      weight_sum[v] = _mm256_add_epi32(weight_sum[v], w);
      for (int p = 0; p < kP; ++p) {
        sums[p][v] = _mm256_add_epi32(
            sums[p][v], _mm256_mullo_epi32(LoadWidened8(taps.in[t] + p * taps.step + c), w));
      }
    }
  }
  for (int v = 0; v < kV; ++v) {
    const __m256i correction = _mm256_mullo_epi32(weight_sum[v], zp);
    for (int p = 0; p < kP; ++p) {
      StoreWidened8(_mm256_sub_epi32(sums[p][v], correction), out, p * out.step + c0 + 8 * v);
    }
  }
}

/*! \brief PixelsPortable on AVX2: 16 channels at a time on two vectors, then 8, and the last
 * few channels (AVX2 has no byte masks) through the portable block. */
template <int kP, typename T>
EXAMPLE_NPU_AVX2 void PixelsAvx2(const PixelTaps<T>& taps, int64_t channels, int32_t zero_point,
                                 const PixelOut& out) {
  const __m256i zp = _mm256_set1_epi32(zero_point);
  int64_t c0 = 0;
  for (; c0 + 16 <= channels; c0 += 16) ChannelsAvx2<kP, 2>(taps, c0, zp, out);
  if (c0 + 8 <= channels) {
    ChannelsAvx2<kP, 1>(taps, c0, zp, out);
    c0 += 8;
  }
  if (c0 < channels) PortableBlock<kP>(taps, c0, channels - c0, zero_point, out);
}
#endif

/*! \brief The weights as kernel rows read them (KernelRows): each tap's int32 weights with
 * their high halves zeroed (vpdpwssd then multiplies x by w alone), and per kernel row and
 * channel the sum of its taps' weights. */
struct RowWeights {
  const int32_t* low;
  const int32_t* sums;
};

/*! \brief Sizes of the convolution, from its shapes and parameters, and where its input lies. */
struct DepthwiseShape {
  int64_t batch, h, w, channels, kh, kw, oh, ow;
  PixelStrides in;
};

template <typename T>
class DepthwiseRows {
 public:
  /*! \brief `row_weights`: these weights by kernel rows for a kRowKernelWidth-wide kernel at
   * stride 1 and dilation 1 on AVX-512 VNNI, or null (then no kernel-row blocks). */
  DepthwiseRows(const T* input, int64_t zero_point, const int32_t* weight,
                const RowWeights* row_weights, const SumsOut& to, const DepthwiseShape& s,
                const Conv2dParams& p, bool portable)
      : input_(input),
        zero_point_(static_cast<int32_t>(zero_point)),
        weight_(weight),
        row_weights_(row_weights),
        to_(to),
        requant_(to.requant),
        s_(s),
        p_(p) {
#if defined(EXAMPLE_NPU_X86_64)
    if (!portable && HasAvx512Bw()) {
      pixels_ = {PixelsAvx512<1, T>, PixelsAvx512<2, T>, PixelsAvx512<3, T>, PixelsAvx512<4, T>};
#if defined(__AVX512VNNI__)
      if (row_weights_ != nullptr) {
        row_pixels_ = RowPixelsTable<T>(std::make_index_sequence<kRowPixels>());
      }
#endif
      return;
    }
    if (!portable && HasAvx2()) {
      pixels_ = {PixelsAvx2<1, T>, PixelsAvx2<2, T>, PixelsAvx2<3, T>, PixelsAvx2<4, T>};
      return;
    }
#else
    (void)portable;
#endif
    pixels_ = {PixelsPortable<1, T>, PixelsPortable<2, T>, PixelsPortable<3, T>,
               PixelsPortable<4, T>};
  }

  /*! \brief Output rows [begin, end) of (image, output row). */
  void Run(int64_t begin, int64_t end) const {
    // Per thread and kept between calls: no heap allocation per row range.
    thread_local std::vector<const T*> tap_in, row_in;
    thread_local std::vector<const int32_t*> tap_w, row_w_low, row_w_sum;
    tap_in.resize(static_cast<size_t>(s_.kh * s_.kw));
    tap_w.resize(static_cast<size_t>(s_.kh * s_.kw));
    const int64_t sw = p_.strides[1], dw = p_.dilation[1];
    // Output columns whose kernel_w taps all fall inside the input row.
    const int64_t interior_begin = std::min(s_.ow, (p_.padding[1] + sw - 1) / sw);
    const int64_t last_start = s_.w - 1 - (s_.kw - 1) * dw + p_.padding[1];
    const int64_t interior_end =
        last_start < 0 ? interior_begin
                       : std::max(interior_begin, std::min(s_.ow, last_start / sw + 1));
    const int64_t step = sw * s_.in.pixel;
    // Requantized: the int32 sums of a few rows (at most 16 KiB, at least one row), requantized
    // together once they are summed (a call per row paid the requantization's set-up per row).
    thread_local std::vector<int32_t> row_sums;
    const int64_t row_words = s_.ow * s_.channels;
    const int64_t rows_per_batch =
        std::max<int64_t>(1, (int64_t{4} << 10) / std::max<int64_t>(row_words, 1));
    if (requant_ != nullptr) row_sums.resize(static_cast<size_t>(rows_per_batch * row_words));
    int64_t first_summed = begin;  // the first row whose sums wait in row_sums
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / s_.oh, oh = r % s_.oh;
      const int64_t h_base = oh * p_.strides[0] - p_.padding[0];
      const Range khs = ValidRange(h_base, p_.dilation[0], s_.h, s_.kh);
      const T* image = input_ + n * s_.in.batch;
      const int64_t row_offset = r * s_.ow * s_.channels;
      int32_t* const sums =
          requant_ != nullptr ? row_sums.data() + (r - first_summed) * row_words : nullptr;
      auto gather = [&](int64_t ow) {
        const int64_t w_base = ow * sw - p_.padding[1];
        const Range kws = ValidRange(w_base, dw, s_.w, s_.kw);
        int64_t count = 0;
        for (int64_t kh = khs.begin; kh < khs.end; ++kh) {
          const T* row = image + (h_base + kh * p_.dilation[0]) * s_.in.row;
          for (int64_t kw = kws.begin; kw < kws.end; ++kw) {
            tap_in[count] = row + (w_base + kw * dw) * s_.in.pixel;
            tap_w[count++] = weight_ + (kh * s_.kw + kw) * s_.channels;
          }
        }
        return PixelTaps<T>{tap_in.data(), tap_w.data(), count, step};
      };
      auto out_at = [&](int64_t ow) {
        const int64_t at = ow * s_.channels;
        return requant_ != nullptr
                   ? PixelOut{nullptr, sums + at, s_.channels, false}
                   : PixelOut{to_.acc + row_offset + at, nullptr, s_.channels, to_.accumulate};
      };
      const Pixels one = pixels_[0];
      int64_t ow = 0;
      for (; ow < interior_begin; ++ow) one(gather(ow), s_.channels, zero_point_, out_at(ow));
#if defined(__AVX512VNNI__)
      if (ow < interior_end && row_pixels_[0] != nullptr) {
        // Interior pixels by kernel rows, eight at a time and the rest in one call.
        const int64_t kernel_rows = khs.end - khs.begin;
        row_in.resize(static_cast<size_t>(kernel_rows));
        row_w_low.resize(static_cast<size_t>(kernel_rows));
        row_w_sum.resize(static_cast<size_t>(kernel_rows));
        for (int64_t kh = khs.begin; kh < khs.end; ++kh) {
          const int64_t r = kh - khs.begin;
          row_in[r] = image + (h_base + kh * p_.dilation[0]) * s_.in.row +
                      (ow * sw - p_.padding[1]) * s_.in.pixel;
          row_w_low[r] = row_weights_->low + kh * s_.kw * s_.channels;
          row_w_sum[r] = row_weights_->sums + kh * s_.channels;
        }
        const KernelRows<T> rows{row_in.data(), row_w_low.data(), row_w_sum.data(), kernel_rows,
                                 s_.in.pixel};
        for (; ow < interior_end;) {
          const int64_t count = std::min<int64_t>(kRowPixels, interior_end - ow);
          row_pixels_[count - 1](rows, s_.channels, zero_point_, out_at(ow));
          for (const T*& in : row_in) in += count * step;
          ow += count;
        }
      }
#endif
      if (ow < interior_end) {
        // Interior pixels share one tap pattern: gathered once, then shifted along the row, four
        // pixels at a time and the last one to three in one call.
        const PixelTaps<T> taps = gather(ow);
        for (; ow < interior_end;) {
          const int64_t count = std::min<int64_t>(4, interior_end - ow);
          pixels_[count - 1](taps, s_.channels, zero_point_, out_at(ow));
          for (int64_t t = 0; t < taps.count; ++t) tap_in[t] += count * step;
          ow += count;
        }
      }
      for (; ow < s_.ow; ++ow) one(gather(ow), s_.channels, zero_point_, out_at(ow));
      if (requant_ != nullptr && (r + 1 - first_summed == rows_per_batch || r + 1 == end)) {
        // Output pixels lie at one stride, row after row: the rows' pixels are one run.
        requant_->Run(row_sums.data(), s_.channels, nullptr, nullptr, 0,
                      (r + 1 - first_summed) * s_.ow,
                      to_.OutAtPixel(first_summed * s_.ow, s_.channels),
                      to_.PixelStride(s_.channels), to_.out_type);
        first_summed = r + 1;
      }
    }
  }

 private:
  using Pixels = void (*)(const PixelTaps<T>&, int64_t, int32_t, const PixelOut&);
  static constexpr size_t kRowPixels = 8;
  const T* input_;
  int32_t zero_point_;
  const int32_t* weight_;
  const RowWeights* row_weights_;
  const SumsOut& to_;
  const PreparedRequantization* requant_;
  DepthwiseShape s_;
  const Conv2dParams& p_;
  std::array<Pixels, 4> pixels_{};  // pixels_[k - 1]: k pixels, k in [1, 4]
#if defined(__AVX512VNNI__)
  // row_pixels_[k - 1]: k pixels by kernel rows (RowPixelsVnni), or null.
  std::array<void (*)(const KernelRows<T>&, int64_t, int32_t, const PixelOut&), kRowPixels>
      row_pixels_{};
#endif
};

/*! \brief Output rows at least this wide run their padded edge pixels one by one (Run). */
constexpr int64_t kPaddedCopyWidth = 16;

/*! \brief WeightPackCache keys of depthwise weights have this where PackB's have segments. */
constexpr int64_t kDepthwiseWeights = -1;

template <typename T>
void Run(const T* input, const Shape& in_shape, int64_t zero_point, const int8_t* weight,
         const Shape& weight_shape, const SumsOut& to, const Shape& out_shape,
         const Conv2dParams& p, bool portable, WeightPackCache* packs,
         const PixelStrides* in_strides) {
  const DepthwiseShape s{in_shape[0],
                         in_shape[1],
                         in_shape[2],
                         in_shape[3],
                         weight_shape[0],
                         weight_shape[1],
                         out_shape[1],
                         out_shape[2],
                         in_strides != nullptr ? *in_strides : DensePixelStrides(in_shape)};
  // The weights widened once to int32, tap-major with the channels contiguous (HWIO [kh, kw, 1,
  // C] as it lies), then, for kernel rows (RowPixelsVnni: a kRowKernelWidth-wide kernel at
  // stride 1), RowWeights' two arrays: made once for weights `packs` keeps, else per call into
  // this thread's buffer (the workers only read it while it waits).
  const int64_t size = s.kh * s.kw * s.channels;
  bool by_rows = false;
#if defined(__AVX512VNNI__)
  by_rows = !portable && HasAvx512Bw() && s.kw == kRowKernelWidth && p.strides[1] == 1 &&
            p.dilation[1] == 1;
#endif
  const int64_t words = by_rows ? 2 * size + s.kh * s.channels : size;
  auto prepare = [&](int32_t* out) {
    std::copy_n(weight, size, out);
    if (!by_rows) return;
    int32_t* low = out + size;
    int32_t* sums = low + size;
    for (int64_t i = 0; i < size; ++i) low[i] = out[i] & 0xffff;
    std::fill_n(sums, s.kh * s.channels, 0);
    for (int64_t t = 0; t < s.kh * s.kw; ++t) {
      int32_t* row = sums + t / s.kw * s.channels;
      for (int64_t c = 0; c < s.channels; ++c) row[c] += out[t * s.channels + c];
    }
  };
  const PackedWeights* kept =
      packs == nullptr ? nullptr
                       : packs->Get({reinterpret_cast<intptr_t>(weight), kDepthwiseWeights, s.kh,
                                     s.kw, s.channels, by_rows ? 1 : 0, 0, 0},
                                    [&](PackedWeights* out) {
                                      out->b.resize(static_cast<size_t>(words));
                                      prepare(out->b.data());
                                    });
  thread_local std::vector<int32_t> buffer;
  const int32_t* weight32 = kept != nullptr ? kept->b.data() : nullptr;
  if (weight32 == nullptr) {
    buffer.resize(static_cast<size_t>(words));
    prepare(buffer.data());
    weight32 = buffer.data();
  }
  const RowWeights row_weights =
      by_rows ? RowWeights{weight32 + size, weight32 + 2 * size} : RowWeights{nullptr, nullptr};
  auto run = [&](const T* data, const DepthwiseShape& shape, const Conv2dParams& params) {
    const DepthwiseRows<T> rows(data, zero_point, weight32, by_rows ? &row_weights : nullptr, to,
                                shape, params, portable);
    const int64_t row_work = std::max<int64_t>(s.ow * s.channels * s.kh * s.kw, 1);
    ParallelFor(s.batch * s.oh, std::max<int64_t>(1, (1 << 16) / row_work),
                [&](int64_t begin, int64_t end) { rows.Run(begin, end); });
  };
  const int64_t left = p.padding[1], right = p.padding[3];
  if ((left == 0 && right == 0) || s.ow >= kPaddedCopyWidth ||
      zero_point < std::numeric_limits<T>::min() || zero_point > std::numeric_limits<T>::max()) {
    run(input, s, p);
    return;
  }
  // The horizontal padding copied in as the zero point (which contributes nothing): every
  // output column then has all of its taps, so whole rows run four pixels at a time instead of
  // their edge pixels one by one (a keyword-spotting layer 5 pixels wide has no block of four
  // interior ones). Rows of kPaddedCopyWidth pixels or more keep their few edge pixels one by
  // one: the copy of every pixel cost more there (MobileNetV2's 16 x 16 and 56-wide tiles).
  DepthwiseShape padded_shape = s;
  padded_shape.w = s.w + left + right;
  padded_shape.in = DensePixelStrides({s.batch, s.h, padded_shape.w, s.channels});
  Conv2dParams padded_params = p;
  padded_params.padding[1] = padded_params.padding[3] = 0;
  thread_local std::vector<T> padded;
  const int64_t row = s.w * s.channels, padded_row = padded_shape.in.row;
  padded.resize(static_cast<size_t>(s.batch * s.h * padded_row));
  const T pad = static_cast<T>(zero_point);
  const bool dense_rows = s.in.pixel == s.channels;
  for (int64_t y = 0; y < s.batch * s.h; ++y) {
    T* dst = padded.data() + y * padded_row;
    const T* src = input + y / s.h * s.in.batch + y % s.h * s.in.row;
    std::fill(dst, dst + left * s.channels, pad);
    if (dense_rows) {
      std::copy_n(src, row, dst + left * s.channels);
    } else {
      // An element loop: a library copy call per pixel of a few dozen bytes costs more.
      for (int64_t x = 0; x < s.w; ++x) {
        const T* from = src + x * s.in.pixel;
        T* to = dst + (left + x) * s.channels;
        for (int64_t c = 0; c < s.channels; ++c) to[c] = from[c];
      }
    }
    std::fill(dst + left * s.channels + row, dst + padded_row, pad);
  }
  run(padded.data(), padded_shape, padded_params);
}

}  // namespace

bool IsQuantizedDepthwise(const Shape& in_shape, int64_t zero_point, const Shape& weight_shape,
                          const Shape& out_shape, const Conv2dParams& p) {
  return p.data_layout == DataLayout::kNHWC && p.kernel_layout == KernelLayout::kHWIO &&
         in_shape.size() == 4 && weight_shape.size() == 4 && out_shape.size() == 4 &&
         weight_shape[2] == 1 && p.groups == in_shape[3] && weight_shape[3] == in_shape[3] &&
         out_shape[3] == in_shape[3] && out_shape[0] == in_shape[0] &&
         zero_point >= kMinZeroPoint && zero_point <= kMaxZeroPoint &&
         SaturatingMul(weight_shape[0], weight_shape[1]) <= kMaxTaps;
}

void QuantizedDepthwise(const int8_t* input, const Shape& in_shape, int64_t zero_point,
                        const int8_t* weight, const Shape& weight_shape, const SumsOut& to,
                        const Shape& out_shape, const Conv2dParams& params, bool portable,
                        WeightPackCache* packs, const PixelStrides* in_strides) {
  Run(input, in_shape, zero_point, weight, weight_shape, to, out_shape, params, portable, packs,
      in_strides);
}

void QuantizedDepthwise(const uint8_t* input, const Shape& in_shape, int64_t zero_point,
                        const int8_t* weight, const Shape& weight_shape, const SumsOut& to,
                        const Shape& out_shape, const Conv2dParams& params, bool portable,
                        WeightPackCache* packs, const PixelStrides* in_strides) {
  Run(input, in_shape, zero_point, weight, weight_shape, to, out_shape, params, portable, packs,
      in_strides);
}

}  // namespace kernels
}  // namespace example_npu
