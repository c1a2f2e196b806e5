/*!
 * \file kernels/norm.cc
 * \brief Group / instance normalisation (see norm.h). Built with -ffp-contract=off so that every
 * float32 step rounds as in TVM's LLVM build (whose generic x86-64 target has no FMA).
 */
#include "kernels/norm.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace example_npu {
namespace kernels {
namespace {

/*! \brief Calls fn(flat, kept) for every element of `shape` in row-major order, kept being the
 * row-major index of its kept (not reduced) dims. */
template <typename Fn>
void ForEachElement(const NormSpace& space, Fn fn) {
  const Shape& shape = space.shape;
  const size_t rank = shape.size();
  Shape kept_shape = shape;
  for (size_t d = 0; d < rank; ++d) {
    if (space.reduced[d]) kept_shape[d] = 1;
  }
  const std::vector<int64_t> kept_strides = RowMajorStrides(kept_shape);
  std::vector<int64_t> index(rank, 0);
  int64_t kept = 0;
  const int64_t total = NumElements(shape);
  for (int64_t i = 0; i < total; ++i) {
    fn(i, kept);
    for (size_t d = rank; d-- > 0;) {
      const int64_t step = space.reduced[d] ? 0 : kept_strides[d];
      kept += step;
      if (++index[d] < shape[d]) break;
      kept -= step * shape[d];
      index[d] = 0;
    }
  }
}

/*! \brief Offset of element `i` of `shape` in a tensor of `operand` shape broadcast onto it. */
class BroadcastIndex {
 public:
  BroadcastIndex(const Shape& shape, const Shape& operand)
      : shape_(shape), strides_(RowMajorStrides(operand)) {
    for (size_t d = 0; d < shape.size(); ++d) {
      if (operand[d] == 1) strides_[d] = 0;
    }
  }
  int64_t operator()(int64_t flat) const {
    int64_t offset = 0;
    for (size_t d = shape_.size(); d-- > 0;) {
      offset += flat % shape_[d] * strides_[d];
      flat /= shape_[d];
    }
    return offset;
  }

 private:
  Shape shape_;
  std::vector<int64_t> strides_;
};

}  // namespace

std::vector<bool> GroupNormReduced(const GroupNormParams& p, size_t rank) {
  std::vector<bool> reduced;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t axis = static_cast<int64_t>(d);
    if (axis == p.channel_axis) {
      reduced.push_back(false);  // the group
      reduced.push_back(true);   // the channels of a group
      continue;
    }
    reduced.push_back(std::find(p.axes.begin(), p.axes.end(), axis) != p.axes.end());
  }
  return reduced;
}

NormSpace GroupNormSpace(const Shape& shape, const GroupNormParams& p) {
  NormSpace space{{}, GroupNormReduced(p, shape.size())};
  for (size_t d = 0; d < shape.size(); ++d) {
    if (static_cast<int64_t>(d) == p.channel_axis) {
      space.shape.push_back(p.groups);
      space.shape.push_back(shape[d] / p.groups);
    } else {
      space.shape.push_back(shape[d]);
    }
  }
  return space;
}

void GroupNormStatistics(const float* input, const NormSpace& tile, float* stats, bool accumulate) {
  Shape kept_shape = tile.shape;
  for (size_t d = 0; d < kept_shape.size(); ++d) {
    if (tile.reduced[d]) kept_shape[d] = 1;
  }
  if (!accumulate) std::fill(stats, stats + 2 * NumElements(kept_shape), 0.0f);
  ForEachElement(tile, [&](int64_t i, int64_t kept) {
    const float x = input[i];
    stats[2 * kept] += x;
    stats[2 * kept + 1] += x * x;
  });
}

void GroupNormApply(const float* input, const NormSpace& tile, const float* stats, float count,
                    float epsilon, const float* gamma, const Shape& gamma_shape, const float* beta,
                    const Shape& beta_shape, float* out) {
  const BroadcastIndex gamma_at(tile.shape, gamma_shape), beta_at(tile.shape, beta_shape);
  ForEachElement(tile, [&](int64_t i, int64_t kept) {
    const float mean = stats[2 * kept] / count;
    const float var = stats[2 * kept + 1] / count - mean * mean;
    // rsqrt lowers to 1 / sqrt in TVM's LLVM build.
    const float normalized = (input[i] - mean) * (1.0f / std::sqrt(var + epsilon));
    out[i] = normalized * gamma[gamma_at(i)] + beta[beta_at(i)];
  });
}

void GroupNorm(const float* input, const Shape& shape, const GroupNormParams& p, const float* gamma,
               const float* beta, float* out) {
  TVM_FFI_ICHECK(p.channel_axis >= 0 && p.channel_axis < static_cast<int64_t>(shape.size()) &&
                 p.groups >= 1 && shape[p.channel_axis] % p.groups == 0)
      << "GroupNorm: bad channel axis or group count";
  const NormSpace space = GroupNormSpace(shape, p);
  Shape kept = space.shape;
  Shape channels(space.shape.size(), 1);
  int64_t count = 1;
  for (size_t d = 0; d < kept.size(); ++d) {
    if (space.reduced[d]) {
      count *= kept[d];
      kept[d] = 1;
    }
  }
  channels[p.channel_axis] = p.groups;
  channels[p.channel_axis + 1] = shape[p.channel_axis] / p.groups;
  std::vector<float> stats(2 * NumElements(kept));
  GroupNormStatistics(input, space, stats.data(), false);
  GroupNormApply(input, space, stats.data(), static_cast<float>(count), p.epsilon, gamma, channels,
                 beta, channels, out);
}

}  // namespace kernels
}  // namespace example_npu
