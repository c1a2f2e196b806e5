#include "kernels/quantize.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cache_line_vector.h"
#include "kernels/direct_gemm.h"
#include "kernels/quantized_depthwise.h"
#include "kernels/requantize_sums.h"
#include "kernels/window.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace example_npu {
namespace kernels {

namespace {

/*! \brief Grow-only per-thread scratch of 32-bit words (int8 operands are packed four to one). */
int32_t* Scratch(int which, size_t words) {
  thread_local CacheLineVector<int32_t> buffers[4];
  CacheLineVector<int32_t>& buffer = buffers[which];
  if (buffer.size() < words) buffer.resize(words);
  return buffer.data();
}

int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// int32 sums of uint8 x int8 products stay exact below this depth (depth * 255 * 128 < 2^31).
constexpr int64_t kMaxU8S8Depth = 65536;

/*!
 * \brief dst[j] = the four bytes rows[0..3][j] ^ flip, for 16 columns j; sums[j] += the four
 * (signed) values.
 */
inline void Interleave4(const int8_t* const rows[4], uint8_t flip, int32_t* dst, int32_t* sums) {
#if defined(__AVX512BW__)
  const __m128i bias = _mm_set1_epi8(static_cast<char>(flip));
  __m128i r[4];
  __m512i total = _mm512_loadu_si512(sums);
  for (int t = 0; t < 4; ++t) {
    r[t] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[t]));
    // (maskz: GCC 12 warns about the undefined register in the plain intrinsic)
    total = _mm512_add_epi32(total, _mm512_maskz_cvtepi8_epi32(0xffff, r[t]));
    r[t] = _mm_xor_si128(r[t], bias);
  }
  _mm512_storeu_si512(sums, total);
  const __m128i lo01 = _mm_unpacklo_epi8(r[0], r[1]), hi01 = _mm_unpackhi_epi8(r[0], r[1]);
  const __m128i lo23 = _mm_unpacklo_epi8(r[2], r[3]), hi23 = _mm_unpackhi_epi8(r[2], r[3]);
  __m128i* out = reinterpret_cast<__m128i*>(dst);
  _mm_storeu_si128(out + 0, _mm_unpacklo_epi16(lo01, lo23));
  _mm_storeu_si128(out + 1, _mm_unpackhi_epi16(lo01, lo23));
  _mm_storeu_si128(out + 2, _mm_unpacklo_epi16(hi01, hi23));
  _mm_storeu_si128(out + 3, _mm_unpackhi_epi16(hi01, hi23));
#else
  for (int64_t j = 0; j < kU8S8Columns; ++j) {
    dst[j] =
        static_cast<int32_t>(static_cast<uint8_t>(rows[0][j] ^ flip) |
                             static_cast<uint32_t>(static_cast<uint8_t>(rows[1][j] ^ flip)) << 8 |
                             static_cast<uint32_t>(static_cast<uint8_t>(rows[2][j] ^ flip)) << 16 |
                             static_cast<uint32_t>(static_cast<uint8_t>(rows[3][j] ^ flip)) << 24);
    sums[j] += rows[0][j] + rows[1][j] + rows[2][j] + rows[3][j];
  }
#endif
}

/*! \brief Row terms from eight-byte sums of (x + 128), kPerRow to a row (RowTerms). */
template <int64_t kPerRow>
void EightByteRowTerms(const int64_t* lane, int64_t m, int64_t unsigned_offset, int64_t* out) {
  for (int64_t i = 0; i < m; ++i, lane += kPerRow) {
    int64_t sum = 0;
    for (int64_t q = 0; q < kPerRow; ++q) sum += lane[q];
    out[i] = 128 * (sum - unsigned_offset);
  }
}

/*! \brief Per row of an int8 [m, k] matrix, 128 times the sum of its values. */
void RowTerms(const int8_t* a, int64_t m, int64_t k, int64_t* out) {
#if defined(__AVX512BW__)
  if (k < 64 && k % 8 == 0) {
    // A pointwise layer's few channels, a multiple of eight: vpsadbw sums each eight bytes made
    // unsigned (x + 128) into a 64-bit lane in one pass over the matrix, then each row adds its
    // k / 8 lanes (one, as often as not: the loop then vectorises).
    thread_local std::vector<int64_t> lanes;
    const int64_t bytes = m * k;
    lanes.resize(static_cast<size_t>(RoundUp(bytes, 64) / 8));
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int64_t p = 0; p < bytes; p += 64) {
      const __mmask64 in = bytes - p >= 64 ? ~__mmask64{0} : (__mmask64{1} << (bytes - p)) - 1;
      _mm512_storeu_si512(
          lanes.data() + p / 8,
          _mm512_sad_epu8(_mm512_xor_si512(_mm512_maskz_loadu_epi8(in, a + p), flip),
                          _mm512_setzero_si512()));
    }
    // k / 8 is 1 to 7: a loop whose count the compiler knows, for each.
    static constexpr std::array<void (*)(const int64_t*, int64_t, int64_t, int64_t*), 7> kRows = {
        EightByteRowTerms<1>, EightByteRowTerms<2>, EightByteRowTerms<3>, EightByteRowTerms<4>,
        EightByteRowTerms<5>, EightByteRowTerms<6>, EightByteRowTerms<7>};
    kRows[k / 8 - 1](lanes.data(), m, 128 * k, out);
    return;
  }
