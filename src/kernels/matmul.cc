/*!
 * \file kernels/matmul.cc
 * \brief Batched matrix multiplication (numpy.matmul semantics) for the matrix engine.
 */
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace example_npu {
namespace kernels {
namespace {

// Panel sizes keep a kBlockK x kBlockN slab of rhs (128 KiB) in L2 while it is reused by every
// lhs row, and the four output rows being updated (4 KiB) in L1.
constexpr int64_t kBlockK = 128;
constexpr int64_t kBlockN = 256;
constexpr int64_t kRowsPerStep = 4;

/*! \brief c[0:n] += a * b[0:n]; restrict lets the compiler vectorise without alias checks. */
inline void AxpyRow(float a, const float* __restrict__ b, float* __restrict__ c, int64_t n) {
  for (int64_t j = 0; j < n; ++j) c[j] += a * b[j];
}

/*!
 * \brief Updates four output rows from one streamed rhs row per k, so each rhs load feeds four
 * multiply-adds instead of one.
 */
void Update4Rows(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                 int64_t kb, int64_t nb) {
  float* __restrict__ c0 = c;
  float* __restrict__ c1 = c + ldc;
  float* __restrict__ c2 = c + 2 * ldc;
  float* __restrict__ c3 = c + 3 * ldc;
  for (int64_t p = 0; p < kb; ++p) {
    const float a0 = a[p];
    const float a1 = a[lda + p];
    const float a2 = a[2 * lda + p];
    const float a3 = a[3 * lda + p];
    const float* __restrict__ brow = b + p * ldb;
    for (int64_t j = 0; j < nb; ++j) {
      const float bv = brow[j];
      c0[j] += a0 * bv;
      c1[j] += a1 * bv;
      c2[j] += a2 * bv;
      c3[j] += a3 * bv;
    }
  }
}

/*! \brief Dot product with independent partial sums so the loop is not one long dependency. */
float Dot(const float* a, const float* b, int64_t k) {
  constexpr int64_t kLanes = 8;
  float acc[kLanes] = {0.0f};
  int64_t p = 0;
  for (; p + kLanes <= k; p += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += a[p + l] * b[p + l];
  }
  float sum = 0.0f;
  for (int64_t l = 0; l < kLanes; ++l) sum += acc[l];
  for (; p < k; ++p) sum += a[p] * b[p];
  return sum;
}

/*! \brief c[m, n] = a[m, k] * b[k, n], all contiguous row-major. */
void Gemm(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  if (n == 1) {
    // A column rhs makes the i-k-j update loop one element long; dot products stream both.
    for (int64_t i = 0; i < m; ++i) c[i] = Dot(a + i * k, b, k);
    return;
  }
  std::fill(c, c + m * n, 0.0f);
  for (int64_t j0 = 0; j0 < n; j0 += kBlockN) {
    const int64_t nb = std::min(kBlockN, n - j0);
    for (int64_t k0 = 0; k0 < k; k0 += kBlockK) {
      const int64_t kb = std::min(kBlockK, k - k0);
      const float* b_panel = b + k0 * n + j0;
      int64_t i = 0;
      for (; i + kRowsPerStep <= m; i += kRowsPerStep) {
        Update4Rows(a + i * k + k0, k, b_panel, n, c + i * n + j0, n, kb, nb);
      }
      for (; i < m; ++i) {
        const float* a_row = a + i * k + k0;
        float* c_row = c + i * n + j0;
        for (int64_t p = 0; p < kb; ++p) AxpyRow(a_row[p], b_panel + p * n, c_row, nb);
      }
    }
  }
}

/*! \brief Operand viewed as a batch of [rows, cols] matrices. */
struct MatrixView {
  Shape batch;
  int64_t rows;
  int64_t cols;
};

MatrixView LhsView(const Shape& shape) {
  TVM_FFI_ICHECK_GE(shape.size(), 1) << "Matmul: lhs must have rank >= 1";
  if (shape.size() == 1) return {Shape{}, 1, shape[0]};
  return {Shape(shape.begin(), shape.end() - 2), shape[shape.size() - 2], shape.back()};
}

MatrixView RhsView(const Shape& shape) {
  TVM_FFI_ICHECK_GE(shape.size(), 1) << "Matmul: rhs must have rank >= 1";
  if (shape.size() == 1) return {Shape{}, shape[0], 1};
  return {Shape(shape.begin(), shape.end() - 2), shape[shape.size() - 2], shape.back()};
}

/*! \brief numpy broadcast of two batch shapes (right-aligned, size 1 stretches). */
Shape BroadcastBatch(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    TVM_FFI_ICHECK(da == db || da == 1 || db == 1)
        << "Matmul: batch dims " << da << " and " << db << " do not broadcast";
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/*!
 * \brief Matrix-unit strides of an operand's batch dims right-aligned to the output batch rank;
 * broadcast (size-1 or missing) dims get stride 0.
 */
std::vector<int64_t> BatchStrides(const Shape& batch, const Shape& out_batch) {
  const size_t rank = out_batch.size();
  const size_t offset = rank - batch.size();
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = batch.size(); i-- > 0;) {
    strides[offset + i] = batch[i] == 1 ? 0 : stride;
    stride *= batch[i];
  }
  return strides;
}

}  // namespace

void Matmul(const float* lhs, const Shape& lhs_shape, const float* rhs, const Shape& rhs_shape,
            float* out, const Shape& out_shape) {
  const MatrixView l = LhsView(lhs_shape);
  const MatrixView r = RhsView(rhs_shape);
  TVM_FFI_ICHECK_EQ(l.cols, r.rows) << "Matmul: reduction dims differ";
  const int64_t m = l.rows;
  const int64_t k = l.cols;
  const int64_t n = r.cols;

  const size_t batch_rank = std::max(l.batch.size(), r.batch.size());
  const Shape out_batch = BroadcastBatch(l.batch, r.batch);
  Shape expected = out_batch;
  if (lhs_shape.size() > 1) expected.push_back(m);
  if (rhs_shape.size() > 1) expected.push_back(n);
  TVM_FFI_ICHECK(out_shape == expected) << "Matmul: output shape does not match operands";
  const std::vector<int64_t> lhs_strides = BatchStrides(l.batch, out_batch);
  const std::vector<int64_t> rhs_strides = BatchStrides(r.batch, out_batch);

  const int64_t num_batches = NumElements(out_batch);
  if (num_batches == 0 || m == 0 || n == 0) return;
  if (NumElements(r.batch) == 1 && NumElements(l.batch) == num_batches) {
    // A shared rhs lets the lhs batches stack into one tall matrix: one GEMM, better reuse.
    Gemm(lhs, rhs, out, num_batches * m, k, n);
    return;
  }
  for (int64_t b = 0; b < num_batches; ++b) {
    int64_t lhs_offset = 0;
    int64_t rhs_offset = 0;
    for (int64_t d = static_cast<int64_t>(batch_rank) - 1, rest = b; d >= 0; --d) {
      const int64_t idx = rest % out_batch[d];
      rest /= out_batch[d];
      lhs_offset += idx * lhs_strides[d];
      rhs_offset += idx * rhs_strides[d];
    }
    Gemm(lhs + lhs_offset * m * k, rhs + rhs_offset * k * n, out + b * m * n, m, k, n);
  }
}

}  // namespace kernels
}  // namespace example_npu
