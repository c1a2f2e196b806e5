/*!
 * \file kernels/direct_gemm.cc
 * \brief The in-place GEMM: an MR x (NV vectors) register tile, A broadcast from where it lies.
 *
 * Loop nest: column panels (a panel of B stays in the core's cache), then row blocks of kMR rows
 * (kNarrowMR in a panel one vector wide; split over the threads), then register tiles of 2 or 1
 * vectors of columns across the panel.
 * Per reduction step a tile loads NV vectors of one B row and broadcasts one A element per row:
 * MR * NV multiply-adds for MR + NV loads. A column tail narrower than a vector goes through a
 * zero-padded copy of those B columns (float only; the int8 B is packed by the caller). A float
 * B may also lie in panels of whole vectors (DirectGemmPanels): a register tile whose two vectors
 * lie in different panels then loads them a panel apart.
 */
#include "kernels/direct_gemm.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/amx_gemm.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace example_npu {
namespace kernels {
namespace {

/*! \brief float32 multiply-add on the widest vectors the build targets. */
struct F32Ops {
  using A = float;
  using B = float;
  using C = float;
  // Float sums keep their order: one accumulator per output, the reduction in sequence.
  static constexpr bool kExactSums = false;
#if defined(__AVX512F__)
  using Vec = __m512;
  using Operand = Vec;
  static constexpr int64_t kLanes = 16;
  static constexpr int kMR = 12;
  static constexpr int kNarrowMR = 16;
  static EXAMPLE_NPU_INLINE Vec Zero() { return _mm512_setzero_ps(); }
  static EXAMPLE_NPU_INLINE Vec Broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static EXAMPLE_NPU_INLINE Vec Load(const float* p) { return _mm512_loadu_ps(p); }
  static EXAMPLE_NPU_INLINE Vec MulAdd(Vec acc, Vec a, Vec b) { return _mm512_fmadd_ps(a, b, acc); }
  static EXAMPLE_NPU_INLINE void Store(float* c, Vec v, bool accumulate) {
    _mm512_storeu_ps(c, accumulate ? _mm512_add_ps(_mm512_loadu_ps(c), v) : v);
  }
  static EXAMPLE_NPU_INLINE void StoreAdding(float* c, Vec v, bool accumulate, const float* addend,
                                             bool addend_first) {
    const Vec sum = accumulate ? _mm512_add_ps(_mm512_loadu_ps(c), v) : v;
    const Vec add = _mm512_loadu_ps(addend);
    _mm512_storeu_ps(c, addend_first ? _mm512_add_ps(add, sum) : _mm512_add_ps(sum, add));
  }
#else
  using Vec = simd::V8;
  using Operand = Vec;
  static constexpr int64_t kLanes = simd::kLanes;
  static constexpr int kMR = 6;
  static constexpr int kNarrowMR = 12;
  static EXAMPLE_NPU_INLINE Vec Zero() { return Vec{}; }
  static EXAMPLE_NPU_INLINE Vec Broadcast(const float* p) { return simd::Splat(*p); }
  static EXAMPLE_NPU_INLINE Vec Load(const float* p) { return simd::Load(p); }
  static EXAMPLE_NPU_INLINE Vec MulAdd(Vec acc, Vec a, Vec b) { return acc + a * b; }
  static EXAMPLE_NPU_INLINE void Store(float* c, Vec v, bool accumulate) {
    simd::Store(c, accumulate ? simd::Load(c) + v : v);
  }
  static EXAMPLE_NPU_INLINE void StoreAdding(float* c, Vec v, bool accumulate, const float* addend,
                                             bool addend_first) {
    const Vec sum = accumulate ? simd::Load(c) + v : v;
    simd::Store(c, addend_first ? simd::Load(addend) + sum : sum + simd::Load(addend));
  }
#endif
};

#if defined(__AVX512VNNI__) || defined(__AVXVNNI__) || defined(__AVX2__)
#define EXAMPLE_NPU_INT8_DOT 1
/*!
 * \brief Four 8-bit products per int32 lane, summed exactly, as vpdpbusd (unsigned x signed
 * bytes) computes them: AVX-512 VNNI, 256-bit AVX-VNNI, or, on AVX2 alone, the same sums from
 * 16-bit multiplies (see Operand). A and B are handled as 32-bit groups of four bytes; A is the
 * unsigned side, or, with kSignedA, the signed side (B then holds the unsigned bytes).
 */
template <bool kSignedA>
struct Int8Ops {
  using A = int32_t;
  using B = int32_t;
  using C = int32_t;
  // Integer sums are exact in any order: a short tile may split its reduction over chains.
  static constexpr bool kExactSums = true;
#if defined(__AVX512VNNI__)
  using Vec = __m512i;
  using Operand = Vec;
  static constexpr int64_t kLanes = 16;
  static constexpr int kMR = 12;
  static constexpr int kNarrowMR = 16;
  static EXAMPLE_NPU_INLINE Vec Zero() { return _mm512_setzero_si512(); }
  static EXAMPLE_NPU_INLINE Vec Splat(int32_t word) { return _mm512_set1_epi32(word); }
  static EXAMPLE_NPU_INLINE Vec LoadWords(const int32_t* p) { return _mm512_loadu_si512(p); }
  static EXAMPLE_NPU_INLINE void Put(int32_t* p, Vec v) { _mm512_storeu_si512(p, v); }
  static EXAMPLE_NPU_INLINE Vec Add(Vec a, Vec b) { return _mm512_add_epi32(a, b); }
  static EXAMPLE_NPU_INLINE Operand AsUnsigned(Vec v) { return v; }
  static EXAMPLE_NPU_INLINE Operand AsSigned(Vec v) { return v; }
  static EXAMPLE_NPU_INLINE Vec Dot(Vec acc, Operand u, Operand s) {
    return _mm512_dpbusd_epi32(acc, u, s);
  }
#else
  using Vec = __m256i;
  static constexpr int64_t kLanes = 8;
  static EXAMPLE_NPU_INLINE Vec Zero() { return _mm256_setzero_si256(); }
  static EXAMPLE_NPU_INLINE Vec Splat(int32_t word) { return _mm256_set1_epi32(word); }
  static EXAMPLE_NPU_INLINE Vec LoadWords(const int32_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static EXAMPLE_NPU_INLINE void Put(int32_t* p, Vec v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }
  static EXAMPLE_NPU_INLINE Vec Add(Vec a, Vec b) { return _mm256_add_epi32(a, b); }
#if defined(__AVXVNNI__)
  using Operand = Vec;
  static constexpr int kMR = 6;
  static constexpr int kNarrowMR = 12;
  static EXAMPLE_NPU_INLINE Operand AsUnsigned(Vec v) { return v; }
  static EXAMPLE_NPU_INLINE Operand AsSigned(Vec v) { return v; }
  static EXAMPLE_NPU_INLINE Vec Dot(Vec acc, Operand u, Operand s) {
    return _mm256_dpbusd_avx_epi32(acc, u, s);
  }
#else
  /*!
   * \brief A group's bytes 0 and 2 (even) and 1 and 3 (odd) as 16-bit values, zero- or
   * sign-extended: vpmaddwd of the even halves gives u0 s0 + u2 s2, of the odd ones u1 s1 + u3 s3,
   * exactly (|u s| <= 255 * 128), so their sum is vpdpbusd's. Each operand is split once per
   * load and serves a whole row or column of the register tile.
   */
  struct Operand {
    __m256i even, odd;
  };
  // 16 registers: 4 x 2 accumulators, 2 x 2 split B vectors and a split A broadcast.
  static constexpr int kMR = 4;
  static constexpr int kNarrowMR = 8;
  static EXAMPLE_NPU_INLINE Operand AsUnsigned(Vec v) {
    return {_mm256_and_si256(v, _mm256_set1_epi16(0xff)), _mm256_srli_epi16(v, 8)};
  }
  static EXAMPLE_NPU_INLINE Operand AsSigned(Vec v) {
    return {_mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8), _mm256_srai_epi16(v, 8)};
  }
  static EXAMPLE_NPU_INLINE Vec Dot(Vec acc, Operand u, Operand s) {
    return _mm256_add_epi32(
        acc, _mm256_add_epi32(_mm256_madd_epi16(u.even, s.even), _mm256_madd_epi16(u.odd, s.odd)));
  }
#endif
#endif
  static EXAMPLE_NPU_INLINE Operand Broadcast(const int32_t* p) {
    int32_t word;  // A may be an int8 tile read in place: load it as bytes
    std::memcpy(&word, p, sizeof(word));
    return kSignedA ? AsSigned(Splat(word)) : AsUnsigned(Splat(word));
  }
  static EXAMPLE_NPU_INLINE Operand Load(const int32_t* p) {
    return kSignedA ? AsUnsigned(LoadWords(p)) : AsSigned(LoadWords(p));
  }
  static EXAMPLE_NPU_INLINE Vec MulAdd(Vec acc, Operand a, Operand b) {
    return kSignedA ? Dot(acc, b, a) : Dot(acc, a, b);
  }
  static EXAMPLE_NPU_INLINE void Store(int32_t* c, Vec v, bool accumulate) {
    Put(c, accumulate ? Add(LoadWords(c), v) : v);
  }
};
#endif

/*!
 * \brief Independent accumulator chains of an MR x NV register tile: a tile of fewer than four
 * accumulators (a matrix-vector product: one row of A) waits on the multiply-add latency at every
 * step unless its reduction is split over several chains, summed at the end; only exact (integer)
 * sums may be reordered so.
 */
template <class Ops, int MR, int NV>
constexpr int kChains = Ops::kExactSums && MR * NV < 4 ? 4 / (MR * NV) : 1;

/*!
 * \brief One register tile: C[0:MR, 0:NV * kLanes] (+)= A rows `rows` times B's columns at b (rows
 * ldb apart), vector v of them at b + v * kLanes, or with kPanels (the vectors in different panels
 * of B) at b + v * panel_step.
 */
template <class Ops, int MR, int NV, bool kPanels, bool kUniformRows = false>
void MicroTile(const typename Ops::A* const* rows, const DirectRows& shape,
               const typename Ops::B* b, int64_t ldb, int64_t panel_step, typename Ops::C* c,
               int64_t ldc, bool accumulate, const DirectAddend* addend) {
  using Vec = typename Ops::Vec;
  constexpr int64_t L = Ops::kLanes;
  constexpr int K = kChains<Ops, MR, NV>;
  Vec acc[K][MR][NV];
  for (int h = 0; h < K; ++h) {
    for (int i = 0; i < MR; ++i) {
      for (int v = 0; v < NV; ++v) acc[h][i][v] = Ops::Zero();
    }
  }
  // Reduction step p of the chain h: acc[h] += A[:, p] * B[p, :], row i of A at row(i) + p.
  const int64_t vector_step = kPanels ? panel_step : L;
  auto step = [&](int h, const auto& row, const typename Ops::B* bp, int64_t p) {
    typename Ops::Operand bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = Ops::Load(bp + v * vector_step);
    for (int i = 0; i < MR; ++i) {
      const typename Ops::Operand x = Ops::Broadcast(row(i) + p);
      for (int v = 0; v < NV; ++v) acc[h][i][v] = Ops::MulAdd(acc[h][i][v], x, bv[v]);
    }
  };
  auto segment_steps = [&](const auto& row, const typename Ops::B* bp) {
    int64_t p = 0;
    for (; p + K <= shape.depth; p += K) {
      for (int h = 0; h < K; ++h) step(h, row, bp + h * ldb, p + h);
      bp += K * ldb;
    }
    for (; p < shape.depth; ++p, bp += ldb) step(0, row, bp, p);
  };
  for (int64_t s = 0; s < shape.segments; ++s) {
    const int64_t segment = shape.segment_offsets ? shape.segment_offsets[s] : 0;
    const typename Ops::B* bp = b + s * shape.depth * ldb;
    if constexpr (kUniformRows) {
      // Rows equally far apart: one base pointer per four rows and the three distances from it,
      // where a pointer per row would not fit in the integer registers and be reloaded from the
      // stack at every step (a load slot per multiply-add already goes to the broadcasts).
      static_assert(MR >= 2, "a spacing needs two rows");
      constexpr int kGroups = (MR + 3) / 4;
      const int64_t rs = rows[1] - rows[0];
      const typename Ops::A* base[kGroups];
      for (int g = 0; g < kGroups; ++g) base[g] = rows[4 * g] + segment;
      const int64_t offset[4] = {0, rs, 2 * rs, 3 * rs};
      segment_steps([&](int i) { return base[i / 4] + offset[i % 4]; }, bp);
    } else {
      const typename Ops::A* ap[MR];
      for (int i = 0; i < MR; ++i) ap[i] = rows[i] + segment;
      segment_steps([&](int i) { return ap[i]; }, bp);
    }
  }
  if constexpr (K > 1) {
    for (int h = 1; h < K; ++h) {
      for (int i = 0; i < MR; ++i) {
        for (int v = 0; v < NV; ++v) acc[0][i][v] = Ops::Add(acc[0][i][v], acc[h][i][v]);
      }
    }
  }
  if constexpr (std::is_same_v<typename Ops::C, float>) {
    if (addend != nullptr) {
      for (int i = 0; i < MR; ++i) {
        for (int v = 0; v < NV; ++v) {
          Ops::StoreAdding(c + i * ldc + v * L, acc[0][i][v], accumulate,
                           addend->data + i * addend->row_stride + v * L, addend->first);
        }
      }
      return;
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int v = 0; v < NV; ++v) Ops::Store(c + i * ldc + v * L, acc[0][i][v], accumulate);
  }
}

template <class Ops>
using MicroTileFn = void (*)(const typename Ops::A* const*, const DirectRows&,
                             const typename Ops::B*, int64_t, int64_t, typename Ops::C*, int64_t,
                             bool, const DirectAddend*);

/*! \brief Rows of a register tile of NV vectors of columns: kMR, or kNarrowMR when a single vector
 * of accumulators per row leaves registers (and load slots per multiply-add) for more rows. */
template <class Ops, int NV>
constexpr int kTileRows = NV == 1 ? Ops::kNarrowMR : Ops::kMR;

/*! \brief MicroTile<Ops, rows, NV, kPanels> for rows = 1 .. kTileRows (the last row block may be
 * short). */
template <class Ops, int NV, bool kPanels, size_t... I>
constexpr std::array<MicroTileFn<Ops>, sizeof...(I)> MicroTiles(std::index_sequence<I...>) {
  return {&MicroTile<Ops, static_cast<int>(I) + 1, NV, kPanels>...};
}

/*! \brief The register tile for `rows` rows; a full-height block whose rows lie equally far
 * apart in each group of four (a matrix; a convolution's pixels, each four along one output row)
 * addresses them from a base pointer per group. */
template <class Ops, int NV, bool kPanels = false>
MicroTileFn<Ops> SelectTile(int rows, bool spaced_in_fours) {
  static constexpr auto table = MicroTiles<Ops, NV, kPanels>(
      std::make_index_sequence<static_cast<size_t>(kTileRows<Ops, NV>)>());
  if (spaced_in_fours && rows == kTileRows<Ops, NV>) {
    return &MicroTile<Ops, kTileRows<Ops, NV>, NV, kPanels, true>;
  }
  return table[rows - 1];
}

/*! \brief Grow-only per-thread scratch for the zero-padded B tail. */
template <typename T>
T* TailBuffer(size_t elements) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < elements) buffer.resize(elements);
  return buffer.data();
}