#endif
#if defined(__AVX512VNNI__)
  if (k < 64 && k % 4 == 0) {
    // A pointwise layer's few channels: rows lie side by side in each 64-byte vector, so the
    // four-byte lane sums of the whole matrix come in one pass (a reduction per row cost more
    // than its row), then each row adds its k / 4 lanes.
    thread_local std::vector<int32_t> lanes;
    const int64_t bytes = m * k;
    lanes.resize(static_cast<size_t>(RoundUp(bytes, 64) / 4));
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t p = 0; p < bytes; p += 64) {
      const __mmask64 in = bytes - p >= 64 ? ~__mmask64{0} : (__mmask64{1} << (bytes - p)) - 1;
      _mm512_storeu_si512(
          lanes.data() + p / 4,
          _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_maskz_loadu_epi8(in, a + p)));
    }
    const int64_t per_row = k / 4;
    const int32_t* lane = lanes.data();
    for (int64_t i = 0; i < m; ++i, lane += per_row) {
      int32_t sum = 0;
      for (int64_t q = 0; q < per_row; ++q) sum += lane[q];
      out[i] = int64_t{128} * sum;
    }
    return;
  }
#endif
  for (int64_t i = 0; i < m; ++i) {
    const int8_t* row = a + i * k;
    int32_t sum = 0;
    int64_t p = 0;
#if defined(__AVX512VNNI__)
    // ones (unsigned) x row (signed): four-byte partial sums per lane.
    __m512i acc = _mm512_setzero_si512();
    const __m512i ones = _mm512_set1_epi8(1);
    for (; p + 64 <= k; p += 64) acc = _mm512_dpbusd_epi32(acc, ones, _mm512_loadu_si512(row + p));
    if (p < k) {  // the rest (all of a pointwise convolution's few channels): masked
      const __mmask64 rest = (__mmask64{1} << (k - p)) - 1;
      acc = _mm512_dpbusd_epi32(acc, ones, _mm512_maskz_loadu_epi8(rest, row + p));
      p = k;
    }
    sum = _mm512_reduce_add_epi32(acc);
#elif defined(__AVX2__)
    // The bytes made unsigned (x + 128) and summed by vpsadbw, less 128 per byte.
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    __m256i acc = _mm256_setzero_si256();
    for (; p + 32 <= k; p += 32) {
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + p));
      acc = _mm256_add_epi64(
          acc, _mm256_sad_epu8(_mm256_xor_si256(bytes, flip), _mm256_setzero_si256()));
    }
    __m128i acc8 = _mm_setzero_si128();
    for (; p + 8 <= k; p += 8) {
      const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + p));
      acc8 = _mm_add_epi64(acc8, _mm_sad_epu8(_mm_xor_si128(bytes, _mm256_castsi256_si128(flip)),
                                              _mm_setzero_si128()));
    }
    alignas(32) int64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
    sum = static_cast<int32_t>(lanes[0] + lanes[1] + lanes[2] + lanes[3] + _mm_cvtsi128_si64(acc8) -
                               128 * p);
#endif
    for (; p < k; ++p) sum += row[p];
    out[i] = int64_t{128} * sum;
  }
}

/*!
 * \brief Packs an int8 B for DirectGemmU8S8 (flip 0) or, stored as w + 128, for DirectGemmS8U8
 * (flip 0x80), and sums its columns. B's rows come in `segments` runs of `depth` rows (row
 * (s, d) at base + (s * depth + d) * ld), each run padded to depth4 rows; n columns padded to
 * n16. Padding holds w = 0.
 */
