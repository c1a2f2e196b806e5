/*!
 * \file kernels/gemm.h
 * \brief Packed, register-blocked single-precision GEMM shared by matmul and convolution.
 *
 * C[m, n] = A[m, k] * B[k, n]. The operands are never read directly: callers hand over pack
 * functions that copy a block of A or B into the layout the micro-kernel streams (slivers of
 * kGemmMR rows of A, kGemmNR columns of B, zero-padded). That lets convolution feed its input as
 * an implicit im2col matrix with no im2col buffer, and matmul feed a transposed weight as is.
 */
#ifndef EXAMPLE_NPU_KERNELS_GEMM_H_
#define EXAMPLE_NPU_KERNELS_GEMM_H_

#include <cstdint>
#include <functional>

namespace example_npu {
namespace kernels {

/*! \brief Micro-tile: 6 x 16 accumulators fill 12 of the 16 AVX2 vector registers. */
constexpr int64_t kGemmMR = 6;
constexpr int64_t kGemmNR = 16;

/*!
 * \brief Packs rows [i0, i0 + rows) x depth [k0, k0 + kb) of A: for each kGemmMR-row sliver s,
 * dst[s * kb * kGemmMR + p * kGemmMR + r] = A[i0 + s * kGemmMR + r][k0 + p], 0 past `rows`.
 */
using GemmPackA = std::function<void(int64_t i0, int64_t rows, int64_t k0, int64_t kb, float* dst)>;
/*!
 * \brief Packs depth [k0, k0 + kb) x columns [j0, j0 + cols) of B: for each kGemmNR-column sliver
 * s, dst[s * kb * kGemmNR + p * kGemmNR + c] = B[k0 + p][j0 + s * kGemmNR + c], 0 past `cols`.
 */
using GemmPackB = std::function<void(int64_t k0, int64_t kb, int64_t j0, int64_t cols, float* dst)>;

struct GemmProblem {
  int64_t m;
  int64_t n;
  int64_t k;
  GemmPackA pack_a;
  GemmPackB pack_b;
  float* c;     // row-major output, overwritten
  int64_t ldc;  // row stride of c
};

/*!
 * \brief Computes C. Per (column panel, depth block) the B panel is packed once and shared; the
 * output tiles are then claimed by the pool's threads (inline when small, or when nested in
 * another parallel loop). Pack functions may be called from any pool thread concurrently.
 */
void Gemm(const GemmProblem& g);

/*! \brief Pack functions for plain row-major operands. */
GemmPackA PackRowMajorA(const float* a, int64_t lda);
GemmPackB PackRowMajorB(const float* b, int64_t ldb);

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_GEMM_H_
