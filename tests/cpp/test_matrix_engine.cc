// The per-fold matrix-engine model (config/matrix_engine.h) against SCALE-Sim's published
// AlexNet golden and against a cycle-by-cycle walk of a systolic array.
#include <gtest/gtest.h>
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "config/matrix_engine.h"
#include "test_util.h"

namespace example_npu {
namespace {

NPUConfig Array(int64_t dim, const char* dataflow) {
  NPUConfig config;
  config.matrix_engine_dim = dim;
  config.dataflow = dataflow;
  return config;
}

/*!
 * \brief Cycles of one fold, by walking a rows x cols array: element t of the stream (the
 * reduction under output stationary, the pixels under weight stationary) reaches cell (r, c) at
 * cycle start + r + c + t, skewed one hop per row and per column, and is multiplied in the
 * following cycle. A weight-stationary fold starts after shifting its weights in, one row per
 * cycle; its partial sums run down the columns, so the bottom row's products finish it.
 */
int64_t WalkFold(int64_t rows, int64_t cols, int64_t stream, bool weight_stationary) {
  const int64_t start = weight_stationary ? rows : 0;
  int64_t done = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t t = 0; t < stream; ++t) done = std::max(done, start + r + c + t + 1);
    }
  }
  return done;
}

TEST(MatrixEngineTest, AlexNetConv1MatchesScaleSimsPublishedGolden) {
  // 227x227x3 input, 96 11x11 filters, stride 4: P = 55 * 55, K = 11 * 11 * 3. SCALE-Sim's
  // weight-stationary 32x32 run reports 112,283 compute cycles.
  const MatrixWork work{55 * 55, 96, 11 * 11 * 3, 1};
  const int64_t cycles = MatrixEngineCycles(Array(32, "weight_stationary"), DType::kInt8, work);
  EXPECT_LE(std::abs(cycles - 112283), 1) << cycles;
}

TEST(MatrixEngineTest, OneFoldCostsWhatTheArrayWalkTakes) {
  for (int64_t dim : {4, 16, 32}) {
    for (int64_t stream : {1, 7, 100}) {
      EXPECT_EQ(MatrixEngineCycles(Array(dim, "output_stationary"), DType::kInt8,
                                   MatrixWork{dim, dim, stream, 1}),
                WalkFold(dim, dim, stream, false));
      EXPECT_EQ(MatrixEngineCycles(Array(dim, "weight_stationary"), DType::kInt8,
                                   MatrixWork{stream, dim, dim, 1}),
                WalkFold(dim, dim, stream, true));
    }
  }
}

TEST(MatrixEngineTest, FoldsCountPartialFoldsAndGroupsSeparately) {
  const NPUConfig os = Array(16, "output_stationary");
  const NPUConfig ws = Array(16, "weight_stationary");
  EXPECT_EQ(MatrixFolds(os, MatrixWork{17, 16, 9, 1}), 2);  // 17 pixels need two folds
  EXPECT_EQ(MatrixFolds(ws, MatrixWork{17, 16, 9, 1}), 1);  // 9 reduction rows fit one
  EXPECT_EQ(MatrixFolds(ws, MatrixWork{17, 33, 40, 1}), 3 * 3);
  // Four groups of 8 channels: each group takes its own channel fold.
  EXPECT_EQ(MatrixFolds(os, MatrixWork{16, 32, 9, 4}), 4);
  EXPECT_EQ(MatrixFolds(os, MatrixWork{16, 32, 9, 1}), 2);
  EXPECT_EQ(MatrixEngineCycles(os, DType::kInt8, MatrixWork{0, 16, 9, 1}), 0);
}