void PackInt8B(const int8_t* base, int64_t segments, int64_t depth, int64_t depth4, int64_t ld,
               int64_t n, int64_t n16, uint8_t flip, int32_t* packed, int32_t* column_sums) {
  const int8_t zeros[kU8S8Columns] = {};
  for (int64_t j0 = 0; j0 < n16; j0 += kU8S8Columns) {
    const int64_t width = std::max<int64_t>(0, std::min(kU8S8Columns, n - j0));
    int32_t sums[kU8S8Columns] = {};
    for (int64_t s = 0; s < segments; ++s) {
      for (int64_t q = 0; q < depth4 / 4; ++q) {
        // Four B rows; missing rows and columns past n read zeros.
        const int8_t* rows[4];
        int8_t edge[4][kU8S8Columns];
        for (int t = 0; t < 4; ++t) {
          const int64_t d = 4 * q + t;
          const int8_t* src = d < depth ? base + (s * depth + d) * ld + j0 : nullptr;
          if (src == nullptr || width == 0) {
            rows[t] = zeros;
          } else if (width < kU8S8Columns) {
            std::fill(std::copy(src, src + width, edge[t]), edge[t] + kU8S8Columns, int8_t{0});
            rows[t] = edge[t];
          } else {
            rows[t] = src;
          }
        }
        int32_t* dst = packed + (s * depth4 / 4 + q) * n16 + j0;
        Interleave4(rows, flip, dst, sums);
      }
    }
    std::copy(sums, sums + kU8S8Columns, column_sums + j0);
  }
}

/*! \brief A packed B and its column sums (PackInt8B's outputs). */
struct PackedB {
  const int32_t* b;
  const int32_t* column_sums;
};

/*!
 * \brief PackInt8B's packing of these weights: kept in `packs` (weights that do not change, such
 * as bound constants: packed once for every tile that multiplies by them) or, without one or
 * when it is full, packed into this thread's scratch.
 */
PackedB PackB(const int8_t* base, int64_t segments, int64_t depth, int64_t depth4, int64_t ld,
              int64_t n, int64_t n16, uint8_t flip, WeightPackCache* packs) {
  const size_t words = static_cast<size_t>(segments * depth4 / 4 * n16);
  const PackedWeights* kept =
      packs == nullptr ? nullptr
                       : packs->Get({reinterpret_cast<intptr_t>(base), segments, depth, depth4, ld,
                                     n, n16, flip},
                                    [&](PackedWeights* out) {
                                      out->b.resize(words);
                                      out->column_sums.resize(static_cast<size_t>(n16));
                                      PackInt8B(base, segments, depth, depth4, ld, n, n16, flip,
                                                out->b.data(), out->column_sums.data());
                                    });
  if (kept != nullptr) return {kept->b.data(), kept->column_sums.data()};
  int32_t* b = Scratch(1, words);
  int32_t* sums = Scratch(2, static_cast<size_t>(n16));
  PackInt8B(base, segments, depth, depth4, ld, n, n16, flip, b, sums);
  return {b, sums};
}

/*!
 * \brief acc[i, j] (+)= c32[i, j] - row_terms[i] - correction * column_sums[j] for an m x n block
 * of acc (row_terms may be null: zero).
 */
void StoreCorrected(const int32_t* c32, int64_t ldc, const int64_t* row_terms,
                    const int32_t* column_sums, int64_t correction, int64_t m, int64_t n,
                    int64_t* acc, int64_t ld_acc, bool accumulate) {
  for (int64_t i = 0; i < m; ++i) {
    const int32_t* src = c32 + i * ldc;
    int64_t* dst = acc + i * ld_acc;
    const int64_t row_term = row_terms ? row_terms[i] : 0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t value = static_cast<int64_t>(src[j]) - row_term - correction * column_sums[j];
      dst[j] = accumulate ? dst[j] + value : value;
    }
  }
}

/*!
 * \brief StoreCorrected's values put where `to` says: into its accumulators, or requantized into
 * its output (the block starting `offset` elements in, rows `ld` apart, channels 0 to n).
 */
void StoreSums(const int32_t* c32, int64_t ldc, const int64_t* row_terms,
               const int32_t* column_sums, int64_t correction, int64_t m, int64_t n,
               const SumsOut& to, int64_t offset, int64_t ld) {
  if (to.requant == nullptr) {
    StoreCorrected(c32, ldc, row_terms, column_sums, correction, m, n, to.acc + offset, ld,
                   to.accumulate);
  } else {
    // Fused sums start at a pixel (a requantized convolution has one group).
    if (to.near_ties == nullptr) {
      to.requant->Run(c32, ldc, row_terms, column_sums, correction, m,
                      to.OutAtPixel(offset / ld, ld), to.PixelStride(ld), to.out_type);
    } else {
      to.requant->RunFindingNearTies(c32, ldc, row_terms, column_sums, correction, m,
                                     to.OutAtPixel(offset / ld, ld), to.PixelStride(ld),
                                     to.out_type, offset / ld, to.near_ties);
    }
  }
}

/*!
 * \brief The unsigned operand of the dot-product unit for an 8-bit activation: int8 x as x + 128
 * (its sign bit flipped), uint8 x as it is. kUnsignedOffset is what was added.
 */
