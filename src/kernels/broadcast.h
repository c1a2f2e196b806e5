/*!
 * \file kernels/broadcast.h
 * \brief numpy broadcasting of two operands, as loops over merged output dims.
 */
#ifndef EXAMPLE_NPU_KERNELS_BROADCAST_H_
#define EXAMPLE_NPU_KERNELS_BROADCAST_H_

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/simd.h"

namespace example_npu {
namespace kernels {

/*!
 * \brief Output dims with each operand's element strides (0 where it broadcasts), with size-1
 * dims dropped and adjacent dims merged whenever both operands stay linear across them, so the
 * innermost loop is as long as possible.
 */
struct BroadcastPlan {
  std::vector<int64_t> dims;
  std::vector<int64_t> lhs_strides;
  std::vector<int64_t> rhs_strides;
};

/*! \brief The plan of lhs_shape and rhs_shape broadcast to out_shape (at least one dim). */
BroadcastPlan MakeBroadcastPlan(const Shape& lhs_shape, const Shape& rhs_shape,
                                const Shape& out_shape);

/*!
 * \brief Calls fn(row, lhs_offset, rhs_offset) for the rows [row_begin, row_end) of the plan (a
 * row is the innermost merged dim); offsets are the operands' element offsets of the row start.
 */
template <typename RowFn>
void ForEachBroadcastRow(const BroadcastPlan& plan, int64_t row_begin, int64_t row_end, RowFn fn) {
  const size_t rank = plan.dims.size();
  // Odometer over the outer dims, started at row_begin; advanced without div/mod afterwards.
  std::vector<int64_t> index(rank, 0);
  int64_t lhs_off = 0;
  int64_t rhs_off = 0;
  for (int64_t d = static_cast<int64_t>(rank) - 2, rest = row_begin; d >= 0; --d) {
    index[d] = rest % plan.dims[d];
    rest /= plan.dims[d];
    lhs_off += index[d] * plan.lhs_strides[d];
    rhs_off += index[d] * plan.rhs_strides[d];
  }
  for (int64_t row = row_begin; row < row_end; ++row) {
    fn(row, lhs_off, rhs_off);
    for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {
      lhs_off += plan.lhs_strides[d];
      rhs_off += plan.rhs_strides[d];
      if (++index[d] < plan.dims[d]) break;
      lhs_off -= plan.lhs_strides[d] * plan.dims[d];
      rhs_off -= plan.rhs_strides[d] * plan.dims[d];
      index[d] = 0;
    }
  }
}

/*!
 * \brief out[0:n] = op(lhs[i * ls], rhs[i * rs]) with the stride pattern hoisted out, so the
 * common cases (both contiguous, one operand a broadcast scalar) vectorise.
 */
template <typename Op>
EXAMPLE_NPU_INLINE void BroadcastRow(const Op& op, const float* lhs, int64_t ls, const float* rhs,
                                     int64_t rs, float* out, int64_t n) {
  if (ls == 1 && rs == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = op(lhs[i], rhs[i]);
  } else if (ls == 1 && rs == 0) {
    const float b = rhs[0];
    for (int64_t i = 0; i < n; ++i) out[i] = op(lhs[i], b);
  } else if (ls == 0 && rs == 1) {
    const float a = lhs[0];
    for (int64_t i = 0; i < n; ++i) out[i] = op(a, rhs[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = op(lhs[i * ls], rhs[i * rs]);
  }
}

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_BROADCAST_H_