/*! \brief The operands of one call, as the row blocks see them. */
template <class Ops>
struct DirectCall {
  int64_t m, n;
  const typename Ops::A* a;
  const DirectRows* rows;
  const typename Ops::B* b;
  int64_t ldb;
  /*! \brief B's columns in panels of panel_width (a multiple of kLanes), panel q at
   * b + q * panel_stride; a dense B is one panel. */
  int64_t panel_width, panel_stride;
  const typename Ops::B* tail_b;  // zero-padded columns [full, n), or nullptr
  int64_t full;                   // columns in whole vectors
  typename Ops::C* c;
  int64_t ldc;
  bool accumulate;
  const DirectAddend* addend;  // float32 only, or nullptr

  /*! \brief The addend from output row i and column j on; none without an addend. */
  std::optional<DirectAddend> AddendAt(int64_t i, int64_t j) const {
    if (addend == nullptr || addend->data == nullptr) return std::nullopt;
    return DirectAddend{addend->data + i * addend->row_stride + j, addend->row_stride,
                        addend->first};
  }

  /*! \brief Where B's column j starts (a dense B, the common case, without a division). */
  const typename Ops::B* Column(int64_t j) const {
    return panel_width >= n ? b + j : b + j / panel_width * panel_stride + j % panel_width;
  }
};