inline uint8_t AsUnsigned(int8_t x) { return static_cast<uint8_t>(x) ^ 0x80; }
inline uint8_t AsUnsigned(uint8_t x) { return x; }
template <typename T>
constexpr int64_t kUnsignedOffset = std::is_same_v<T, int8_t> ? 128 : 0;

/*!
 * \brief dst[0, count) = AsUnsigned(src[0, count)), then zeros up to `padded` (they meet zero rows
 * of B). A pixel's channels are few (8 to 64 in MobileNets), too few for the compiler's vector
 * loop to start: masked 64-byte vectors take them whole (AVX2: 32 and 8 bytes at a time).
 */
template <typename T>
void CopyUnsignedPadded(const T* src, int64_t count, int64_t padded, uint8_t* dst) {
  if (padded == 4) {
    // A first layer's 1 to 4 channels: a vector's masks would cost more than the bytes.
    for (int64_t i = 0; i < 4; ++i) dst[i] = i < count ? AsUnsigned(src[i]) : uint8_t{0};
    return;
  }
#if defined(__AVX512BW__)
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(kUnsignedOffset<T>));
  for (int64_t i = 0; i < padded; i += 64) {
    const int64_t valid = std::clamp<int64_t>(count - i, 0, 64);
    const __mmask64 in = valid == 64 ? ~__mmask64{0} : (__mmask64{1} << valid) - 1;
    const int64_t width = std::min<int64_t>(padded - i, 64);
    const __mmask64 out = width == 64 ? ~__mmask64{0} : (__mmask64{1} << width) - 1;
    const __m512i bytes = _mm512_maskz_loadu_epi8(in, src + i);
    _mm512_mask_storeu_epi8(dst + i, out, _mm512_maskz_mov_epi8(in, _mm512_xor_si512(bytes, flip)));
  }
#else
  int64_t i = 0;
#if defined(__AVX2__)
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(kUnsignedOffset<T>));
  for (; i + 32 <= count; i += 32) {
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_xor_si256(bytes, flip));
  }
  for (; i + 8 <= count; i += 8) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + i),
                     _mm_xor_si128(bytes, _mm256_castsi256_si128(flip)));
  }
#endif
  for (; i < count; ++i) dst[i] = AsUnsigned(src[i]);
  std::fill(dst + count, dst + padded, uint8_t{0});
#endif
}

/*!
 * \brief `pixels` pixels of `count` (1 to 4) channels, `stride` elements apart, each written as
 * four bytes: AsUnsigned of its channels, then zeros. A first layer's RGB row, where a call of
 * CopyUnsignedPadded per pixel cost more than the pixel's multiply-adds; dense pixels go sixteen
 * to a byte permutation on AVX-512 VBMI.
 */
template <typename T>
void CopyPixelsUnsignedToFour(const T* src, int64_t stride, int64_t count, int64_t pixels,
                              uint8_t* dst) {
  int64_t x = 0;
#if defined(__AVX512VBMI__)
  if (stride == count) {
    alignas(64) uint8_t from[64], flips[64];
    __mmask64 kept = 0;
    for (int64_t j = 0; j < 64; ++j) {
      const bool channel = j % 4 < count;
      from[j] = static_cast<uint8_t>(j / 4 * count + j % 4);
      flips[j] = channel ? static_cast<uint8_t>(kUnsignedOffset<T>) : 0;
      kept |= __mmask64{channel} << j;
    }
    const __m512i order = _mm512_load_si512(from), flip = _mm512_load_si512(flips);
    for (; x < pixels; x += 16) {
      const int64_t n = std::min<int64_t>(16, pixels - x);
      const __mmask64 in = n * count == 64 ? ~__mmask64{0} : (__mmask64{1} << (n * count)) - 1;
      const __mmask64 out = n == 16 ? ~__mmask64{0} : (__mmask64{1} << (4 * n)) - 1;
      const __m512i bytes = _mm512_maskz_loadu_epi8(in, src + x * count);
      const __m512i spread = _mm512_maskz_permutexvar_epi8(kept, order, bytes);
      _mm512_mask_storeu_epi8(dst + 4 * x, out, _mm512_xor_si512(spread, flip));
    }
    return;
  }
#endif
  for (; x < pixels; ++x) {
    uint32_t word = 0;
    for (int64_t i = 0; i < count; ++i) {
      word |= uint32_t{AsUnsigned(src[x * stride + i])} << (8 * i);
    }
    std::memcpy(dst + 4 * x, &word, sizeof(word));
  }
}

