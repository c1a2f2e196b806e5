/*!
 * \file kernels/direct_gemm.h
 * \brief Register-blocked GEMM on cache-resident operands read in place (the NPU's L1 tiles).
 *
 * The packed GEMM (gemm.h) copies A and B into micro-kernel order, which pays off on operands
 * larger than the caches but costs more than the multiply itself on L1-sized tiles. Here A is
 * read where it lies: row r of A is the concatenation, over `segments`, of `depth` consecutive
 * elements at a + row_offsets[r] + segment_offsets[s]. A plain matrix row is one segment; a row
 * of the implicit im2col matrix of an NHWC convolution is one segment per kernel tap (the tap's
 * input channels), so a convolution runs with no im2col copy at all. B is row-major with
 * segments * depth rows, read a row at a time.
 *
 * Two element types share the loop nest: float32 (fused multiply-add), and unsigned x signed
 * 8-bit integers with exact int32 sums (VNNI `vpdpbusd`, AVX-512 or AVX-VNNI, four products per
 * lane; on AVX2 alone the same sums from 16-bit `vpmaddwd`; compiled in only when the build
 * targets a CPU that has one of them, see HasInt8DotProduct()).
 */
#ifndef EXAMPLE_NPU_KERNELS_DIRECT_GEMM_H_
#define EXAMPLE_NPU_KERNELS_DIRECT_GEMM_H_

#include <cstdint>

namespace example_npu {
namespace kernels {

/*! \brief Where the rows of A lie (offsets in elements of A's type). */
struct DirectRows {
  /*! \brief Per row of C, or nullptr: row r starts at r * row_stride. */
  const int64_t* row_offsets = nullptr;
  int64_t row_stride = 0;
  /*! \brief Per segment, or nullptr: a single segment at offset 0. */
  const int64_t* segment_offsets = nullptr;
  int64_t segments = 1;
  /*! \brief Consecutive elements per segment (the reduction depth is segments * depth). */
  int64_t depth = 0;
};

/*! \brief A float32 matrix added to the product as it is stored (a layer's bias or a residual):
 * C[i, j] = (C[i, j] + AB[i, j] or AB[i, j]) + data[i * row_stride + j], the two operands of that
 * last add in that order, or (first) the other way round, as the separate add would take them. */
struct DirectAddend {
  const float* data = nullptr;  // nullptr: none
  int64_t row_stride = 0;       // 0: one row (a bias) for every row of C
  bool first = false;
};

/*!
 * \brief C[m, n] (+)= A * B in float32 (+ addend): B is row-major [segments * depth, n] with row
 * stride ldb, C row-major with row stride ldc. Each output is a sum in order over the reduction,
 * so the result matches a naive dot product to float rounding. Splits rows over the thread pool
 * when called outside it and the work is large enough.
 */
void DirectGemm(int64_t m, int64_t n, const float* a, const DirectRows& rows, const float* b,
                int64_t ldb, float* c, int64_t ldc, bool accumulate,
                const DirectAddend& addend = DirectAddend{});

/*! \brief Panel widths of DirectGemmPanels are multiples of this: whole float vectors on every
 * build (16 lanes on AVX-512, 8 on AVX2). */
constexpr int64_t kPanelColumns = 16;

/*!
 * \brief DirectGemm with B in panels `panel_width` columns wide (a multiple of kPanelColumns),
 * panel q's rows at b + q * panel_stride, ldb apart: the same
 * bits as DirectGemm on those columns laid side by side (the matrix engine's weight tiles,
 * arranged one after another, read as one B).
 */
void DirectGemmPanels(int64_t m, int64_t n, const float* a, const DirectRows& rows, const float* b,
                      int64_t ldb, int64_t panel_width, int64_t panel_stride, float* c, int64_t ldc,
                      bool accumulate, const DirectAddend& addend = DirectAddend{});

/*! \brief Whether DirectGemmU8S8 / DirectGemmS8U8 are available (the library was built for a CPU
 * with VNNI or AVX2). */
bool HasInt8DotProduct();

/*! \brief Output columns per packed-B sliver of DirectGemmU8S8: n is rounded up to this. */
constexpr int64_t kU8S8Columns = 16;

/*!
 * \brief C[m, n] = A * B with exact int32 sums of uint8 x int8 products. A's elements are
 * groups of four consecutive uint8 (offsets and depth count groups, i.e. 4-byte units). B is
 * packed: for reduction group q and column j, b[(q * ldb + j) * 4 + t] is B[4q + t, j]; n and ldb
 * are multiples of kU8S8Columns. The caller keeps segments * depth * 4 * 255 * 128 below 2^31.
 * Only when HasInt8DotProduct().
 */
void DirectGemmU8S8(int64_t m, int64_t n, const uint8_t* a, const DirectRows& rows, const int8_t* b,
                    int64_t ldb, int32_t* c, int64_t ldc);

/*! \brief The same with signed A and unsigned B: int8 activations read in place against
 * weights stored as w + 128. A is read in 4-byte groups and needs no alignment. */
void DirectGemmS8U8(int64_t m, int64_t n, const int8_t* a, const DirectRows& rows, const uint8_t* b,
                    int64_t ldb, int32_t* c, int64_t ldc);

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_DIRECT_GEMM_H_
