/*!
 * \file kernels/near_ties.cc
 * \brief Near-tie outputs of QDQ layers and TVM's float32 result for them (kernels/near_ties.h).
 */
#include "kernels/near_ties.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/qdq_float32.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace example_npu {
namespace kernels {
namespace {

/*! \brief The float32 sum's last steps: the bias added, then TVM's quantize. */
int64_t QuantizedFloat32Sum(float sum, const Requantization& requant, int64_t channel) {
  const Float32Operands& f = requant.float32;
  if (!f.bias.empty()) sum = sum + f.bias[channel];
  const QuantizedOutput out{requant.output_zero_point, requant.min, requant.max};
  return static_cast<int64_t>(Float32Quantize(f.output_scale, out)(sum));
}

}  // namespace

int64_t NearTieWindow(const Requantization& requant, int64_t channel) {
  const FixedPointMultiplier& m = requant.Multiplier(channel);
  int64_t window = m.shift > kNearTieBits ? int64_t{1} << (m.shift - kNearTieBits) : 1;
  const Float32Operands& f = requant.float32;
  if (!f.bias.empty()) {
    // The bias in accumulator units as TVM adds it, against the integer the NPU adds.
    const double units = static_cast<double>(f.bias[channel]) /
                         (static_cast<double>(f.input_scale) * f.WeightScale(channel));
    const double apart = std::abs(units - static_cast<double>(requant.bias[channel]));
    window += static_cast<int64_t>(std::ceil(std::min(apart, 1.0) * static_cast<double>(m.m0)));
  }
  return std::min(window, int64_t{1} << (m.shift - 1));
}

bool NearTie(int64_t value, const FixedPointMultiplier& m, int64_t window, int64_t zero_point,
             int64_t min, int64_t max) {
  const __int128 one = 1;
  const __int128 rounded = static_cast<__int128>(value) * m.m0 + (one << (m.shift - 1));
  const __int128 quotient = rounded >> m.shift;                      // the exact rounding, half up
  const __int128 remainder = rounded - quotient * (one << m.shift);  // in [0, 2^shift)
  const __int128 near = window;
  // Just past a tie (rounded up from it) the other integer is one below; just short of one, one
  // above.
  __int128 lower;
  if (remainder < near) {
    lower = quotient - 1;
  } else if (remainder >= (one << m.shift) - near) {
    lower = quotient;
  } else {
    return false;
  }
  // Both integers clamp to one value unless the lower lies in [min, max - 1].
  return lower + zero_point >= min && lower + zero_point < max;
}

NearTieScan::NearTieScan(const Requantization& requant, int64_t channels) : requant_(&requant) {
  if (requant.float32.empty()) return;
  for (int64_t j = 0; j < channels; ++j) {
    const FixedPointMultiplier& m = requant.Multiplier(j);
    const int64_t window = NearTieWindow(requant, j);
    m0_.push_back(m.m0);
    nudge_.push_back((int64_t{1} << (m.shift - 1)) + window);
    mask_.push_back((int64_t{1} << m.shift) - 1);
    width_.push_back(2 * window);
    window_.push_back(window);
    bias_.push_back(requant.bias.empty() ? 0 : requant.bias[j]);
  }
}

template <typename T>
void NearTieScan::ScanRow(const T* values, const int64_t* offsets, int64_t row_term,
                          int64_t first_index, std::vector<int64_t>* ties) const {
  const int64_t channels = static_cast<int64_t>(m0_.size());
  const Requantization& r = *requant_;
  // A candidate (one in a few hundred) gets NearTie's exact test.
  auto check = [&](int64_t j) {
    if (NearTie(int64_t{values[j]} + offsets[j] - row_term, r.Multiplier(j), window_[j],
                r.output_zero_point, r.min, r.max)) {
      ties->push_back(first_index + j);
    }
  };
  // The quick test: below 2^31 the product and nudge fit int64 (m0 < 2^31, shift <= 62), and
  // the value and m0 fit the int32 halves of a 32 x 32 -> 64-bit product; wider values (int16
  // activations) are candidates.
  int64_t j = 0;
#if defined(__AVX512F__)
  const __m512i lowest = _mm512_set1_epi64(-(int64_t{1} << 31) + 1);
  const __m512i highest = _mm512_set1_epi64((int64_t{1} << 31) - 1);
  const __m512i row = _mm512_set1_epi64(row_term);
  // maskz forms: GCC 12 warns about the undefined register in the plain intrinsics.
  constexpr __mmask8 kAll8 = 0xff;
  for (; j + 8 <= channels; j += 8) {
    __m512i exact;
    if constexpr (std::is_same_v<T, int32_t>) {
      exact = _mm512_maskz_cvtepi32_epi64(
          kAll8, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + j)));
    } else {
      exact = _mm512_loadu_si512(values + j);
    }
    const __m512i v =
        _mm512_sub_epi64(_mm512_add_epi64(exact, _mm512_loadu_si512(offsets + j)), row);
    const __m512i remainder = _mm512_and_si512(
        _mm512_add_epi64(_mm512_maskz_mul_epi32(kAll8, v, _mm512_loadu_si512(&m0_[j])),
                         _mm512_loadu_si512(&nudge_[j])),
        _mm512_loadu_si512(&mask_[j]));
    unsigned candidates = _mm512_cmplt_epi64_mask(remainder, _mm512_loadu_si512(&width_[j])) |
                          _mm512_cmplt_epi64_mask(v, lowest) | _mm512_cmpgt_epi64_mask(v, highest);
    for (; candidates != 0; candidates &= candidates - 1) check(j + __builtin_ctz(candidates));
  }
