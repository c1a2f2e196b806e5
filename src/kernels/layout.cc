/*!
 * \file kernels/layout.cc
 * \brief Shape helpers and the transpose kernel.
 */
#include <tvm/ffi/error.h>

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace example_npu {
namespace kernels {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> RowMajorStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * shape[i + 1];
  }
  return strides;
}

void Transpose(const float* input, const Shape& in_shape, const std::vector<int64_t>& axes,
               float* out) {
  const size_t rank = in_shape.size();
  TVM_FFI_ICHECK_EQ(axes.size(), rank) << "Transpose: axes must name every input dimension";
  std::vector<bool> seen(rank, false);
  for (int64_t a : axes) {
    TVM_FFI_ICHECK(a >= 0 && a < static_cast<int64_t>(rank) && !seen[a])
        << "Transpose: axes must be a permutation of 0.." << rank - 1;
    seen[a] = true;
  }
  const int64_t total = NumElements(in_shape);
  if (total == 0) return;
  if (rank == 0) {
    out[0] = input[0];
    return;
  }

  // Walk the output in order; the input offset is advanced incrementally (odometer) so the inner
  // loop is a plain strided gather without any div/mod.
  const std::vector<int64_t> in_strides = RowMajorStrides(in_shape);
  Shape out_shape(rank);
  std::vector<int64_t> gather_strides(rank);
  for (size_t i = 0; i < rank; ++i) {
    out_shape[i] = in_shape[axes[i]];
    gather_strides[i] = in_strides[axes[i]];
  }
  const int64_t inner = out_shape[rank - 1];
  const int64_t inner_stride = gather_strides[rank - 1];
  std::vector<int64_t> index(rank, 0);
  int64_t in_offset = 0;
  for (int64_t done = 0; done < total; done += inner) {
    const float* src = input + in_offset;
    float* dst = out + done;
    if (inner_stride == 1) {
      for (int64_t j = 0; j < inner; ++j) dst[j] = src[j];
    } else {
      for (int64_t j = 0; j < inner; ++j) dst[j] = src[j * inner_stride];
    }
    for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {
      in_offset += gather_strides[d];
      if (++index[d] < out_shape[d]) break;
      in_offset -= gather_strides[d] * out_shape[d];
      index[d] = 0;
    }
  }
}

}  // namespace kernels
}  // namespace example_npu
