/*!
 * \file kernels/reduce.h
 * \brief Reductions of the pooling unit (sum, mean, max, min, variance, argmax, argmin) and
 * log_softmax, with TVM's semantics to the bit: every output folds its elements in row-major
 * order from TVM's identity (max from the lowest float32, so a row of -inf gives -FLT_MAX), and
 * max / min combine as acc > x ? acc : x (a NaN is kept only when it comes last).
 */
#ifndef EXAMPLE_NPU_KERNELS_REDUCE_H_
#define EXAMPLE_NPU_KERNELS_REDUCE_H_

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace example_npu {
namespace kernels {

enum class ReduceKind { kSum, kMean, kMax, kMin, kVariance, kArgmax, kArgmin };

/*!
 * \brief out has `shape` with the (sorted, distinct) `axes` set to 1, row-major. Mean divides the
 * sum by the element count, variance is the mean of (x - mean)^2 (two passes, as TVM's
 * legalization). argmax / argmin give the row-major index over the reduced dims as a float (exact
 * below 2^24), -1 when no element beats the identity (a row of -inf for argmax), the first index
 * on ties.
 */
void Reduce(ReduceKind kind, const float* input, const Shape& shape,
            const std::vector<int64_t>& axes, float* out);

/*! \brief log_softmax along axis: x - max - log(sum(exp(x - max))), as TVM's topi. */
void LogSoftmax(const float* input, const Shape& shape, int64_t axis, float* out);

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_REDUCE_H_
