#include "config/matrix_engine.h"

#include <algorithm>

namespace example_npu {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool Empty(const MatrixWork& work) {
  return work.pixels <= 0 || work.channels <= 0 || work.depth <= 0 || work.groups <= 0;
}

}  // namespace

int64_t MatrixPasses(DType dtype) { return std::clamp<int64_t>(DTypeBytes(dtype), 1, 4); }

int64_t MatrixFolds(const NPUConfig& config, const MatrixWork& work) {
  if (Empty(work)) return 0;
  const int64_t dim = config.matrix_engine_dim;
  const int64_t channel_folds = work.groups * CeilDiv(CeilDiv(work.channels, work.groups), dim);
  switch (config.matrix_dataflow()) {
    case MatrixDataflow::kOutputStationary:
      return CeilDiv(work.pixels, dim) * channel_folds;
    case MatrixDataflow::kWeightStationary:
      return CeilDiv(work.depth, dim) * channel_folds;
  }
  return 0;
}

int64_t MatrixEngineCycles(const NPUConfig& config, DType dtype, const MatrixWork& work) {
  if (Empty(work)) return 0;
  const int64_t dim = config.matrix_engine_dim;
  const int64_t passes = MatrixPasses(dtype);
  int64_t per_fold = 0;
  switch (config.matrix_dataflow()) {
    case MatrixDataflow::kOutputStationary:
      per_fold = 2 * dim - 2 + work.depth * passes;
      break;
    case MatrixDataflow::kWeightStationary:
      per_fold = 3 * dim - 2 + work.pixels * passes;
      break;
  }
  return MatrixFolds(config, work) * per_fold;
}

}  // namespace example_npu