TEST(MatrixEngineTest, WiderTypesRepeatOnlyTheStreamedDimension) {
  for (const char* dataflow : {"output_stationary", "weight_stationary"}) {
    const NPUConfig config = Array(16, dataflow);
    const MatrixWork work{100, 40, 70, 1};
    const int64_t int8 = MatrixEngineCycles(config, DType::kInt8, work);
    const int64_t folds = MatrixFolds(config, work);
    const int64_t streamed = std::string(dataflow) == "output_stationary" ? 70 : 100;
    EXPECT_EQ(MatrixEngineCycles(config, DType::kInt16, work), int8 + folds * streamed);
    EXPECT_EQ(MatrixEngineCycles(config, DType::kFloat16, work), int8 + folds * streamed);
    EXPECT_EQ(MatrixEngineCycles(config, DType::kFloat32, work), int8 + 3 * folds * streamed);
  }
  EXPECT_EQ(MatrixPasses(DType::kInt8), 1);
  EXPECT_EQ(MatrixPasses(DType::kFloat16), 2);
  EXPECT_EQ(MatrixPasses(DType::kFloat32), 4);
}

TEST(MatrixEngineTest, DataflowIsPartOfTheConfigJsonAndValidated) {
  NPUConfig config = NPUConfig::FromJSON(R"({"dataflow": "weight_stationary"})");
  EXPECT_EQ(config.matrix_dataflow(), MatrixDataflow::kWeightStationary);
  EXPECT_EQ(NPUConfig::FromJSON(config.ToJSON()).dataflow, "weight_stationary");
  EXPECT_EQ(NPUConfig().matrix_dataflow(), MatrixDataflow::kOutputStationary);
  EXPECT_THROW(NPUConfig::FromJSON(R"({"dataflow": "row_stationary"})"), tvm::ffi::Error);
  EXPECT_THROW(NPUConfig::FromJSON(R"({"dataflow": 1})"), tvm::ffi::Error);
}

TEST(MatrixEngineTest, WorkBeyondInt64IsAValueErrorNotAWrappedCount) {
  const int64_t huge = int64_t{1} << 40;
  for (const char* dataflow : {"output_stationary", "weight_stationary"}) {
    kernels::test_util::ExpectValueError(
        [&] {
          MatrixEngineCycles(Array(1, dataflow), DType::kFloat32, MatrixWork{huge, huge, huge, 1});
        },
        "matrix ");
  }
  // The largest work that fits still counts exactly.
  EXPECT_EQ(MatrixEngineCycles(Array(1, "output_stationary"), DType::kInt8,
                               MatrixWork{1 << 20, 1 << 20, 1 << 20, 1}),
            (int64_t{1} << 40) * (1 << 20));
}

/*! \brief Cycles of a block-dataflow layer by visiting every block the array computes: each
 * cycle covers one (pixel block, channel block, tap, input-channel block) of one group. */
int64_t WalkBlocks(const NPUConfig& config, int64_t pixels, int64_t channels, int64_t taps,
                   int64_t in_channels, int64_t groups) {
  int64_t cycles = 0;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t p = 0; p < pixels; p += config.mac_block_pixels) {
      for (int64_t c = 0; c < channels / groups; c += config.mac_block_channels) {
        for (int64_t t = 0; t < taps; ++t) {
          for (int64_t i = 0; i < in_channels; i += config.mac_block_depth) ++cycles;
        }
      }
    }
  }
  return cycles;
}

TEST(MatrixEngineTest, BlockDataflowCostsEveryBlockOnce) {
  NPUConfig config = Array(16, "block");
  config.mac_block_pixels = 4;
  config.mac_block_channels = 8;
  config.mac_block_depth = 8;
  EXPECT_EQ(config.MatrixMacsPerCycle(DType::kInt8), 256);
  EXPECT_EQ(config.MatrixMacsPerCycle(DType::kInt16), 128);
  // (pixels, channels, taps, input channels per group, groups)
  const int64_t layers[][5] = {{100, 64, 9, 64, 1}, {7, 5, 40, 1, 1}, {33, 17, 1, 9, 1},
                               {16, 32, 9, 8, 4}, {1, 1, 1, 1, 1}};
  for (const auto& [pixels, channels, taps, in_channels, groups] : layers) {
    MatrixWork work{pixels, channels, taps * in_channels, groups};
    work.taps = taps;
    const int64_t walked = WalkBlocks(config, pixels, channels, taps, in_channels, groups);
    EXPECT_EQ(MatrixEngineCycles(config, DType::kInt8, work), walked) << pixels << "x" << channels;
    EXPECT_EQ(MatrixEngineCycles(config, DType::kInt16, work), 2 * walked);
  }
}

}  // namespace
}  // namespace example_npu
