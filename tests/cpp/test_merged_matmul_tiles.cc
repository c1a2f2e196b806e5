#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "compiler/compiler.h"
#include "graph_test_util.h"
#include "sim/emulator.h"
#include "sim/merged_matmul_tiles.h"

namespace example_npu {
namespace {

using test_util::SmallL1;

/*!
 * \brief x [rows, depth] times a weight, then `epilogue` ("bias", "bias first": the add's operands
 * swapped, "bias relu", "bias clip", or "none"): a Linear layer as the importers give it. The
 * weight is [depth, cols], or (transposed) a [cols, depth] constant read through permute_dims, as
 * torch's Linear comes.
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
  if (epilogue != "none") {
    const std::string inputs = epilogue == "bias first" ? "[1, 4]" : "[4, 1]";
    nodes += R"(,
  {"op": "add", "name": "y", "inputs": )" +
             inputs + R"(, "shape": [)" + r + ", " + n + R"(], "dtype": "float32"})";
  }
  const bool activation = epilogue == "bias relu" || epilogue == "bias clip";
  if (epilogue == "bias relu") {
    nodes += R"(,
  {"op": "nn.relu", "name": "z", "inputs": [5], "shape": [)" +
             r + ", " + n + R"(], "dtype": "float32"})";
  } else if (epilogue == "bias clip") {
    nodes += R"(,
  {"op": "clip", "name": "z", "inputs": [5], "shape": [)" +
             r + ", " + n + R"(], "dtype": "float32", "attrs": {"min": -1.5, "max": 2}})";
  }
  const int64_t head = epilogue == "none" ? 4 : activation ? 6 : 5;
  return R"({"version": 1, "symbol": "linear", "nodes": [
  )" + nodes +
         R"(], "arg_nodes": [0], "heads": [)" + std::to_string(head) + "]}";
}

/*! \brief Every chain of merged matmul steps `emulator` computes at a group's start. */
std::vector<std::vector<MergedMatmulTiles::Step>> MergedChains(const Emulator& emulator) {
  std::vector<std::vector<MergedMatmulTiles::Step>> chains;
  for (const MergedMatmulTiles::Chains& group : emulator.merged_matmul_tiles().at_group_start) {
    chains.insert(chains.end(), group.begin(), group.end());
  }
  return chains;
}

TEST(MergedMatmulTilesTest, LinearLayerTilesRunTogetherWithTheSameBits) {
  for (bool transposed : {false, true}) {
    // 1,400 rows: the activation's rows are shared out among the threads.
    const std::vector<std::pair<std::string, int64_t>> cases = {
        {"bias", 50},      {"bias first", 50}, {"none", 50},
        {"bias relu", 50}, {"bias clip", 50},  {"bias relu", 1400}};
    for (const auto& [epilogue, rows] : cases) {
      SCOPED_TRACE(epilogue + ", " + std::to_string(rows) + " rows" +
                   (transposed ? ", transposed weight" : ""));
      const Graph graph = ParseGraph(Linear(rows, 192, 96, transposed, epilogue));
      // Forwarding off moves every byte through L1 tile by tile, as the NPU does: the reference
      // for the bits (the helper compares both, and both with the untiled evaluation).
      test_util::ExpectTiledRunsMatchUntiled(
          graph, {NPUConfig(), SmallL1()}, 7, 1e-4,
          [&epilogue = epilogue, rows = rows](const Program& program, const NPUConfig& config) {
            // A 16 KB L1 splits the reduction: partial sums are no chain of their own.
            if (config.l1_sram_kb == NPUConfig().l1_sram_kb) {
              // The tiles stack over the rows and sit side by side over the columns, their
              // weight tiles read as panels of one B: one GEMM for the layer.
              const auto chains = MergedChains(Emulator(program, EmulatorOptions{true}));
              ASSERT_EQ(chains.size(), 1u);
              ASSERT_EQ(chains[0].size(), 1u);
              const MergedMatmulTiles::Step& step = chains[0][0];
              EXPECT_EQ(step.m, rows);
              EXPECT_EQ(step.n, 96);
              EXPECT_GT(step.panel_width, 0);
              EXPECT_LT(step.panel_width, 96);
              EXPECT_EQ(step.activation >= 0,
                        epilogue != "bias" && epilogue != "bias first" && epilogue != "none");
            }
            EXPECT_TRUE(MergedChains(Emulator(program, EmulatorOptions{false})).empty());
          });
    }
  }
}

TEST(MergedMatmulTilesTest, SplitReductionsAccumulateFromLhsRowsReadInPlace) {
  // A 2,048-deep reduction is split over steps of 512: each reads a strided slice of the rows
  // of h, which an earlier group wrote into DRAM.
  const Graph graph = ParseGraph(R"({"version": 1, "symbol": "mlp", "nodes": [
  {"op": "input", "name": "x", "shape": [40, 2048], "dtype": "float32"},
  {"op": "const", "name": "b", "shape": [64], "dtype": "float32"},
  {"op": "const", "name": "wt", "shape": [64, 2048], "dtype": "float32"},
  {"op": "permute_dims", "name": "w", "inputs": [2], "shape": [2048, 64], "dtype": "float32",
   "attrs": {"axes": [1, 0]}},
  {"op": "nn.gelu", "name": "h", "inputs": [0], "shape": [40, 2048], "dtype": "float32"},
  {"op": "matmul", "name": "mm", "inputs": [4, 3], "shape": [40, 64], "dtype": "float32"},
  {"op": "add", "name": "y", "inputs": [5, 1], "shape": [40, 64], "dtype": "float32"}],
  "arg_nodes": [0], "heads": [6]})");
  test_util::ExpectTiledRunsMatchUntiled(
      graph, {NPUConfig()}, 9, 1e-4, [](const Program& program, const NPUConfig&) {
        // Every tile's partial products, stacked and side by side: one chain of the reduction's
        // steps over all rows and columns, the bias added once, after the last.
        const auto chains = MergedChains(Emulator(program, EmulatorOptions{true}));
        ASSERT_EQ(chains.size(), 1u);
        ASSERT_GE(chains[0].size(), 4u);
        int64_t depth = 0;
        for (const MergedMatmulTiles::Step& step : chains[0]) {
          EXPECT_EQ(step.m, 40);
          EXPECT_EQ(step.n, 64);
          EXPECT_EQ(step.lda, 2048);
          EXPECT_EQ(step.accumulate, &step != &chains[0].front());
          EXPECT_EQ(step.addend.valid(), &step == &chains[0].back());
          depth += step.k;
        }
        EXPECT_EQ(depth, 2048);
      });
}

