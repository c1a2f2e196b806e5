/*!
 * \file kernels/topk.cc
 * \brief topk by partial selection per row (the kernel) and by a stable sort (its reference).
 */
#include "kernels/topk.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <cmath>
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

/*! \brief The rows of `shape` along `axis`. */
RowSpace RowsAlong(const Shape& shape, int64_t axis) {
  TVM_FFI_ICHECK(axis >= 0 && axis < static_cast<int64_t>(shape.size()))
      << "Topk: axis " << axis << " out of range";
  RowSpace rows;
  for (int64_t d = 0; d < axis; ++d) rows.outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) rows.inner *= shape[d];
  rows.n = shape[axis];
  return rows;
}

/*! \brief The rows of a whole input, whose axis holds at least k elements. */
RowSpace RowsOf(const Shape& shape, const TopkParams& params) {
  const RowSpace rows = RowsAlong(shape, params.axis);
  TVM_FFI_ICHECK(params.k >= 1 && params.k <= rows.n)
      << "Topk: k " << params.k << " outside [1, " << rows.n << "]";
  return rows;
}

/*! \brief Whether value a comes strictly before value b in the selection's order. */
inline bool Before(float a, float b, bool largest) { return largest ? a > b : a < b; }

/*!
 * \brief Feeds x[0], x[stride], ... (m elements, numbered from `offset`) into the ordered list
 * value / index of `filled` entries (at most k); returns the new count.
 */
int64_t Insert(const float* x, int64_t m, int64_t stride, int64_t offset, int64_t k, bool largest,
               float* value, int64_t* index, int64_t filled) {
  for (int64_t i = 0; i < m; ++i) {
    const float v = x[i * stride];
    // Full list: only an element beating the last slot enters (the common, cheap case).
    if (filled == k && !Before(v, value[k - 1], largest)) continue;
    int64_t slot = std::min(filled, k - 1);
    while (slot > 0 && Before(v, value[slot - 1], largest)) {
      value[slot] = value[slot - 1];
      index[slot] = index[slot - 1];
      --slot;
    }
    value[slot] = v;
    index[slot] = offset + i;
    filled = std::min(filled + 1, k);
  }
  return filled;
}

/*! \brief fn(row base offset in a tensor of axis extent `extent`, list buffers) for every row,
 * in parallel. */
template <typename Fn>
void ForEachRow(const RowSpace& rows, int64_t k, Fn fn) {
  const int64_t inner = rows.inner;
  ParallelFor(rows.outer * inner, std::max<int64_t>(1, 1024 / rows.n),
              [&](int64_t begin, int64_t end) {
                std::vector<float> value(k);
                std::vector<int64_t> index(k);
                for (int64_t row = begin; row < end; ++row) {
                  fn(row / inner, row % inner, value.data(), index.data());
                }
              });
}

}  // namespace

void Topk(const float* input, const Shape& shape, const TopkParams& params, float* out) {
  const RowSpace rows = RowsOf(shape, params);
  const int64_t n = rows.n, k = params.k, inner = rows.inner;
  ForEachRow(rows, k, [&](int64_t o, int64_t i, float* value, int64_t* index) {
    Insert(input + o * n * inner + i, n, inner, 0, k, params.largest, value, index, 0);
    float* y = out + o * k * inner + i;
    for (int64_t j = 0; j < k; ++j) {
      y[j * inner] = params.indices ? static_cast<float>(index[j]) : value[j];
    }
  });
}

void TopkSelect(const float* chunk, const Shape& chunk_shape, const TopkParams& params,
                int64_t index_offset, bool continuing, float* running) {
  const RowSpace rows = RowsAlong(chunk_shape, params.axis);
  const int64_t m = rows.n, k = params.k, inner = rows.inner;
  TVM_FFI_ICHECK(continuing || m >= k) << "TopkSelect: a first chunk of " << m << " < k elements";
  ForEachRow(rows, k, [&](int64_t o, int64_t i, float* value, int64_t* index) {
    float* list = running + o * 2 * k * inner + i;
    if (continuing) {
      for (int64_t j = 0; j < k; ++j) {
        value[j] = list[j * inner];
        index[j] = static_cast<int64_t>(list[(k + j) * inner]);
      }
    }
    Insert(chunk + o * m * inner + i, m, inner, index_offset, k, params.largest, value, index,
           continuing ? k : 0);
    for (int64_t j = 0; j < k; ++j) {
      list[j * inner] = value[j];
      list[(k + j) * inner] = static_cast<float>(index[j]);
    }
  });
}

void TopkEmit(const float* running, const Shape& running_shape, const TopkParams& params,
              float* out) {
  const RowSpace rows = RowsAlong(running_shape, params.axis);
  const int64_t k = params.k, from = params.indices ? k : 0;
  for (int64_t o = 0; o < rows.outer; ++o) {
    std::copy_n(running + (o * 2 * k + from) * rows.inner, k * rows.inner,
                out + o * k * rows.inner);
  }
}

int64_t TopkSelectionWork(int64_t first, int64_t count, int64_t k) {
  // Expected entries among the first i elements of a random row.
  auto entries = [k](int64_t i) {
    return i <= k ? static_cast<double>(i)
                  : k * (1.0 + std::log(static_cast<double>(i) / static_cast<double>(k)));
  };
  const double shifts = k * (entries(first + count) - entries(first));
  return count + static_cast<int64_t>(std::ceil(shifts));
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