template <typename T>
void MatmulU8S8(const T* lhs, int64_t zero_point, const int8_t* rhs, int64_t ldb, int64_t m,
                int64_t k, int64_t n, const SumsOut& to, WeightPackCache* packs) {
  const int64_t k4 = RoundUp(k, 4), n16 = RoundUp(n, kU8S8Columns);
  int32_t* c32 = Scratch(3, static_cast<size_t>(m * n16));
  DirectRows rows;
  rows.row_stride = k4 / 4;
  rows.depth = k4 / 4;
  if (k == k4) {
    if constexpr (std::is_same_v<T, int8_t>) {
      // Rows of whole 4-byte groups: the activations are read in place as the signed operand
      // against w + 128, so sum x (w + 128) = sum x w + 128 sum x.
      const PackedB w = PackB(rhs, 1, k, k4, ldb, n, n16, 0x80, packs);
      thread_local std::vector<int64_t> row_terms;
      row_terms.resize(static_cast<size_t>(m));
      // B's first padding column (w = 0, stored as 128) sums 128 x along each row: where n leaves
      // one, the GEMM computes the row terms too.
      if (n == n16) RowTerms(lhs, m, k, row_terms.data());
      DirectGemmS8U8(m, n16, lhs, rows, reinterpret_cast<const uint8_t*>(w.b), n16, c32, n16);
      for (int64_t i = 0; i < m && n < n16; ++i) row_terms[i] = c32[i * n16 + n];
      StoreSums(c32, n16, row_terms.data(), w.column_sums, zero_point, m, n, to, 0, n);
    } else {
      // uint8 activations already are the unsigned operand: read in place.
      const PackedB w = PackB(rhs, 1, k, k4, ldb, n, n16, 0, packs);
      DirectGemmU8S8(m, n16, lhs, rows, reinterpret_cast<const int8_t*>(w.b), n16, c32, n16);
      StoreSums(c32, n16, nullptr, w.column_sums, zero_point, m, n, to, 0, n);
    }
    return;
  }
  // Otherwise a copy as uint8 with the rows padded to whole groups.
  uint8_t* a = reinterpret_cast<uint8_t*>(Scratch(0, static_cast<size_t>(m * k4 / 4)));
  for (int64_t i = 0; i < m; ++i) CopyUnsignedPadded(lhs + i * k, k, k4, a + i * k4);
  const PackedB w = PackB(rhs, 1, k, k4, ldb, n, n16, 0, packs);
  DirectGemmU8S8(m, n16, a, rows, reinterpret_cast<const int8_t*>(w.b), n16, c32, n16);
  StoreSums(c32, n16, nullptr, w.column_sums, kUnsignedOffset<T> + zero_point, m, n, to, 0, n);
}

template <typename T>
void MatmulPortable(const T* lhs, int64_t zero_point, const int8_t* rhs, int64_t ldb, int64_t m,
                    int64_t k, int64_t n, int64_t* acc, bool accumulate) {
  for (int64_t i = 0; i < m; ++i) {
    int64_t* row = acc + i * n;
    if (!accumulate) std::fill(row, row + n, 0);
    for (int64_t p = 0; p < k; ++p) {
      // |x - zp| < 2^16 and |w| <= 128: the product fits int32.
      const int32_t a = static_cast<int32_t>(lhs[i * k + p] - zero_point);
      if (a == 0) continue;
      const int8_t* b = rhs + p * ldb;
      for (int64_t j = 0; j < n; ++j) row[j] += a * static_cast<int32_t>(b[j]);
    }
  }
}

/*! \brief Sizes of a quantized NHWC / HWIO convolution tile. */
struct QConvShape {
  int64_t batch, h, w, c, kh, kw, group_in, oh, ow, co, group_out;
};

QConvShape MakeQConvShape(const Shape& in_shape, const Shape& weight_shape, const Shape& out_shape,
                          const Conv2dParams& p) {
  TVM_FFI_ICHECK(p.data_layout == DataLayout::kNHWC && p.kernel_layout == KernelLayout::kHWIO)
      << "QuantizedConv2d runs on NHWC tiles";
  QConvShape s{in_shape[0],
               in_shape[1],
               in_shape[2],
               in_shape[3],
               weight_shape[0],
               weight_shape[1],
               weight_shape[2],
               out_shape[1],
               out_shape[2],
               out_shape[3],
               out_shape[3] / p.groups};
  TVM_FFI_ICHECK_EQ(s.group_in * p.groups, s.c)
      << "QuantizedConv2d: groups do not match the channels";
  return s;
}