/*! \brief Rows [i0, i1) times columns [j0, j1): at most kMR rows, or kNarrowMR when the columns
 * hold no two-vector tile. */
template <class Ops>
void RowBlock(const DirectCall<Ops>& call, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  using C = typename Ops::C;
  constexpr int64_t L = Ops::kLanes;
  const int mr = static_cast<int>(i1 - i0);
  const DirectRows& rows = *call.rows;
  const typename Ops::A* rp[Ops::kNarrowMR];
  for (int i = 0; i < mr; ++i) {
    rp[i] = call.a + (rows.row_offsets ? rows.row_offsets[i0 + i] : (i0 + i) * rows.row_stride);
  }
  // The uniform tile reads row i at rp[4 (i / 4)] + (i % 4) (rp[1] - rp[0]). A matrix's rows
  // are so; a convolution's gathered rows are where each four lie along one output row (a block
  // that crosses the end of an output row at a multiple of four too: 56 or 28 pixels a row).
  bool spaced_in_fours = mr > 1;
  for (int i = 2; rows.row_offsets != nullptr && i < mr && spaced_in_fours; ++i) {
    spaced_in_fours = rp[i] - rp[i - i % 4] == (i % 4) * (rp[1] - rp[0]);
  }
  C* crow = call.c + i0 * call.ldc;
  const int64_t whole = std::min(j1, call.full);
  int64_t j = j0;
  for (; j + 2 * L <= whole; j += 2 * L) {
    const typename Ops::B* b = call.Column(j);
    const int64_t step = call.Column(j + L) - b;
    const std::optional<DirectAddend> addend = call.AddendAt(i0, j);
    (step == L ? SelectTile<Ops, 2>(mr, spaced_in_fours)
               : SelectTile<Ops, 2, true>(mr, spaced_in_fours))(rp, rows, b, call.ldb, step,
                                                                crow + j, call.ldc, call.accumulate,
                                                                addend ? &*addend : nullptr);
  }
  const MicroTileFn<Ops> narrow = SelectTile<Ops, 1>(mr, spaced_in_fours);
  for (; j + L <= whole; j += L) {
    const std::optional<DirectAddend> addend = call.AddendAt(i0, j);
    narrow(rp, rows, call.Column(j), call.ldb, L, crow + j, call.ldc, call.accumulate,
           addend ? &*addend : nullptr);
  }
  if (j < j1) {
    C tile[Ops::kNarrowMR * L];
    narrow(rp, rows, call.tail_b, L, L, tile, L, false, nullptr);
    const std::optional<DirectAddend> addend = call.AddendAt(i0, j);
    for (int i = 0; i < mr; ++i) {
      for (int64_t q = 0; q < j1 - j; ++q) {
        C& out = crow[i * call.ldc + j + q];
        out = (call.accumulate ? out : C{}) + tile[i * L + q];
        if constexpr (std::is_same_v<C, float>) {
          if (addend) {
            const float add = addend->data[i * addend->row_stride + q];
            out = addend->first ? add + out : out + add;
          }
        }
      }
    }
  }
}

