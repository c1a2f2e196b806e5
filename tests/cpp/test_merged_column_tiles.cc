#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "compiler/compiler.h"
#include "graph_test_util.h"
#include "sim/emulator.h"
#include "sim/merged_column_tiles.h"

namespace example_npu {
namespace {

using test_util::SmallL1;

/*! \brief "[first, first + step, ...]" with `count` entries, repeating every seven. */
template <typename T>
std::string List(int64_t count, T first, T step) {
  std::string text = "[";
  for (int64_t i = 0; i < count; ++i) {
    text += (i ? ", " : "") + std::to_string(first + step * static_cast<T>(i % 7));
  }
  return text + "]";
}

/*!
 * \brief Two int8 fully connected layers at batch 1, as TFLite's come (per-channel scales, int32
 * bias, TFLite's rounding), the second with TVM's rounding and a relu: the compiler splits their
 * columns over tiles of 16 or 32.
 */
std::string TwoLayers(int64_t in, int64_t hidden, int64_t out) {
  return R"({"version": 1, "symbol": "fc", "nodes": [
  {"op": "input", "name": "x", "shape": [1, )" +
         std::to_string(in) + R"(], "dtype": "int8"},
  {"op": "const", "name": "w1", "shape": [)" +
         std::to_string(in) + ", " + std::to_string(hidden) + R"(], "dtype": "int8"},
  {"op": "qnn.matmul", "name": "fc1", "inputs": [0, 1], "shape": [1, )" +
         std::to_string(hidden) + R"(], "dtype": "int8",
   "attrs": {"input_scale": 0.03, "input_zero_point": 1, "weight_scales": )" +
         List(hidden, 0.0005, 0.0001) + R"(, "int32_bias": )" + List<int64_t>(hidden, -300, 97) +
         R"(, "int32_bias_scales": )" + List(hidden, 0.000015, 0.000003) + R"(,
             "output_scale": 0.026, "output_zero_point": -128, "rounding": "tflite"}},
  {"op": "const", "name": "w2", "shape": [)" +
         std::to_string(hidden) + ", " + std::to_string(out) + R"(], "dtype": "int8"},
  {"op": "qnn.matmul", "name": "fc2", "inputs": [2, 3], "shape": [1, )" +
         std::to_string(out) + R"(], "dtype": "int8",
   "attrs": {"input_scale": 0.026, "input_zero_point": -128, "weight_scales": )" +
         List(out, 0.001, 0.0002) + R"(, "output_scale": 0.05, "output_zero_point": -20,
             "min_value": 0.0}}],
  "arg_nodes": [0], "heads": [4]})";
}

TEST(MergedColumnTilesTest, ColumnTilesAsOneCallComputeTheSameBits) {
  const int64_t in = 640, hidden = 128, out = 64;
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::vector<int8_t> x(in), w1(in * hidden), w2(hidden * out);
  for (std::vector<int8_t>* v : {&x, &w1, &w2}) {
    for (int8_t& b : *v) b = static_cast<int8_t>(byte(rng));
  }
  for (const NPUConfig& config : {NPUConfig(), SmallL1()}) {
    const Program program = Compile(ParseGraph(TwoLayers(in, hidden, out)), config);
    std::vector<std::vector<int8_t>> results;
    for (bool fuse : {true, false}) {
      for (bool forward : {true, false}) {
        const Emulator emulator(program, EmulatorOptions{forward, fuse});
        const MergedColumnTiles& merged = emulator.merged_column_tiles();
        // Only tiles whose requantization writes into DRAM merge: fused and forwarded.
        if (!fuse || !forward) EXPECT_TRUE(merged.merges.empty());
        if (fuse && forward && config.l1_sram_kb == NPUConfig().l1_sram_kb) {
          ASSERT_EQ(merged.merges.size(), 2u) << "one run per layer";
          EXPECT_GE(merged.merges[0].members.size(), 2u);
          EXPECT_EQ(merged.merges[0].columns, hidden);
          EXPECT_EQ(merged.merges[1].columns, out);
          // Each layer is then one call: its group runs on one thread, in order.
          for (const GroupSchedule& group : emulator.dataflow().groups) {
            EXPECT_FALSE(group.concurrent) << "group at command " << group.begin;
          }
        }
        results.push_back(test_util::EmulatedInt8(emulator, x, {w1.data(), w2.data()}, out));
      }
    }
    for (size_t i = 1; i < results.size(); ++i) EXPECT_EQ(results[i], results[0]) << i;
  }
}

TEST(MergedColumnTilesTest, LargeLayersKeepTheirTilesForTheThreads) {
  // 1,024 x 2,048 multiply-adds per layer: past what one call takes.
  const Program program = Compile(ParseGraph(TwoLayers(1024, 2048, 16)), NPUConfig());
  const Emulator emulator(program, EmulatorOptions{true, true});
  for (const MergedColumnTiles::Merge& merge : emulator.merged_column_tiles().merges) {
    EXPECT_LT(merge.columns, 2048);
  }
}

}  // namespace
}  // namespace example_npu
