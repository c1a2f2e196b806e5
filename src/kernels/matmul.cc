/*!
 * \file kernels/matmul.cc
 * \brief Batched matrix multiplication (numpy.matmul semantics) for the matrix engine.
 */
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/direct_gemm.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace example_npu {
namespace kernels {
namespace {

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

/*! \brief c[0:n] = a[0:k] * b[k, n]: a row vector streams b once, row by row. */
void VecMat(const float* a, const float* b, int64_t ldb, float* c, int64_t k, int64_t n) {
  std::fill(c, c + n, 0.0f);
  for (int64_t p = 0; p < k; ++p) {
    const float av = a[p];
    const float* __restrict__ row = b + p * ldb;
    float* __restrict__ out = c;
    for (int64_t j = 0; j < n; ++j) out[j] += av * row[j];
  }
}

/*! \brief c[m, n] = a[m, k] * b[k, n], all contiguous row-major. */
void MatrixProduct(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  if (n == 1) {
    // A column rhs makes each output one dot product.
    for (int64_t i = 0; i < m; ++i) c[i] = Dot(a + i * k, b, k);
    return;
  }
  if (m == 1) {
    VecMat(a, b, n, c, k, n);
    return;
  }
  if (MatmulRowsApply(m, k, n)) {
    MatmulRows(a, k, b, n, m, k, n, c, n, false);
    return;
  }
  GemmProblem g{m, n, k, PackRowMajorA(a, k), PackRowMajorB(b, n), c, n};
  Gemm(g);
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

bool MatmulRowsApply(int64_t m, int64_t k, int64_t n) {
  // Operands that fit the core's cache (every NPU tile does) are read in place; larger ones
  // are worth packing into micro-kernel order. A row or a column goes its own way.
  constexpr int64_t kInPlaceFloats = int64_t{1} << 19;  // 2 MiB
  return m > 1 && n > 1 && (m + n) * k <= kInPlaceFloats;
}

void MatmulRows(const float* lhs, int64_t lda, const float* rhs, int64_t ldb, int64_t m, int64_t k,
                int64_t n, float* out, int64_t ldo, bool accumulate) {
  DirectRows rows;
  rows.row_stride = lda;
  rows.depth = k;
  DirectGemm(m, n, lhs, rows, rhs, ldb, out, ldo, accumulate);
}

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
    MatrixProduct(lhs, rhs, out, num_batches * m, k, n);
    return;
  }
  // Batches are independent: spread them over threads; a GEMM inside a batch chunk then runs
  // on its own thread (ParallelFor nests inline). A single batch splits inside its GEMM instead.
  const int64_t batch_grain =
      std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(m * n * k, 1));
  ParallelFor(num_batches, batch_grain, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      int64_t lhs_offset = 0;
      int64_t rhs_offset = 0;
      for (int64_t d = static_cast<int64_t>(batch_rank) - 1, rest = b; d >= 0; --d) {
        const int64_t idx = rest % out_batch[d];
        rest /= out_batch[d];
        lhs_offset += idx * lhs_strides[d];
        rhs_offset += idx * rhs_strides[d];
      }
      MatrixProduct(lhs + lhs_offset * m * k, rhs + rhs_offset * k * n, out + b * m * n, m, k, n);
    }
  });
}

}  // namespace kernels
}  // namespace example_npu
