/*!
 * \file kernels/reduce.cc
 * \brief Reduction kernels: mean over any axes (global average pooling) and layer norm.
 */
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/parallel.h"

namespace example_npu {
namespace kernels {

void Mean(const float* input, const Shape& shape, const std::vector<int64_t>& axes, float* out) {
  Shape kept = shape;
  int64_t count = 1;
  for (int64_t axis : axes) {
    TVM_FFI_ICHECK(axis >= 0 && axis < static_cast<int64_t>(shape.size()))
        << "Mean: axis " << axis << " out of range";
    count *= shape[axis];
    kept[axis] = 1;
  }
  const int64_t out_size = NumElements(kept);
  std::vector<float> sum(out_size, 0.0f);
  const std::vector<int64_t> out_strides = RowMajorStrides(kept);
  // Walk the input in row-major order: each output then sums its elements in that order too.
  const size_t rank = shape.size();
  std::vector<int64_t> index(rank, 0);
  int64_t out_index = 0;
  const int64_t total = NumElements(shape);
  for (int64_t i = 0; i < total; ++i) {
    sum[out_index] += input[i];
    for (size_t d = rank; d-- > 0;) {
      const int64_t step = kept[d] == 1 ? 0 : out_strides[d];
      out_index += step;
      if (++index[d] < shape[d]) break;
      out_index -= step * shape[d];
      index[d] = 0;
    }
  }
  const float divisor = static_cast<float>(count);
  for (int64_t i = 0; i < out_size; ++i) out[i] = sum[i] / divisor;
}

void LayerNorm(const float* input, const Shape& shape, int64_t first_axis, const float* gamma,
               const float* beta, float epsilon, bool center, bool scale, float* out) {
  TVM_FFI_ICHECK(first_axis >= 0 && first_axis < static_cast<int64_t>(shape.size()))
      << "LayerNorm: first axis " << first_axis << " out of range";
  int64_t row = 1;
  for (size_t d = first_axis; d < shape.size(); ++d) row *= shape[d];
  const int64_t rows = row == 0 ? 0 : NumElements(shape) / row;
  const float count = static_cast<float>(row);
  ParallelFor(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(row, 1)),
              [&](int64_t begin, int64_t end) {
                for (int64_t r = begin; r < end; ++r) {
                  const float* x = input + r * row;
                  float* y = out + r * row;
                  float sum = 0.0f;
                  for (int64_t i = 0; i < row; ++i) sum += x[i];
                  const float mean = sum / count;
                  float var_sum = 0.0f;
                  for (int64_t i = 0; i < row; ++i) var_sum += (x[i] - mean) * (x[i] - mean);
                  const float inv_std = 1.0f / std::sqrt(var_sum / count + epsilon);
                  for (int64_t i = 0; i < row; ++i) {
                    float value = (x[i] - mean) * inv_std;
                    if (scale) value *= gamma[i];
                    if (center) value += beta[i];
                    y[i] = value;
                  }
                }
              });
}

}  // namespace kernels
}  // namespace example_npu