template <typename T>
void ConvPortable(const T* input, int64_t zero_point, const int8_t* weight, int64_t* acc,
                  const QConvShape& s, const Conv2dParams& p, bool accumulate) {
  for (int64_t nb = 0; nb < s.batch; ++nb) {
    for (int64_t y = 0; y < s.oh; ++y) {
      for (int64_t x = 0; x < s.ow; ++x) {
        int64_t* out = acc + ((nb * s.oh + y) * s.ow + x) * s.co;
        if (!accumulate) std::fill(out, out + s.co, 0);
        for (int64_t ky = 0; ky < s.kh; ++ky) {
          const int64_t iy = y * p.strides[0] - p.padding[0] + ky * p.dilation[0];
          if (iy < 0 || iy >= s.h) continue;
          for (int64_t kx = 0; kx < s.kw; ++kx) {
            const int64_t ix = x * p.strides[1] - p.padding[1] + kx * p.dilation[1];
            if (ix < 0 || ix >= s.w) continue;
            const T* pixel = input + ((nb * s.h + iy) * s.w + ix) * s.c;
            const int8_t* taps = weight + (ky * s.kw + kx) * s.group_in * s.co;
            for (int64_t g = 0; g < p.groups; ++g) {
              int64_t* out_g = out + g * s.group_out;
              for (int64_t i = 0; i < s.group_in; ++i) {
                const int32_t a = static_cast<int32_t>(pixel[g * s.group_in + i] - zero_point);
                if (a == 0) continue;
                const int8_t* w = taps + i * s.co + g * s.group_out;
                for (int64_t o = 0; o < s.group_out; ++o)
                  out_g[o] += a * static_cast<int32_t>(w[o]);
              }
            }
          }
        }
      }
    }
  }
}

/*!
 * \brief One image and group on the dot-product unit: the input is copied once into a padded
 * uint8 buffer (AsUnsigned; padding holds the unsigned zero point, so it contributes nothing
 * after the correction; channels padded to a multiple of four), then every tap reads it in place
 * (DirectGemmU8S8).
 */
template <typename T>
void ConvU8S8(const T* input, int64_t zero_point, const int8_t* weight, const SumsOut& to,
              const QConvShape& s, const Conv2dParams& p, WeightPackCache* packs) {
  const int64_t c4 = RoundUp(s.group_in, 4), n16 = RoundUp(s.group_out, kU8S8Columns);
  const int64_t hp = s.h + p.padding[0] + p.padding[2], wp = s.w + p.padding[1] + p.padding[3];
  const int64_t pixels = s.oh * s.ow, taps = s.kh * s.kw;
  uint8_t* a = reinterpret_cast<uint8_t*>(Scratch(0, static_cast<size_t>(hp * wp * c4 / 4)));
  int32_t* c32 = Scratch(3, static_cast<size_t>(pixels * n16));
  thread_local std::vector<int64_t> offsets;
  offsets.resize(static_cast<size_t>(pixels + taps));
  const int64_t groups = c4 / 4;  // 4-byte groups of a padded pixel
  for (int64_t y = 0; y < s.oh; ++y) {
    const int64_t row = y * p.strides[0] * wp * groups, step = p.strides[1] * groups;
    for (int64_t x = 0; x < s.ow; ++x) offsets[y * s.ow + x] = row + x * step;
  }
  for (int64_t ky = 0; ky < s.kh; ++ky) {
    for (int64_t kx = 0; kx < s.kw; ++kx) {
      offsets[pixels + ky * s.kw + kx] = (ky * p.dilation[0] * wp + kx * p.dilation[1]) * c4 / 4;
    }
  }
  DirectRows rows;
  rows.row_offsets = offsets.data();
  rows.segment_offsets = offsets.data() + pixels;
  rows.segments = taps;
  rows.depth = c4 / 4;
  if (p.dilation[1] == 1) {
    // A kernel row's taps are the next pixels' channels in the padded buffer: one run each.
    for (int64_t ky = 0; ky < s.kh; ++ky) offsets[pixels + ky] = offsets[pixels + ky * s.kw];
    rows.segments = s.kh;
    rows.depth = s.kw * c4 / 4;
  }
  const int64_t unsigned_zero_point = kUnsignedOffset<T> + zero_point;
  const uint8_t pad = static_cast<uint8_t>(unsigned_zero_point);
  // One group's pixels already lie c4 bytes apart (no channel padding, one group): a row's
  // interior is one copy instead of one per pixel.
  const bool dense_rows = s.group_in == c4 && p.groups == 1;
  const int64_t left = p.padding[1];
  for (int64_t nb = 0; nb < s.batch; ++nb) {
    for (int64_t g = 0; g < p.groups; ++g) {
      for (int64_t y = 0; y < hp; ++y) {
        const int64_t iy = y - p.padding[0];
        uint8_t* dst = a + y * wp * c4;
        if (iy < 0 || iy >= s.h) {
          std::fill(dst, dst + wp * c4, pad);
          continue;
        }
        std::fill(dst, dst + left * c4, pad);
        std::fill(dst + (left + s.w) * c4, dst + wp * c4, pad);
        const T* src = input + (nb * s.h + iy) * s.w * s.c + g * s.group_in;
        if (dense_rows) {
          CopyUnsignedPadded(src, s.w * c4, s.w * c4, dst + left * c4);
          continue;
        }
        if (c4 == 4) {
          CopyPixelsUnsignedToFour(src, s.c, s.group_in, s.w, dst + left * c4);
          continue;
        }
        for (int64_t ix = 0; ix < s.w; ++ix) {
          CopyUnsignedPadded(src + ix * s.c, s.group_in, c4, dst + (left + ix) * c4);
        }
      }
      const PackedB w =
          PackB(weight + g * s.group_out, taps, s.group_in, c4, s.co, s.group_out, n16, 0, packs);
      DirectGemmU8S8(pixels, n16, a, rows, reinterpret_cast<const int8_t*>(w.b), n16, c32, n16);
      StoreSums(c32, n16, nullptr, w.column_sums, unsigned_zero_point, pixels, s.group_out, to,
                nb * pixels * s.co + g * s.group_out, s.co);
    }
  }
}

}  // namespace

