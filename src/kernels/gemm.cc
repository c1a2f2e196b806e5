/*!
 * \file kernels/gemm.cc
 * \brief The packed GEMM: Goto-style cache blocking around a 6 x 16 register micro-kernel.
 *
 * Loop nest: column panels of kNC, depth blocks of kKC (B panel, up to 512 KiB, packed once and
 * kept in L2), then output tiles of kMC rows (A block, 96 KiB, packed by the thread that claims the
 * tile) split into micro-tiles. Tiles are claimed dynamically, so a thread that is descheduled on
 * a busy machine delays only the tile it holds. Each output element is a sum over k in order,
 * one depth block after another, so results match a naive dot product to float rounding.
 */
#include "kernels/gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace example_npu {
namespace kernels {
namespace {

using simd::V8;

constexpr int64_t kKC = 256;
constexpr int64_t kMC = 96;   // multiple of kGemmMR
constexpr int64_t kNC = 512;  // multiple of kGemmNR
// Below this many multiply-adds per thread a hand-off costs more than it saves.
constexpr int64_t kMinMacsPerThread = int64_t{1} << 18;

inline int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

/*! \brief c[0:6, 0:16] (+)= a_sliver * b_sliver over kb depth steps, accumulators in registers. */
EXAMPLE_NPU_INLINE void MicroKernel(int64_t kb, const float* __restrict__ a,
                                    const float* __restrict__ b, float* c, int64_t ldc,
                                    bool accumulate) {
  V8 c00 = {}, c01 = {}, c10 = {}, c11 = {}, c20 = {}, c21 = {};
  V8 c30 = {}, c31 = {}, c40 = {}, c41 = {}, c50 = {}, c51 = {};
  for (int64_t p = 0; p < kb; ++p) {
    const V8 b0 = simd::Load(b);
    const V8 b1 = simd::Load(b + 8);
    V8 av = simd::Splat(a[0]);
    c00 += av * b0;
    c01 += av * b1;
    av = simd::Splat(a[1]);
    c10 += av * b0;
    c11 += av * b1;
    av = simd::Splat(a[2]);
    c20 += av * b0;
    c21 += av * b1;
    av = simd::Splat(a[3]);
    c30 += av * b0;
    c31 += av * b1;
    av = simd::Splat(a[4]);
    c40 += av * b0;
    c41 += av * b1;
    av = simd::Splat(a[5]);
    c50 += av * b0;
    c51 += av * b1;
    a += kGemmMR;
    b += kGemmNR;
  }
  const V8 acc[kGemmMR][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                              {c30, c31}, {c40, c41}, {c50, c51}};
  for (int64_t r = 0; r < kGemmMR; ++r) {
    float* row = c + r * ldc;
    if (accumulate) {
      simd::Store(row, simd::Load(row) + acc[r][0]);
      simd::Store(row + 8, simd::Load(row + 8) + acc[r][1]);
    } else {
      simd::Store(row, acc[r][0]);
      simd::Store(row + 8, acc[r][1]);
    }
  }
}

/*! \brief All micro-tiles of one packed (mc x kb) A block times one packed (kb x nc) B panel. */
void MacroKernel(int64_t kb, int64_t mc, int64_t nc, const float* apack, const float* bpack,
                 float* c, int64_t ldc, bool accumulate) {
  for (int64_t j = 0; j < nc; j += kGemmNR) {
    const int64_t cols = std::min(kGemmNR, nc - j);
    const float* b = bpack + j * kb;
    for (int64_t i = 0; i < mc; i += kGemmMR) {
      const int64_t rows = std::min(kGemmMR, mc - i);
      const float* a = apack + i * kb;
      float* tile = c + i * ldc + j;
      if (rows == kGemmMR && cols == kGemmNR) {
        MicroKernel(kb, a, b, tile, ldc, accumulate);
        continue;
      }
      // Edge tile: compute the full tile into a buffer, write back only the valid part.
      float buf[kGemmMR * kGemmNR];
      MicroKernel(kb, a, b, buf, kGemmNR, false);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t q = 0; q < cols; ++q) {
          tile[r * ldc + q] = (accumulate ? tile[r * ldc + q] : 0.0f) + buf[r * kGemmNR + q];
        }
      }
    }
  }
}

/*! \brief Grow-only per-thread packing buffers (0: the caller's B panel, 1: a thread's A block), so
 * repeated calls do not page-fault new memory. */
