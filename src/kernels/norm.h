/*!
 * \file kernels/norm.h
 * \brief Group and instance normalisation on the vector unit, as TVM's topi computes them: one
 * pass of sum(x) and sum(x * x) per group (in row-major order), then
 * (x - mean) * rsqrt(E[x^2] - mean^2 + epsilon) * gamma[c] + beta[c].
 *
 * A group is a set of whole dims once the channel axis is split into (groups, channels /
 * groups): the statistics of one group are a reduction over the "reduced" dims of that split
 * space, so a tile of it can accumulate them chunk by chunk (a group larger than L1 streams
 * through twice: statistics, then the normalisation). Instance norm is group norm with one
 * channel per group.
 */
#ifndef EXAMPLE_NPU_KERNELS_NORM_H_
#define EXAMPLE_NPU_KERNELS_NORM_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace example_npu {
namespace kernels {

struct GroupNormParams {
  int64_t channel_axis = 1;
  int64_t groups = 1;
  std::vector<int64_t> axes;  // normalised axes besides the channels of a group (sorted)
  float epsilon = 1e-5f;
};

/*! \brief A tensor seen with its channel axis split into (groups, channels / groups). */
struct NormSpace {
  Shape shape;
  std::vector<bool> reduced;  // per dim of `shape`: summed into one statistic
};

/*! \brief The split space of a tensor of `shape` (the channel dim c becomes dims c, c + 1). */
NormSpace GroupNormSpace(const Shape& shape, const GroupNormParams& p);

/*! \brief Which dims of the split space of a rank-`rank` tensor are reduced. */
std::vector<bool> GroupNormReduced(const GroupNormParams& p, size_t rank);

/*!
 * \brief Adds sum(x) and sum(x * x) of a tile (in the split space) into stats: two floats per
 * element of the tile's kept (not reduced) dims, in row-major order. Starts from zero unless
 * `accumulate`.
 */
void GroupNormStatistics(const float* input, const NormSpace& tile, float* stats, bool accumulate);

/*!
 * \brief Normalises a tile with the statistics of its groups over `count` elements each; gamma
 * and beta have the tile's shape with unit dims where they broadcast (only the channel dims are
 * not unit).
 */
void GroupNormApply(const float* input, const NormSpace& tile, const float* stats, float count,
                    float epsilon, const float* gamma, const Shape& gamma_shape, const float* beta,
                    const Shape& beta_shape, float* out);

/*! \brief The whole op: gamma and beta hold one value per channel. */
void GroupNorm(const float* input, const Shape& shape, const GroupNormParams& p, const float* gamma,
               const float* beta, float* out);

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_NORM_H_