namespace {

/*! \brief 8-bit activations: the dot-product unit when the build has one and the sums fit. */
template <typename T>
void Matmul8(const T* lhs, int64_t lhs_zero_point, const int8_t* rhs, int64_t ldb, int64_t m,
             int64_t k, int64_t n, const SumsOut& to, WeightPackCache* packs) {
  if (HasInt8DotProduct() && RoundUp(k, 4) <= kMaxU8S8Depth && m > 0 && n > 0) {
    MatmulU8S8(lhs, lhs_zero_point, rhs, ldb, m, k, n, to, packs);
    return;
  }
  ViaAccumulators(to, m * n, n, [&](int64_t* acc, bool accumulate) {
    MatmulPortable(lhs, lhs_zero_point, rhs, ldb, m, k, n, acc, accumulate);
  });
}

/*! \brief The NHWC activation at `strides` gathered densely into this thread's buffer (the
 * convolutions other than the depthwise one read dense activations). */
template <typename T>
const T* Gathered(const T* input, const Shape& shape, const PixelStrides& strides) {
  thread_local std::vector<T> dense;
  const PixelStrides d = DensePixelStrides(shape);
  dense.resize(static_cast<size_t>(shape[0] * d.batch));
  for (int64_t y = 0; y < shape[0] * shape[1]; ++y) {
    const T* row = input + y / shape[1] * strides.batch + y % shape[1] * strides.row;
    for (int64_t x = 0; x < shape[2]; ++x) {
      std::copy_n(row + x * strides.pixel, d.pixel, dense.data() + y * d.row + x * d.pixel);
    }
  }
  return dense.data();
}

template <typename T>
void Conv8(const T* input, const Shape& in_shape, int64_t input_zero_point, const int8_t* weight,
           const Shape& weight_shape, const SumsOut& to, const Shape& out_shape,
           const Conv2dParams& p, WeightPackCache* packs, const PixelStrides* in_strides) {
  if (IsQuantizedDepthwise(in_shape, input_zero_point, weight_shape, out_shape, p)) {
    QuantizedDepthwise(input, in_shape, input_zero_point, weight, weight_shape, to, out_shape, p,
                       /*portable=*/false, packs, in_strides);
    return;
  }
  if (in_strides != nullptr) {
    Conv8(Gathered(input, in_shape, *in_strides), in_shape, input_zero_point, weight, weight_shape,
          to, out_shape, p, packs, nullptr);
    return;
  }
  const QConvShape s = MakeQConvShape(in_shape, weight_shape, out_shape, p);
  // A pointwise convolution is a matmul of the pixels by the weight: read in place, no copy.
  const bool pointwise =
      s.kh == 1 && s.kw == 1 && p.groups == 1 && s.oh == s.h && s.ow == s.w && p.strides[0] == 1 &&
      p.strides[1] == 1 &&
      std::all_of(p.padding.begin(), p.padding.end(), [](int64_t pad) { return pad == 0; });
  if (pointwise) {
    Matmul8(input, input_zero_point, weight, s.co, s.batch * s.h * s.w, s.c, s.co, to, packs);
    return;
  }
  // Other narrow groups would waste most of each 16-column vector: the portable loop.
  // ConvU8S8 copies the padded input; huge padding, strides or dilation take the portable loop.
  const int64_t hp = SaturatingAdd(SaturatingAdd(s.h, p.padding[0]), p.padding[2]);
  const int64_t wp = SaturatingAdd(SaturatingAdd(s.w, p.padding[1]), p.padding[3]);
  const bool dot = HasInt8DotProduct() && s.group_out >= kU8S8Columns / 2 &&
                   s.kh * s.kw * RoundUp(s.group_in, 4) <= kMaxU8S8Depth &&
                   PaddedCopyFits(hp, wp, s.h, s.w, s.oh * s.ow, s.kh * s.kw) && s.oh * s.ow > 0;
  // A prepared requantization starts at channel 0: several groups go through the accumulators.
  if (dot && (to.requant == nullptr || p.groups == 1)) {
    ConvU8S8(input, input_zero_point, weight, to, s, p, packs);
    return;
  }
  ViaAccumulators(to, s.batch * s.oh * s.ow * s.co, s.co, [&](int64_t* acc, bool accumulate) {
    if (dot) {
      ConvU8S8(input, input_zero_point, weight, SumsOut{acc, accumulate}, s, p, packs);
    } else {
      ConvPortable(input, input_zero_point, weight, acc, s, p, accumulate);
    }
  });
}

}  // namespace

