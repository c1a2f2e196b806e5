/*!
 * \file kernels/reduce.cc
 * \brief Reduction kernels: sum / mean / max / min / variance / argmax / argmin over any axes
 * (global average pooling, the ONNX importer's normalisations, segmentation heads), log_softmax
 * and layer norm.
 */
#include "kernels/reduce.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/parallel.h"

namespace example_npu {
namespace kernels {

namespace {

/*! \brief The fold of one output: TVM's identity and combiner per kind (indices as floats). */
struct Accumulator {
  float value;
  float index;
};

Accumulator Identity(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::kMax:
    case ReduceKind::kArgmax:
      return {std::numeric_limits<float>::lowest(), -1.0f};
    case ReduceKind::kMin:
    case ReduceKind::kArgmin:
      return {std::numeric_limits<float>::max(), -1.0f};
    default:
      return {0.0f, -1.0f};
  }
}

inline void Combine(ReduceKind kind, Accumulator* acc, float x, int64_t index) {
  switch (kind) {
    case ReduceKind::kMax:
      acc->value = acc->value > x ? acc->value : x;
      return;
    case ReduceKind::kMin:
      acc->value = acc->value < x ? acc->value : x;
      return;
    case ReduceKind::kArgmax:
      // topi's argmax combiner: the accumulator keeps its index when it is bigger or equal.
      if (!(acc->value > x || acc->value == x)) acc->index = static_cast<float>(index);
      acc->value = acc->value > x ? acc->value : x;
      return;
    case ReduceKind::kArgmin:
      if (!(acc->value < x || acc->value == x)) acc->index = static_cast<float>(index);
      acc->value = acc->value < x ? acc->value : x;
      return;
    default:
      acc->value += x;
  }
}

/*!
 * \brief Calls fn(i, out_index, reduced_index) for every input element in row-major order: the
 * output it folds into and its row-major index among that output's elements.
 */
template <typename Fn>
void WalkReduction(const Shape& shape, const std::vector<int64_t>& axes, Fn fn) {
  const size_t rank = shape.size();
  Shape kept = shape, reduced(rank, 1);
  for (int64_t axis : axes) {
    TVM_FFI_ICHECK(axis >= 0 && axis < static_cast<int64_t>(rank)) << "Reduce: axis " << axis;
    kept[axis] = 1;
    reduced[axis] = shape[axis];
  }
  const std::vector<int64_t> out_strides = RowMajorStrides(kept);
  const std::vector<int64_t> red_strides = RowMajorStrides(reduced);
  std::vector<int64_t> index(rank, 0);
  int64_t out_index = 0, red_index = 0;
  const int64_t total = NumElements(shape);
  for (int64_t i = 0; i < total; ++i) {
    fn(i, out_index, red_index);
    for (size_t d = rank; d-- > 0;) {
      const int64_t out_step = kept[d] == 1 ? 0 : out_strides[d];
      const int64_t red_step = reduced[d] == 1 ? 0 : red_strides[d];
      out_index += out_step;
      red_index += red_step;
      if (++index[d] < shape[d]) break;
      out_index -= out_step * shape[d];
      red_index -= red_step * shape[d];
      index[d] = 0;
    }
  }
}

}  // namespace

void Reduce(ReduceKind kind, const float* input, const Shape& shape,
            const std::vector<int64_t>& axes, float* out) {
  Shape kept = shape;
  int64_t count = 1;
  for (int64_t axis : axes) {
    count *= shape[axis];
    kept[axis] = 1;
  }
  const int64_t out_size = NumElements(kept);
  std::vector<Accumulator> acc(out_size, Identity(kind));
  const ReduceKind fold =
      kind == ReduceKind::kMean || kind == ReduceKind::kVariance ? ReduceKind::kSum : kind;
  WalkReduction(shape, axes,
                [&](int64_t i, int64_t o, int64_t r) { Combine(fold, &acc[o], input[i], r); });
  // Mean and variance divide by the count as a float32, as TVM's sum / shape_prod.
  const float divisor = static_cast<float>(count);
  if (kind == ReduceKind::kVariance) {
    std::vector<float> mean(out_size);
    for (int64_t o = 0; o < out_size; ++o) {
      mean[o] = acc[o].value / divisor;
      acc[o].value = 0.0f;
    }
    WalkReduction(shape, axes, [&](int64_t i, int64_t o, int64_t) {
      const float dev = input[i] - mean[o];
      acc[o].value += dev * dev;
    });
  }
  for (int64_t o = 0; o < out_size; ++o) {
    switch (kind) {
      case ReduceKind::kMean:
      case ReduceKind::kVariance:
        out[o] = acc[o].value / divisor;
        break;
      case ReduceKind::kArgmax:
      case ReduceKind::kArgmin:
        out[o] = acc[o].index;
        break;
      default:
        out[o] = acc[o].value;
    }
  }
}

void Mean(const float* input, const Shape& shape, const std::vector<int64_t>& axes, float* out) {
  Reduce(ReduceKind::kMean, input, shape, axes, out);
}

void LogSoftmax(const float* input, const Shape& shape, int64_t axis, float* out) {
  TVM_FFI_ICHECK(axis >= 0 && axis < static_cast<int64_t>(shape.size()))
      << "LogSoftmax: axis " << axis << " out of range";
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = shape[axis];
  ParallelFor(outer * inner, std::max<int64_t>(1, 1024 / std::max<int64_t>(n, 1)),
              [&](int64_t begin, int64_t end) {
                for (int64_t row = begin; row < end; ++row) {
                  const float* x = input + (row / inner) * n * inner + row % inner;
                  float* y = out + (row / inner) * n * inner + row % inner;
                  float max = std::numeric_limits<float>::lowest();
                  for (int64_t k = 0; k < n; ++k) max = max > x[k * inner] ? max : x[k * inner];
                  float sum = 0.0f;
                  for (int64_t k = 0; k < n; ++k) sum += std::exp(x[k * inner] - max);
                  const float log_sum = std::log(sum);
                  for (int64_t k = 0; k < n; ++k) y[k * inner] = x[k * inner] - max - log_sum;
                }
              });
}

namespace {

/*!
 * \brief Layer norm of kRows rows of `row` elements at once: each row's sums are the same
 * float additions in the same order as one row alone, but kRows independent chains of them
 * keep the adder busy where one chain waits on each addition's latency.
 */
template <int kRows>
void LayerNormRows(const float* input, int64_t row, const float* gamma, const float* beta,
                   float epsilon, bool center, bool scale, float* out) {
  const float count = static_cast<float>(row);
  float mean[kRows], var_sum[kRows];
  for (int r = 0; r < kRows; ++r) mean[r] = var_sum[r] = 0.0f;
  for (int64_t i = 0; i < row; ++i) {
    for (int r = 0; r < kRows; ++r) mean[r] += input[r * row + i];
  }
  for (int r = 0; r < kRows; ++r) mean[r] /= count;
  for (int64_t i = 0; i < row; ++i) {
    for (int r = 0; r < kRows; ++r) {
      const float centered = input[r * row + i] - mean[r];
      var_sum[r] += centered * centered;
    }
  }
  for (int r = 0; r < kRows; ++r) {
    const float* x = input + r * row;
    float* y = out + r * row;
    const float inv_std = 1.0f / std::sqrt(var_sum[r] / count + epsilon);
    for (int64_t i = 0; i < row; ++i) {
      float value = (x[i] - mean[r]) * inv_std;
      if (scale) value *= gamma[i];
      if (center) value += beta[i];
      y[i] = value;
    }
  }
}

}  // namespace

void LayerNorm(const float* input, const Shape& shape, int64_t first_axis, const float* gamma,
               const float* beta, float epsilon, bool center, bool scale, float* out) {
  TVM_FFI_ICHECK(first_axis >= 0 && first_axis < static_cast<int64_t>(shape.size()))
      << "LayerNorm: first axis " << first_axis << " out of range";
  constexpr int64_t kRowsAtOnce = 8;
  int64_t row = 1;
  for (size_t d = first_axis; d < shape.size(); ++d) row *= shape[d];
  const int64_t rows = row == 0 ? 0 : NumElements(shape) / row;
  const int64_t blocks = (rows + kRowsAtOnce - 1) / kRowsAtOnce;
  ParallelFor(blocks, std::max<int64_t>(1, 4096 / std::max<int64_t>(row * kRowsAtOnce, 1)),
              [&](int64_t begin, int64_t end) {
                for (int64_t r = begin * kRowsAtOnce; r < std::min(rows, end * kRowsAtOnce);) {
                  const int64_t offset = r * row;
                  if (r + kRowsAtOnce <= rows) {
                    LayerNormRows<kRowsAtOnce>(input + offset, row, gamma, beta, epsilon, center,
                                               scale, out + offset);
                    r += kRowsAtOnce;
                  } else {
                    LayerNormRows<1>(input + offset, row, gamma, beta, epsilon, center, scale,
                                     out + offset);
                    ++r;
                  }
                }
              });
}

}  // namespace kernels
}  // namespace example_npu