TEST(MergedMatmulTilesTest, TilesWhoseResultsOtherCommandsReadRunOneByOne) {
  // The sigmoid (no epilogue a chain takes) reads each biased tile on chip: no tile's chain ends
  // in a store. The matmul steps still read h's rows in place through their stride (a 2-D matmul
  // takes strided views).
  const Graph graph = ParseGraph(R"({"version": 1, "symbol": "mlp", "nodes": [
  {"op": "input", "name": "x", "shape": [40, 2048], "dtype": "float32"},
  {"op": "const", "name": "b", "shape": [64], "dtype": "float32"},
  {"op": "const", "name": "w", "shape": [2048, 64], "dtype": "float32"},
  {"op": "nn.gelu", "name": "h", "inputs": [0], "shape": [40, 2048], "dtype": "float32"},
  {"op": "matmul", "name": "mm", "inputs": [3, 2], "shape": [40, 64], "dtype": "float32"},
  {"op": "add", "name": "y", "inputs": [1, 4], "shape": [40, 64], "dtype": "float32"},
  {"op": "sigmoid", "name": "z", "inputs": [5], "shape": [40, 64], "dtype": "float32"}],
  "arg_nodes": [0], "heads": [6]})");
  test_util::ExpectTiledRunsMatchUntiled(
      graph, {NPUConfig()}, 8, 1e-4, [](const Program& program, const NPUConfig&) {
        const Emulator emulator(program, EmulatorOptions{true});
        EXPECT_TRUE(MergedChains(emulator).empty());
        int64_t views = 0;
        for (size_t c = 0; c < program.commands.size(); ++c) {
          if (!program.commands[c].is_dma()) {
            views += emulator.transfers().input_from[c][0].view >= 0;
          }
        }
        EXPECT_GE(views, 12);
      });
}

TEST(MergedMatmulTilesTest, AttentionHeadsReadTheirOperandsThroughStrides) {
  // q k^T per head: each tile a single product of a [1, 70, 64] slice of q and a [1, 64, n]
  // column slice of k^T (rows 70 apart), its result rows written 70 apart; then p v, v's column
  // slices read likewise.
  const Graph graph = ParseGraph(R"({"version": 1, "symbol": "attention", "nodes": [
  {"op": "input", "name": "q", "shape": [4, 70, 64], "dtype": "float32"},
  {"op": "input", "name": "kt", "shape": [4, 64, 70], "dtype": "float32"},
  {"op": "input", "name": "v", "shape": [4, 70, 64], "dtype": "float32"},
  {"op": "matmul", "name": "s", "inputs": [0, 1], "shape": [4, 70, 70], "dtype": "float32"},
  {"op": "nn.softmax", "name": "p", "inputs": [3], "shape": [4, 70, 70], "dtype": "float32",
   "attrs": {"axis": -1}},
  {"op": "matmul", "name": "o", "inputs": [4, 2], "shape": [4, 70, 64], "dtype": "float32"}],
  "arg_nodes": [0, 1, 2], "heads": [5]})");
  test_util::ExpectTiledRunsMatchUntiled(
      graph, {NPUConfig(), SmallL1()}, 11, 1e-4,
      [](const Program& program, const NPUConfig& config) {
        if (config.l1_sram_kb != NPUConfig().l1_sram_kb) return;
        // Each head's tiles of each product: one chain over all its rows and columns, its
        // operands' and result's rows read and written through their strides.
        const auto chains = MergedChains(Emulator(program, EmulatorOptions{true}));
        int64_t scores = 0, outputs = 0;
        for (const auto& chain : chains) {
          ASSERT_EQ(chain.size(), 1u);
          const MergedMatmulTiles::Step& step = chain[0];
          EXPECT_EQ(step.m, 70);
          scores += step.k == 64 && step.n == 70 && step.ldb == 70 && step.out_row_stride == 70;
          outputs += step.k == 70 && step.n == 64 && step.ldb == 64 && step.out_row_stride == 64;
        }
        EXPECT_EQ(scores, 4);
        EXPECT_EQ(outputs, 4);
      });
}

}  // namespace
}  // namespace example_npu