template <class Ops>
void RunDirect(DirectCall<Ops> call) {
  using B = typename Ops::B;
  constexpr int64_t L = Ops::kLanes;
  const DirectRows& rows = *call.rows;
  const int64_t k = rows.segments * rows.depth;
  if (call.m <= 0 || call.n <= 0) return;
  // Columns [full, n) are narrower than a vector: a zero-padded copy of them serves as B.
  call.full = call.n / L * L;
  if (call.full < call.n) {
    B* padded = TailBuffer<B>(static_cast<size_t>(k * L));
    for (int64_t p = 0; p < k; ++p) {
      B* row = padded + p * L;
      for (int64_t j = call.full; j < call.n; ++j)
        row[j - call.full] = call.Column(j)[p * call.ldb];
      std::fill(row + (call.n - call.full), row + L, B{});
    }
    call.tail_b = padded;
  }
  // A panel of B of about 256 KiB stays in the core's cache while every row block passes it.
  int64_t panel =
      std::max<int64_t>(2 * L, (int64_t{1} << 16) / std::max<int64_t>(k, 1) / (2 * L) * (2 * L));
  // With several threads, narrower panels when that gives each thread whole panels: a split of
  // the rows instead leaves every thread reading all of B and one of them a block more.
  const int64_t wanted_panels = 4 * int64_t{MaxThreads()};
  if (MaxThreads() > 1 && (call.n + panel - 1) / panel < wanted_panels) {
    const int64_t narrow = (call.n / wanted_panels) / (2 * L) * (2 * L);
    if (narrow >= 2 * L) panel = narrow;
  }
  const int64_t panels = (call.n + panel - 1) / panel;
  // Row blocks of near-equal height (64 rows: 11, 11, 11, 11, 10, 10 rather than 12 x 5 + 4),
  // so no block runs a short, latency-bound register tile; taller ones when a panel is one
  // vector wide (a 16 x 16 matrix-engine tile is one 16-row block, not two of 8 rows).
  auto block_rows_of = [&](int64_t j0, int64_t j1) -> int64_t {
    return std::min(call.full, j1) - j0 >= 2 * L ? Ops::kMR : Ops::kNarrowMR;
  };
  auto row_blocks_of = [&](int64_t j0, int64_t j1) {
    const int64_t block_rows = block_rows_of(j0, j1);
    return (call.m + block_rows - 1) / block_rows;
  };
  auto run_block = [&](int64_t j0, int64_t j1, int64_t row_blocks, int64_t blk) {
    int64_t i0 = 0, i1 = 0;
    ChunkBounds(call.m, row_blocks, blk, &i0, &i1);
    RowBlock<Ops>(call, i0, i1, j0, j1);
  };
  // Many panels (a layer's weights, a few rows of activations): each thread takes whole panels,
  // so every panel of B comes from memory once, into one core's cache.
  if (panels >= 4 * MaxThreads()) {
    ParallelFor(
        panels, 1,
        [&](int64_t begin, int64_t end) {
          for (int64_t q = begin; q < end; ++q) {
            const int64_t j0 = q * panel, j1 = std::min(call.n, j0 + panel);
            const int64_t row_blocks = row_blocks_of(j0, j1);
            for (int64_t blk = 0; blk < row_blocks; ++blk) run_block(j0, j1, row_blocks, blk);
          }
        },
        static_cast<int>(std::min<int64_t>(panels, 64)));
    return;
  }
  for (int64_t j0 = 0; j0 < call.n; j0 += panel) {
    const int64_t j1 = std::min(call.n, j0 + panel);
    const int64_t row_blocks = row_blocks_of(j0, j1);
    // Below this many multiply-adds per thread a hand-off costs more than it saves.
    const int64_t block_macs = std::max<int64_t>(1, block_rows_of(j0, j1) * k * (j1 - j0));
    ParallelFor(row_blocks, std::max<int64_t>(1, (int64_t{1} << 18) / block_macs),
                [&](int64_t begin, int64_t end) {
                  for (int64_t blk = begin; blk < end; ++blk) run_block(j0, j1, row_blocks, blk);
                });
  }
}

}  // namespace