void QuantizedMatmul(const int8_t* lhs, int64_t lhs_zero_point, const int8_t* rhs, int64_t m,
                     int64_t k, int64_t n, const SumsOut& to, WeightPackCache* packs,
                     int64_t rhs_stride) {
  Matmul8(lhs, lhs_zero_point, rhs, rhs_stride > 0 ? rhs_stride : n, m, k, n, to, packs);
}

void QuantizedMatmul(const uint8_t* lhs, int64_t lhs_zero_point, const int8_t* rhs, int64_t m,
                     int64_t k, int64_t n, const SumsOut& to, WeightPackCache* packs,
                     int64_t rhs_stride) {
  Matmul8(lhs, lhs_zero_point, rhs, rhs_stride > 0 ? rhs_stride : n, m, k, n, to, packs);
}

void QuantizedMatmul(const int16_t* lhs, int64_t lhs_zero_point, const int8_t* rhs, int64_t m,
                     int64_t k, int64_t n, const SumsOut& to, WeightPackCache*,
                     int64_t rhs_stride) {
  ViaAccumulators(to, m * n, n, [&](int64_t* acc, bool accumulate) {
    MatmulPortable(lhs, lhs_zero_point, rhs, rhs_stride > 0 ? rhs_stride : n, m, k, n, acc,
                   accumulate);
  });
}

void QuantizedConv2d(const int8_t* input, const Shape& in_shape, int64_t input_zero_point,
                     const int8_t* weight, const Shape& weight_shape, const SumsOut& to,
                     const Shape& out_shape, const Conv2dParams& p, WeightPackCache* packs,
                     const PixelStrides* in_strides) {
  Conv8(input, in_shape, input_zero_point, weight, weight_shape, to, out_shape, p, packs,
        in_strides);
}

void QuantizedConv2d(const uint8_t* input, const Shape& in_shape, int64_t input_zero_point,
                     const int8_t* weight, const Shape& weight_shape, const SumsOut& to,
                     const Shape& out_shape, const Conv2dParams& p, WeightPackCache* packs,
                     const PixelStrides* in_strides) {
  Conv8(input, in_shape, input_zero_point, weight, weight_shape, to, out_shape, p, packs,
        in_strides);
}

void QuantizedConv2d(const int16_t* input, const Shape& in_shape, int64_t input_zero_point,
                     const int8_t* weight, const Shape& weight_shape, const SumsOut& to,
                     const Shape& out_shape, const Conv2dParams& p, WeightPackCache*,
                     const PixelStrides* in_strides) {
  if (in_strides != nullptr) input = Gathered(input, in_shape, *in_strides);
  const QConvShape s = MakeQConvShape(in_shape, weight_shape, out_shape, p);
  ViaAccumulators(to, s.batch * s.oh * s.ow * s.co, s.co, [&](int64_t* acc, bool accumulate) {
    ConvPortable(input, input_zero_point, weight, acc, s, p, accumulate);
  });
}

void Quantize(const float* x, int64_t size, float scale, int64_t zero_point, int64_t lo, int64_t hi,
              float* out) {
  // float32 throughout, as Relax computes it; clamping in float keeps huge inputs defined. The
  // clamp is TVM's clip, max(min(q, hi), lo) with selects, so NaN becomes hi, as in TVM's build.
  const float low = static_cast<float>(lo), high = static_cast<float>(hi);
  for (int64_t i = 0; i < size; ++i) {
    const float q = std::nearbyint(x[i] / scale) + static_cast<float>(zero_point);
    const float upper = q < high ? q : high;
    out[i] = upper > low ? upper : low;
  }
}

void Dequantize(const float* q, int64_t size, float scale, int64_t zero_point, float* out) {
  for (int64_t i = 0; i < size; ++i) {
    out[i] = scale * static_cast<float>(static_cast<int64_t>(q[i]) - zero_point);
  }
}

}  // namespace kernels
}  // namespace example_npu