#endif
  for (; j < channels; ++j) {
    const int64_t v = int64_t{values[j]} + offsets[j] - row_term;
    const bool wide = v <= -(int64_t{1} << 31) || v >= (int64_t{1} << 31);
    if (wide || ((v * m0_[j] + nudge_[j]) & mask_[j]) < width_[j]) check(j);
  }
}

template void NearTieScan::ScanRow(const int32_t*, const int64_t*, int64_t, int64_t,
                                   std::vector<int64_t>*) const;
template void NearTieScan::ScanRow(const int64_t*, const int64_t*, int64_t, int64_t,
                                   std::vector<int64_t>*) const;

void FindNearTies(const int64_t* acc, int64_t rows, int64_t channels, const Requantization& requant,
                  std::vector<int64_t>* ties) {
  const NearTieScan scan(requant, channels);
  if (scan.empty()) return;
  for (int64_t i = 0; i < rows; ++i) {
    scan.ScanRow(acc + i * channels, scan.bias(), 0, i * channels, ties);
  }
}

namespace {

/*!
 * \brief TVM's results for `ties` (flat indices of outputs, channels innermost), kBatch at a time:
 * `gather(tie, xs, ws)` writes the integer operands of each of its `depth` products in TVM's
 * order (a padding tap: the zero points, which dequantize to 0). The products are dequantized and
 * multiplied a batch at once (the loops vectorise); each output's float32 sum then runs in order,
 * the batch's sums interleaved (one add's latency no longer serialises them).
 */
template <typename Gather>
void Float32Results(const std::vector<int64_t>& ties, int64_t depth, int64_t channels,
                    int64_t x_zero_point, int64_t w_zero_point, const Requantization& requant,
                    const Gather& gather, std::vector<int64_t>* results) {
  constexpr int64_t kBatch = 16;
  const Float32Operands& f = requant.float32;
  const float zx = static_cast<float>(x_zero_point), zw = static_cast<float>(w_zero_point);
  thread_local std::vector<int32_t> xs, ws;
  thread_local std::vector<float> products;
  xs.resize(static_cast<size_t>(kBatch * depth));
  ws.resize(xs.size());
  products.resize(xs.size());
  results->clear();
  for (size_t first = 0; first < ties.size(); first += kBatch) {
    const int64_t count = std::min<int64_t>(kBatch, static_cast<int64_t>(ties.size() - first));
    for (int64_t lane = 0; lane < count; ++lane) {
      const int64_t tie = ties[first + lane];
      int32_t *x = xs.data() + lane * depth, *w = ws.data() + lane * depth;
      gather(tie, x, w);
      float* product = products.data() + lane * depth;
      const float sx = f.input_scale, sw = f.WeightScale(tie % channels);
      for (int64_t p = 0; p < depth; ++p) {
        product[p] =
            ((static_cast<float>(x[p]) - zx) * sx) * ((static_cast<float>(w[p]) - zw) * sw);
      }
    }
    // TVM's legalized reduction: a float32 sum from 0, the products added in order.
    float sums[kBatch] = {};
    for (int64_t p = 0; p < depth; ++p) {
      for (int64_t lane = 0; lane < count; ++lane) {
        sums[lane] = sums[lane] + products[lane * depth + p];
      }
    }
    for (int64_t lane = 0; lane < count; ++lane) {
      results->push_back(QuantizedFloat32Sum(sums[lane], requant, ties[first + lane] % channels));
    }
  }
}

}  // namespace