float* ThreadBuffer(int which, size_t floats) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& buf = buffers[which];
  if (buf.size() < floats) buf.resize(floats);
  return buf.data();
}

}  // namespace

void Gemm(const GemmProblem& g) {
  if (g.m <= 0 || g.n <= 0) return;
  if (g.k == 0) {
    for (int64_t i = 0; i < g.m; ++i) std::fill(g.c + i * g.ldc, g.c + i * g.ldc + g.n, 0.0f);
    return;
  }
  const int64_t row_blocks = (g.m + kMC - 1) / kMC;
  for (int64_t jc = 0; jc < g.n; jc += kNC) {
    const int64_t nc = std::min(kNC, g.n - jc);
    const int64_t slivers = (nc + kGemmNR - 1) / kGemmNR;
    // Tiles of (kMC rows x tile_cols): few row blocks (a short, wide C) are cut into column
    // sub-panels so that every thread still gets several tiles to claim.
    const int64_t want_tiles = int64_t{4} * MaxThreads();
    const int64_t col_blocks =
        std::clamp<int64_t>((want_tiles + row_blocks - 1) / row_blocks, 1, slivers);
    const int64_t tile_cols = (slivers + col_blocks - 1) / col_blocks * kGemmNR;
    const int64_t tiles = row_blocks * ((nc + tile_cols - 1) / tile_cols);
    for (int64_t pc = 0; pc < g.k; pc += kKC) {
      const int64_t kb = std::min(kKC, g.k - pc);
      // The B panel is packed once, by all threads, and shared read-only by every tile.
      float* bpack = ThreadBuffer(0, kb * slivers * kGemmNR);
      const int64_t sliver_grain = std::max<int64_t>(1, 16384 / (kb * kGemmNR));
      ParallelFor(slivers, sliver_grain, [&](int64_t begin, int64_t end) {
        g.pack_b(pc, kb, jc + begin * kGemmNR, std::min(nc, end * kGemmNR) - begin * kGemmNR,
                 bpack + begin * kb * kGemmNR);
      });
      const int64_t tile_macs = std::min(kMC, g.m) * tile_cols * kb;
      const int64_t tile_grain = std::max<int64_t>(1, kMinMacsPerThread / tile_macs);
      ParallelFor(tiles, tile_grain, [&](int64_t begin, int64_t end) {
        float* apack = ThreadBuffer(1, kb * kMC);
        for (int64_t t = begin; t < end; ++t) {
          const int64_t ic = (t % row_blocks) * kMC;
          const int64_t jt = (t / row_blocks) * tile_cols;
          const int64_t mc = std::min(kMC, g.m - ic);
          const int64_t cols = std::min(tile_cols, nc - jt);
          g.pack_a(ic, mc, pc, kb, apack);
          MacroKernel(kb, mc, cols, apack, bpack + jt * kb, g.c + ic * g.ldc + jc + jt, g.ldc,
                      pc > 0);
        }
      });
    }
  }
}

GemmPackA PackRowMajorA(const float* a, int64_t lda) {
  return [a, lda](int64_t i0, int64_t rows, int64_t k0, int64_t kb, float* dst) {
    for (int64_t s = 0; s < rows; s += kGemmMR) {
      const int64_t r_end = std::min(kGemmMR, rows - s);
      float* d = dst + s * kb;
      for (int64_t r = 0; r < kGemmMR; ++r) {
        if (r >= r_end) {
          for (int64_t p = 0; p < kb; ++p) d[p * kGemmMR + r] = 0.0f;
          continue;
        }
        const float* src = a + (i0 + s + r) * lda + k0;
        for (int64_t p = 0; p < kb; ++p) d[p * kGemmMR + r] = src[p];
      }
    }
  };
}

GemmPackB PackRowMajorB(const float* b, int64_t ldb) {
  return [b, ldb](int64_t k0, int64_t kb, int64_t j0, int64_t cols, float* dst) {
    for (int64_t s = 0; s < cols; s += kGemmNR) {
      const int64_t width = std::min(kGemmNR, cols - s);
      float* d = dst + s * kb;
      const float* src = b + k0 * ldb + j0 + s;
      for (int64_t p = 0; p < kb; ++p) {
        std::memcpy(d + p * kGemmNR, src + p * ldb, width * sizeof(float));
        std::fill(d + p * kGemmNR + width, d + (p + 1) * kGemmNR, 0.0f);
      }
    }
  };
}

}  // namespace kernels
}  // namespace example_npu
