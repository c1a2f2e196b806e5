#include "config/matrix_engine.h"

#include <algorithm>

#include "support/checked_math.h"

namespace example_npu {
namespace {

// The work comes from user shapes: every product and sum is overflow-checked.
int64_t CeilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0); }

bool Empty(const MatrixWork& work) {
  return work.pixels <= 0 || work.channels <= 0 || work.depth <= 0 || work.groups <= 0;
}

}  // namespace

int64_t MatrixPasses(DType dtype) { return std::clamp<int64_t>(DTypeBytes(dtype), 1, 4); }

int64_t MatrixFolds(const NPUConfig& config, const MatrixWork& work) {
  if (Empty(work)) return 0;
  const MatrixDataflow dataflow = config.matrix_dataflow();
  const int64_t dim = config.matrix_engine_dim;
  const int64_t channel_block = dataflow == MatrixDataflow::kBlock ? config.mac_block_channels : dim;
  const int64_t channel_folds = checked::Mul(
      work.groups, CeilDiv(CeilDiv(work.channels, work.groups), channel_block), "matrix folds");
  switch (dataflow) {
    case MatrixDataflow::kOutputStationary:
      return checked::Mul(CeilDiv(work.pixels, dim), channel_folds, "matrix folds");
    case MatrixDataflow::kWeightStationary:
      return checked::Mul(CeilDiv(work.depth, dim), channel_folds, "matrix folds");
    case MatrixDataflow::kBlock:
      return checked::Mul(CeilDiv(work.pixels, config.mac_block_pixels), channel_folds,
                          "matrix folds");
  }
  return 0;
}

int64_t MatrixEngineCycles(const NPUConfig& config, DType dtype, const MatrixWork& work) {
  if (Empty(work)) return 0;
  const int64_t dim = config.matrix_engine_dim;
  const int64_t passes = MatrixPasses(dtype);
  const char* what = "matrix engine cycles";
  int64_t per_fold = 0;
  switch (config.matrix_dataflow()) {
    case MatrixDataflow::kOutputStationary:
      per_fold = checked::Add(2 * dim - 2, checked::Mul(work.depth, passes, what), what);
      break;
    case MatrixDataflow::kWeightStationary:
      per_fold = checked::Add(3 * dim - 2, checked::Mul(work.pixels, passes, what), what);
      break;
    case MatrixDataflow::kBlock: {
      const int64_t taps = std::max<int64_t>(1, work.taps);
      const int64_t tap_blocks = CeilDiv(CeilDiv(work.depth, taps), config.mac_block_depth);
      per_fold = checked::Mul(checked::Mul(taps, tap_blocks, what), passes, what);
      break;
    }
  }
  return checked::Mul(MatrixFolds(config, work), per_fold, what);
}

}  // namespace example_npu
