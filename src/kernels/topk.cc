/*!
 * \file kernels/topk.cc
 * \brief topk by partial selection per row (the kernel) and by a stable sort (its reference).
 */
#include "kernels/topk.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "kernels/parallel.h"

namespace example_npu {
namespace kernels {
namespace {

/*! \brief A row of the topk: `n` elements `stride` apart (the elements after the axis). */
struct RowSpace {
  int64_t outer = 1;
  int64_t n = 1;
  int64_t inner = 1;
};

RowSpace RowsOf(const Shape& shape, const TopkParams& params) {
  TVM_FFI_ICHECK(params.axis >= 0 && params.axis < static_cast<int64_t>(shape.size()))
      << "Topk: axis " << params.axis << " out of range";
  RowSpace rows;
  for (int64_t d = 0; d < params.axis; ++d) rows.outer *= shape[d];
  for (size_t d = params.axis + 1; d < shape.size(); ++d) rows.inner *= shape[d];
  rows.n = shape[params.axis];
  TVM_FFI_ICHECK(params.k >= 1 && params.k <= rows.n)
      << "Topk: k " << params.k << " outside [1, " << rows.n << "]";
  return rows;
}

/*! \brief Whether value a comes strictly before value b in the selection's order. */
inline bool Before(float a, float b, bool largest) { return largest ? a > b : a < b; }

}  // namespace

void Topk(const float* input, const Shape& shape, const TopkParams& params, float* out) {
  const RowSpace rows = RowsOf(shape, params);
  const int64_t n = rows.n, k = params.k, inner = rows.inner;
  const bool largest = params.largest;
  ParallelFor(rows.outer * inner, std::max<int64_t>(1, 1024 / n), [&](int64_t begin, int64_t end) {
    std::vector<float> value(k);
    std::vector<int64_t> index(k);
    for (int64_t row = begin; row < end; ++row) {
      const float* x = input + (row / inner) * n * inner + row % inner;
      int64_t filled = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[i * inner];
        // Full list: only an element beating the last slot enters (the common, cheap case).
        if (filled == k && !Before(v, value[k - 1], largest)) continue;
        int64_t slot = std::min(filled, k - 1);
        while (slot > 0 && Before(v, value[slot - 1], largest)) {
          value[slot] = value[slot - 1];
          index[slot] = index[slot - 1];
          --slot;
        }
        value[slot] = v;
        index[slot] = i;
        filled = std::min(filled + 1, k);
      }
      float* y = out + (row / inner) * k * inner + row % inner;
      for (int64_t j = 0; j < k; ++j) {
        y[j * inner] = params.indices ? static_cast<float>(index[j]) : value[j];
      }
    }
  });
}

void TopkReference(const float* input, const Shape& shape, const TopkParams& params, float* out) {
  const RowSpace rows = RowsOf(shape, params);
  const int64_t n = rows.n, inner = rows.inner;
  std::vector<int64_t> order(n);
  for (int64_t row = 0; row < rows.outer * inner; ++row) {
    const float* x = input + (row / inner) * n * inner + row % inner;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return Before(x[a * inner], x[b * inner], params.largest);
    });
    float* y = out + (row / inner) * params.k * inner + row % inner;
    for (int64_t j = 0; j < params.k; ++j) {
      y[j * inner] = params.indices ? static_cast<float>(order[j]) : x[order[j] * inner];
    }
  }
}

}  // namespace kernels
}  // namespace example_npu