template <typename T>
void Float32MatmulResults(const std::vector<int64_t>& ties, const T* x, int64_t x_zero_point,
                          const int8_t* w, int64_t ldw, int64_t w_zero_point, int64_t depth,
                          int64_t channels, const Requantization& requant,
                          std::vector<int64_t>* results, WeightPackCache* packs) {
  // A constant weight's columns, each laid out in order once (a tie's column is otherwise read
  // with a stride of a row per product, a cache line each).
  const PackedWeights* columns =
      packs == nullptr || ties.empty()
          ? nullptr
          : packs->Get({reinterpret_cast<intptr_t>(w), -1, depth, ldw, channels, 0, 0, 0},
                       [&](PackedWeights* out) {
                         out->b.resize(static_cast<size_t>(channels * depth + 3) / 4);
                         int8_t* t = reinterpret_cast<int8_t*>(out->b.data());
                         for (int64_t p = 0; p < depth; ++p) {
                           for (int64_t n = 0; n < channels; ++n) t[n * depth + p] = w[p * ldw + n];
                         }
                       });
  auto gather = [&](int64_t tie, int32_t* xs, int32_t* ws) {
    const T* row = x + tie / channels * depth;
    for (int64_t p = 0; p < depth; ++p) xs[p] = row[p];
    if (columns != nullptr) {
      const int8_t* column =
          reinterpret_cast<const int8_t*>(columns->b.data()) + tie % channels * depth;
      for (int64_t p = 0; p < depth; ++p) ws[p] = column[p];
    } else {
      const int8_t* column = w + tie % channels;
      for (int64_t p = 0; p < depth; ++p) ws[p] = column[p * ldw];
    }
  };
  Float32Results(ties, depth, channels, x_zero_point, w_zero_point, requant, gather, results);
}

void StoreResults(const std::vector<int64_t>& ties, const std::vector<int64_t>& results,
                  int64_t channels, void* out, SumsType type, int64_t pixel_stride) {
  WithSumsType(type, out, [&](auto* dst) {
    using T = std::remove_pointer_t<decltype(dst)>;
    for (size_t t = 0; t < ties.size(); ++t) {
      dst[ties[t] / channels * pixel_stride + ties[t] % channels] = static_cast<T>(results[t]);
    }
  });
}

#define EXAMPLE_NPU_NEAR_TIES(T)                                                                \
  template void Float32MatmulResults(                                                           \
      const std::vector<int64_t>&, const T*, int64_t, const int8_t*, int64_t, int64_t, int64_t, \
      int64_t, const Requantization&, std::vector<int64_t>*, WeightPackCache*);
EXAMPLE_NPU_NEAR_TIES(int8_t)
EXAMPLE_NPU_NEAR_TIES(uint8_t)
EXAMPLE_NPU_NEAR_TIES(int16_t)
#undef EXAMPLE_NPU_NEAR_TIES

}  // namespace kernels
}  // namespace example_npu