void DirectGemm(int64_t m, int64_t n, const float* a, const DirectRows& rows, const float* b,
                int64_t ldb, float* c, int64_t ldc, bool accumulate, const DirectAddend& addend) {
  RunDirect<F32Ops>({m, n, a, &rows, b, ldb, n, 0, nullptr, 0, c, ldc, accumulate, &addend});
}

void DirectGemmPanels(int64_t m, int64_t n, const float* a, const DirectRows& rows, const float* b,
                      int64_t ldb, int64_t panel_width, int64_t panel_stride, float* c, int64_t ldc,
                      bool accumulate, const DirectAddend& addend) {
  static_assert(kPanelColumns % F32Ops::kLanes == 0, "panels of whole vectors");
  TVM_FFI_ICHECK(panel_width > 0 && panel_width % kPanelColumns == 0)
      << "B's panels are whole vectors wide";
  RunDirect<F32Ops>(
      {m, n, a, &rows, b, ldb, panel_width, panel_stride, nullptr, 0, c, ldc, accumulate, &addend});
}

bool HasInt8DotProduct() {
#if defined(EXAMPLE_NPU_INT8_DOT)
  return true;
#else
  return false;
#endif
}

namespace {

template <bool kSignedA>
void RunInt8(int64_t m, int64_t n, const void* a, const DirectRows& rows, const void* b,
             int64_t ldb, int32_t* c, int64_t ldc) {
#if defined(EXAMPLE_NPU_INT8_DOT)
  if (AmxGemmInt8(kSignedA, m, n, static_cast<const uint8_t*>(a), rows,
                  static_cast<const uint8_t*>(b), ldb, c, ldc)) {
    return;
  }
  RunDirect<Int8Ops<kSignedA>>({m, n, static_cast<const int32_t*>(a), &rows,
                                static_cast<const int32_t*>(b), ldb, n, 0, nullptr, 0, c, ldc,
                                false, nullptr});
#else
  (void)m, (void)n, (void)a, (void)rows, (void)b, (void)ldb, (void)c, (void)ldc;
  TVM_FFI_THROW(InternalError) << "the int8 GEMM needs a build for a CPU with VNNI";
#endif
}

}  // namespace

void DirectGemmU8S8(int64_t m, int64_t n, const uint8_t* a, const DirectRows& rows, const int8_t* b,
                    int64_t ldb, int32_t* c, int64_t ldc) {
  RunInt8<false>(m, n, a, rows, b, ldb, c, ldc);
}

void DirectGemmS8U8(int64_t m, int64_t n, const int8_t* a, const DirectRows& rows, const uint8_t* b,
                    int64_t ldb, int32_t* c, int64_t ldc) {
  RunInt8<true>(m, n, a, rows, b, ldb, c, ldc);
}

}  // namespace kernels
}  // namespace example_npu
