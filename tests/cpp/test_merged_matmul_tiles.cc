#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/compiler.h"
#include "graph_test_util.h"
#include "sim/emulator.h"
#include "sim/merged_matmul_tiles.h"

namespace example_npu {
namespace {

using test_util::SmallL1;

/*!
 * \brief x [rows, depth] times a weight, then `epilogue`: a Linear layer as the importers give
 * it. The weight is [depth, cols], or (transposed) a [cols, depth] constant read through
 * permute_dims, as torch's Linear comes.
 */
std::string Linear(int64_t rows, int64_t depth, int64_t cols, bool transposed,
                   const std::string& epilogue) {
  const std::string r = std::to_string(rows), k = std::to_string(depth), n = std::to_string(cols);
  std::string nodes = R"({"op": "input", "name": "x", "shape": [)" + r + ", " + k +
                      R"(], "dtype": "float32"},
  {"op": "const", "name": "b", "shape": [)" +
                      n + R"(], "dtype": "float32"},)";
  if (transposed) {
    nodes += R"(
  {"op": "const", "name": "wt", "shape": [)" +
             n + ", " + k + R"(], "dtype": "float32"},
  {"op": "permute_dims", "name": "w", "inputs": [2], "shape": [)" +
             k + ", " + n + R"(], "dtype": "float32", "attrs": {"axes": [1, 0]}},)";
  } else {
    nodes += R"(
  {"op": "const", "name": "wt", "shape": [1], "dtype": "float32"},
  {"op": "const", "name": "w", "shape": [)" +
             k + ", " + n + R"(], "dtype": "float32"},)";
  }
  nodes += R"(
  {"op": "matmul", "name": "mm", "inputs": [0, 3], "shape": [)" +
           r + ", " + n + R"(], "dtype": "float32"})";
  if (epilogue == "bias" || epilogue == "bias first" || epilogue == "bias relu") {
    const std::string inputs = epilogue == "bias first" ? "[1, 4]" : "[4, 1]";
    nodes += R"(,
  {"op": "add", "name": "y", "inputs": )" +
             inputs + R"(, "shape": [)" + r + ", " + n + R"(], "dtype": "float32"})";
  }
  if (epilogue == "bias relu") {
    nodes += R"(,
  {"op": "nn.relu", "name": "z", "inputs": [5], "shape": [)" +
             r + ", " + n + R"(], "dtype": "float32"})";
  }
  const int64_t head = epilogue == "none" ? 4 : epilogue == "bias relu" ? 6 : 5;
  return R"({"version": 1, "symbol": "linear", "nodes": [
  )" + nodes +
         R"(], "arg_nodes": [0], "heads": [)" + std::to_string(head) + "]}";
}

int64_t MergedTiles(const Program& program, EmulatorOptions options) {
  const Emulator emulator(program, options);
  int64_t tiles = 0;
  for (const std::vector<MergedMatmulTiles::Tile>& run : emulator.merged_matmul_tiles().runs) {
    EXPECT_GE(run.size(), 2u);
    tiles += static_cast<int64_t>(run.size());
  }
  return tiles;
}

TEST(MergedMatmulTilesTest, LinearLayerTilesRunTogetherWithTheSameBits) {
  for (bool transposed : {false, true}) {
    for (const std::string epilogue : {"bias", "bias first", "none"}) {
      SCOPED_TRACE(epilogue + (transposed ? ", transposed weight" : ""));
      const Graph graph = ParseGraph(Linear(50, 192, 96, transposed, epilogue));
      // Forwarding off moves every byte through L1 tile by tile, as the NPU does: the reference
      // for the bits (the helper compares both, and both with the untiled evaluation).
      test_util::ExpectTiledRunsMatchUntiled(
          graph, {NPUConfig(), SmallL1()}, 7, 1e-4,
          [](const Program& program, const NPUConfig& config) {
            // A 16 KB L1 splits the reduction: partial sums are no chain of their own.
            if (config.l1_sram_kb == NPUConfig().l1_sram_kb) {
              EXPECT_GE(MergedTiles(program, EmulatorOptions{true}), 4);
            }
            EXPECT_EQ(MergedTiles(program, EmulatorOptions{false}), 0);
          });
    }
  }
}

TEST(MergedMatmulTilesTest, TilesWhoseResultsOtherCommandsReadRunOneByOne) {
  // The relu reads each biased tile on chip: no tile's chain ends in a store.
  const Graph graph = ParseGraph(Linear(50, 192, 96, true, "bias relu"));
  test_util::ExpectTiledRunsMatchUntiled(graph, {NPUConfig()}, 8, 1e-4,
                                         [](const Program& program, const NPUConfig&) {
                                           EXPECT_EQ(MergedTiles(program, EmulatorOptions{}), 0);
                                         });
}

}  // namespace
}  // namespace example_npu
