// Compiler stages and the emulator: plans fit their tiers, live buffers never overlap, the
// command stream respects its dependencies, and tiled execution equals the untiled reference.
#include <gtest/gtest.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/json.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "compiler/compiler.h"
#include "compiler/fusion.h"
#include "compiler/layout.h"
#include "compiler/memory_planner.h"
#include "compiler/tiling_planner_details.h"
#include "graph_test_util.h"
#include "sim/emulator.h"
#include "sim/engines.h"
#include "sim/timing.h"
#include "sim/transfer_plan.h"
#include "test_util.h"

namespace example_npu {
namespace {

using test_util::Emulated;
using test_util::ExpectTiledRunsMatchUntiled;
using test_util::RandomTensors;
using test_util::Untiled;

// x(1,8,12,12) -> conv3x3(w: 16x8) -> relu -> maxpool 2x2 -> conv1x1(v: 8x16) -> add(bias) -> out
const char* kConvNet = R"({"version": 1, "symbol": "net", "nodes": [
  {"op": "input", "name": "x", "shape": [1, 8, 12, 12], "dtype": "float32"},
  {"op": "const", "name": "w", "shape": [16, 8, 3, 3], "dtype": "float32"},
  {"op": "const", "name": "v", "shape": [8, 16, 1, 1], "dtype": "float32"},
  {"op": "const", "name": "b", "shape": [1, 8, 1, 1], "dtype": "float32"},
  {"op": "nn.conv2d", "name": "c1", "inputs": [0, 1], "shape": [1, 16, 12, 12], "dtype": "float32",
   "attrs": {"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1,
             "data_layout": "NCHW", "kernel_layout": "OIHW"}},
  {"op": "nn.relu", "name": "r1", "inputs": [4], "shape": [1, 16, 12, 12], "dtype": "float32"},
  {"op": "nn.max_pool2d", "name": "p1", "inputs": [5], "shape": [1, 16, 6, 6], "dtype": "float32",
   "attrs": {"pool_size": [2, 2], "strides": [2, 2], "dilation": [1, 1], "padding": [0, 0, 0, 0],
             "ceil_mode": false, "count_include_pad": false, "layout": "NCHW"}},
  {"op": "nn.conv2d", "name": "c2", "inputs": [6, 2], "shape": [1, 8, 6, 6], "dtype": "float32",
   "attrs": {"strides": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": 1,
             "data_layout": "NCHW", "kernel_layout": "OIHW"}},
  {"op": "add", "name": "out", "inputs": [7, 3], "shape": [1, 8, 6, 6], "dtype": "float32"}],
  "arg_nodes": [0], "heads": [8]})";

NPUConfig Tiny() {
  NPUConfig config;
  config.l1_sram_kb = 4;
  config.l2_cmx_kb = 8;
  return config;
}

TEST(CompilerTest, FusionChainsElementwiseConsumers) {
  Graph graph = ParseGraph(kConvNet);
  std::vector<FusedGroup> groups = FuseGraph(graph);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].anchor, 4);
  EXPECT_EQ(groups[0].chain, std::vector<int64_t>{5});
  EXPECT_EQ(groups[2].chain, std::vector<int64_t>{8});
}

// conv -> hardswish (y * clip(y + 3, 0, 6) / 6) -> silu (h * sigmoid(h)): y and h are each read
// twice, once two members later, so they stay on chip while the chain goes on.
const char* kActivationChain = R"({"version": 1, "symbol": "act", "nodes": [
  {"op": "input", "name": "x", "shape": [1, 8, 10, 10], "dtype": "float32"},
  {"op": "const", "name": "w", "shape": [8, 8, 3, 3], "dtype": "float32"},
  {"op": "const", "name": "three", "shape": [], "dtype": "float32"},
  {"op": "nn.conv2d", "name": "y", "inputs": [0, 1], "shape": [1, 8, 10, 10], "dtype": "float32",
   "attrs": {"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1,
             "data_layout": "NCHW", "kernel_layout": "OIHW"}},
  {"op": "add", "name": "shift", "inputs": [3, 2], "shape": [1, 8, 10, 10], "dtype": "float32"},
  {"op": "clip", "name": "gate", "inputs": [4], "shape": [1, 8, 10, 10], "dtype": "float32",
   "attrs": {"min": 0, "max": 6}},
  {"op": "multiply", "name": "scaled", "inputs": [3, 5], "shape": [1, 8, 10, 10],
   "dtype": "float32"},
  {"op": "divide", "name": "h", "inputs": [6, 2], "shape": [1, 8, 10, 10], "dtype": "float32"},
  {"op": "sigmoid", "name": "s", "inputs": [7], "shape": [1, 8, 10, 10], "dtype": "float32"},
  {"op": "multiply", "name": "out", "inputs": [7, 8], "shape": [1, 8, 10, 10],
   "dtype": "float32"}],
  "arg_nodes": [0], "heads": [9]})";

TEST(CompilerTest, ActivationsReadingAnEarlierValueFuseIntoTheProducer) {
  Graph graph = ParseGraph(kActivationChain);
  std::vector<FusedGroup> groups = FuseGraph(graph);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].chain, (std::vector<int64_t>{4, 5, 6, 7, 8, 9}));
  auto inputs = RandomTensors(graph, graph.arg_nodes, 3);
  auto consts = RandomTensors(graph, graph.ConstNodes(), 4);
  consts[1] = {3.0f};
  const std::vector<float> expected = Untiled(graph, inputs, consts)[graph.heads[0]];
  for (const NPUConfig& config : {NPUConfig(), Tiny()}) {
    const Program program = Compile(graph, config);
    EXPECT_EQ(program.groups.size(), 1u);
    const std::vector<float> actual = Emulated(program, inputs, consts);
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i) {
      EXPECT_NEAR(actual[i], expected[i], 1e-4f * (1 + std::abs(expected[i]))) << i;
    }
    EXPECT_EQ(Emulated(program, inputs, consts, EmulatorOptions{false}), actual);
  }
}

TEST(CompilerTest, ABiasReshapedAfterTheConvStillFuses) {
  // PyTorch's conv bias: add(conv, reshape(b, (1, C, 1, 1))), the reshape serialised after the
  // conv. It is a view of a constant, so the add and relu join the conv's group.
  const char* graph_json = R"({"version": 1, "symbol": "bias", "nodes": [
    {"op": "input", "name": "x", "shape": [1, 4, 6, 6], "dtype": "float32"},
    {"op": "const", "name": "w", "shape": [8, 4, 1, 1], "dtype": "float32"},
    {"op": "const", "name": "b", "shape": [8], "dtype": "float32"},
    {"op": "nn.conv2d", "name": "y", "inputs": [0, 1], "shape": [1, 8, 6, 6], "dtype": "float32",
     "attrs": {"strides": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": 1,
               "data_layout": "NCHW", "kernel_layout": "OIHW"}},
    {"op": "reshape", "name": "b4", "inputs": [2], "shape": [1, 8, 1, 1], "dtype": "float32"},
    {"op": "add", "name": "z", "inputs": [3, 4], "shape": [1, 8, 6, 6], "dtype": "float32"},
    {"op": "nn.relu", "name": "r", "inputs": [5], "shape": [1, 8, 6, 6], "dtype": "float32"}],
    "arg_nodes": [0], "heads": [6]})";
  Graph graph = ParseGraph(graph_json);
  std::vector<FusedGroup> groups = FuseGraph(graph);
  ASSERT_EQ(groups.size(), 2u);  // the conv group, and the reshape (a view, never run)
  EXPECT_EQ(groups[0].chain, (std::vector<int64_t>{5, 6}));
  ExpectTiledRunsMatchUntiled(graph, {NPUConfig()}, 5, 1e-5);
}

TEST(CompilerTest, AValueAlsoReadOutsideTheGroupEndsTheChain) {
  // The same chain with y also returned: y is stored, so the group ends at y.
  std::string text = kActivationChain;
  text.replace(text.find("\"heads\": [9]"), 12, "\"heads\": [9, 3]");
  std::vector<FusedGroup> groups = FuseGraph(ParseGraph(text));
  ASSERT_GE(groups.size(), 2u);
  EXPECT_TRUE(groups[0].chain.empty());
}

TEST(CompilerTest, LayoutKeepsNHWCBetweenSpatialGroups) {
  Graph graph = ParseGraph(kConvNet);
  LayoutPlan layout = PlanLayout(graph, FuseGraph(graph));
  EXPECT_EQ(layout.storage_order[5], (std::vector<int64_t>{0, 2, 3, 1}));  // conv+relu -> pool
  EXPECT_EQ(layout.storage_order[6], (std::vector<int64_t>{0, 2, 3, 1}));  // pool -> conv
  EXPECT_EQ(layout.storage_order[0], (std::vector<int64_t>{0, 1, 2, 3}));  // graph input
}

TEST(CompilerTest, EveryPlanFitsItsTiersAndCommandsStayInBounds) {
  for (const NPUConfig& config : {NPUConfig(), Tiny()}) {
    Program program = Compile(ParseGraph(kConvNet), config);
    for (const GroupInfo& group : program.groups) {
      EXPECT_LE(group.l1_bytes, config.TierBytes(Tier::kL1)) << group.name;
      EXPECT_LE(group.l2_bytes, config.TierBytes(Tier::kL2)) << group.name;
    }
    for (const Command& c : program.commands) {
      for (int64_t dep : c.deps) EXPECT_LT(dep, c.id);
      const TileRef& tile = c.is_dma() ? c.dma().tile : c.compute().output;
      const int64_t bytes = kernels::NumElements(tile.shape) * DTypeBytes(tile.dtype);
      EXPECT_LE(tile.offset + bytes, config.TierBytes(tile.tier)) << "command " << c.id;
    }
  }
}

TEST(CompilerTest, TinyL1ProducesMoreTilesAndTraffic) {
  Program big = Compile(ParseGraph(kConvNet), NPUConfig());
  Program tiny = Compile(ParseGraph(kConvNet), Tiny());
  EXPECT_GT(tiny.commands.size(), big.commands.size());
  EXPECT_GE(Simulate(tiny).bytes[static_cast<int>(Tier::kDram)],
            Simulate(big).bytes[static_cast<int>(Tier::kDram)]);
}

TEST(CompilerTest, ProfileReportsTheOnChipHighWaterMarks) {
  for (const NPUConfig& config : {NPUConfig(), Tiny()}) {
    const Program program = Compile(ParseGraph(kConvNet), config);
    const Profile profile = Simulate(program);
    // Groups overlap in time (the next one loads while the previous computes): at every moment
    // a group runs, mark the bytes of every group running then, and take the most marked.
    auto peak = [&](Tier tier) {
      std::vector<int64_t> moments;
      for (const GroupProfile& group : profile.groups) moments.push_back(group.start);
      int64_t most = 0;
      for (int64_t t : moments) {
        std::vector<bool> used(config.TierBytes(tier), false);
        for (size_t g = 0; g < program.groups.size(); ++g) {
          if (profile.groups[g].start > t || profile.groups[g].end <= t) continue;
          const GroupInfo& info = program.groups[g];
          const int64_t base = tier == Tier::kL1 ? info.l1_base : info.l2_base;
          const int64_t bytes = tier == Tier::kL1 ? info.l1_bytes : info.l2_bytes;
          std::fill(used.begin() + base, used.begin() + base + bytes, true);
        }
        most = std::max<int64_t>(most, std::count(used.begin(), used.end(), true));
      }
      return most;
    };
    const int64_t l1 = peak(Tier::kL1), l2 = peak(Tier::kL2);
    for (const GroupInfo& group : program.groups) {
      EXPECT_GE(profile.l1_used_bytes, group.l1_bytes);
      EXPECT_GE(profile.l2_used_bytes, group.l2_bytes);
    }
    EXPECT_GT(profile.l1_used_bytes, 0);
    EXPECT_EQ(profile.l1_used_bytes, l1);
    EXPECT_LE(profile.l1_used_bytes, config.TierBytes(Tier::kL1));
    EXPECT_EQ(profile.l2_used_bytes, l2);
    EXPECT_EQ(profile.dram_scratch_bytes, program.dram_scratch_bytes);
    // The JSON the Python profile reads carries the same numbers.
    namespace json = tvm::ffi::json;
    auto root = json::Parse(profile.ToJSON()).cast<json::Object>();
    auto used = root["memory_used"].cast<json::Object>();
    EXPECT_EQ(used["L1"].cast<int64_t>(), l1);
    EXPECT_EQ(used["L2"].cast<int64_t>(), l2);
    EXPECT_EQ(used["DRAM"].cast<int64_t>(), program.dram_scratch_bytes);
    auto groups = root["groups"].cast<json::Array>();
    ASSERT_EQ(groups.size(), program.groups.size());
    for (size_t g = 0; g < program.groups.size(); ++g) {
      auto group = groups[g].cast<json::Object>();
      EXPECT_EQ(group["l1_bytes"].cast<int64_t>(), program.groups[g].l1_bytes);
      EXPECT_EQ(group["l2_bytes"].cast<int64_t>(), program.groups[g].l2_bytes);
    }
  }
}

TEST(CompilerTest, TiledEmulationMatchesTheUntiledReference) {
  ExpectTiledRunsMatchUntiled(ParseGraph(kConvNet), {NPUConfig(), Tiny()}, 1, 1e-4);
}

TEST(CompilerTest, ArrangedConstantTilesFollowReboundConstants) {
  // The OIHW weights load into HWIO tiles: the emulator copies them from its arena of arranged
  // constant tiles, which must be rebuilt when one emulator runs with other constants.
  Graph graph = ParseGraph(kConvNet);
  const Program program = Compile(graph, Tiny());
  const Emulator emulator(program);
  ASSERT_GT(emulator.transfers().const_arena_bytes, 0);
  auto inputs = RandomTensors(graph, graph.arg_nodes, 1);
  std::vector<std::vector<std::vector<float>>> bound;
  for (int seed : {2, 3, 4}) {
    // Seeds 3 and 4 rebind other constants: at new addresses, then at the same addresses with
    // new contents (announced by the version).
    if (seed < 4) bound.push_back(RandomTensors(graph, graph.ConstNodes(), seed));
    if (seed == 4) {
      const auto fresh = RandomTensors(graph, graph.ConstNodes(), seed);
      for (size_t c = 0; c < fresh.size(); ++c) {
        std::copy(fresh[c].begin(), fresh[c].end(), bound.back()[c].begin());
      }
    }
    const auto& consts = bound.back();
    std::vector<float> expected = Untiled(graph, inputs, consts)[graph.heads[0]];
    std::vector<float> out(expected.size());
    DramBindings dram;
    for (const auto& input : inputs) dram.inputs.push_back(input.data());
    for (const auto& c : consts) dram.constants.push_back(c.data());
    dram.outputs.push_back(out.data());
    dram.constants_version = seed == 4 ? 1 : 0;
    emulator.Run(dram);
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_NEAR(out[i], expected[i], 1e-4f * (1 + std::abs(expected[i]))) << seed << ": " << i;
    }
  }
}

TEST(CompilerTest, ArrangedInputTilesMatchTransposedLoads) {
  // The weights as call inputs: the boxes each group loads repeatedly are arranged when the group
  // starts (the run arena); every result bit equals moving each byte through L1.
  std::string text = kConvNet;
  for (const char* name : {"\"w\"", "\"v\""}) {
    const size_t at = text.find(std::string("\"op\": \"const\", \"name\": ") + name);
    ASSERT_NE(at, std::string::npos);
    text.replace(at, 13, "\"op\": \"input\"");
  }
  text.replace(text.find("\"arg_nodes\": [0]"), 16, "\"arg_nodes\": [0, 1, 2]");
  ExpectTiledRunsMatchUntiled(ParseGraph(text), {Tiny()}, 5, 1e-4,
                              [](const Program& program, const NPUConfig&) {
                                ASSERT_GT(Emulator(program).transfers().run_arena_bytes, 0);
                              });
}

/*!
 * \brief x(lhs_shape) @ w(40, 24) + side(side_shape): a Linear over a sequence as ONNX exports
 * it, the weight shared by every batch.
 */
std::string LinearOverBatches(const Shape& lhs_shape, const Shape& side_shape) {
  auto dims = [](const Shape& shape) {
    std::string text;
    for (size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
    return "[" + text + "]";
  };
  Shape out = lhs_shape;
  out.back() = 24;
  return R"({"version": 1, "symbol": "linear", "nodes": [
    {"op": "input", "name": "x", "shape": )" +
         dims(lhs_shape) + R"(, "dtype": "float32"},
    {"op": "const", "name": "w", "shape": [40, 24], "dtype": "float32"},
    {"op": "const", "name": "b", "shape": )" +
         dims(side_shape) + R"(, "dtype": "float32"},
    {"op": "matmul", "name": "mm", "inputs": [0, 1], "shape": )" +
         dims(out) + R"(, "dtype": "float32"},
    {"op": "add", "name": "out", "inputs": [3, 2], "shape": )" +
         dims(out) + R"(, "dtype": "float32"}], "arg_nodes": [0], "heads": [4]})";
}

TEST(CompilerTest, ABatchedMatmulWithASharedWeightRunsAsOneTallerMatmul) {
  // (12, 1, 40) x (40, 24): twelve one-row matmuls are one 12-row matmul, so the weight streams
  // once per row tile instead of once per batch; the tiles, cycles and traffic equal the 2-D
  // form's, and the result equals the untiled reference.
  for (const NPUConfig& config : {NPUConfig(), Tiny()}) {
    const Program batched = Compile(ParseGraph(LinearOverBatches({12, 1, 40}, {24})), config);
    const Program flat = Compile(ParseGraph(LinearOverBatches({12, 40}, {24})), config);
    ASSERT_EQ(batched.groups.size(), 1u);
    EXPECT_EQ(batched.groups[0].tiles, flat.groups[0].tiles);
    const Profile batched_profile = Simulate(batched), flat_profile = Simulate(flat);
    EXPECT_EQ(batched_profile.total_cycles, flat_profile.total_cycles);
    EXPECT_EQ(batched_profile.bytes, flat_profile.bytes);
  }
}

TEST(CompilerTest, BatchedMatmulsComputeTheReferenceMergedOrNot) {
  // Merged: a per-column bias, and a side operand that steps through batches and rows as one
  // run. Not merged: a side operand broadcast across the rows of each batch.
  for (const auto& [lhs, side] : std::vector<std::pair<Shape, Shape>>{{{12, 1, 40}, {24}},
                                                                      {{3, 4, 40}, {3, 4, 24}},
                                                                      {{3, 4, 40}, {3, 1, 24}},
                                                                      {{2, 3, 2, 40}, {1, 24}}}) {
    ExpectTiledRunsMatchUntiled(ParseGraph(LinearOverBatches(lhs, side)), {NPUConfig(), Tiny()}, 7,
                                1e-4);
  }
}

TEST(MemoryPlannerTest, LiveScratchBuffersNeverOverlap) {
  Graph graph = ParseGraph(kConvNet);
  std::vector<FusedGroup> groups = FuseGraph(graph);
  LayoutPlan layout = PlanLayout(graph, groups);
  std::vector<TensorPlacement> placements;
  int64_t scratch = PlanDram(graph, groups, layout, &placements);
  // r1 (group 0 -> group 1) and p1 (group 1 -> group 2) overlap in group 1: disjoint bytes.
  const TensorPlacement& r1 = placements[5];
  const TensorPlacement& p1 = placements[6];
  ASSERT_EQ(r1.kind, TensorPlacement::Kind::kScratch);
  ASSERT_EQ(p1.kind, TensorPlacement::Kind::kScratch);
  const int64_t r1_bytes = 16 * 12 * 12 * 4, p1_bytes = 16 * 6 * 6 * 4;
  EXPECT_TRUE(r1.index + r1_bytes <= p1.index || p1.index + p1_bytes <= r1.index);
  EXPECT_LE(std::max(r1.index + r1_bytes, p1.index + p1_bytes), scratch);
  EXPECT_EQ(placements[8].kind, TensorPlacement::Kind::kOutput);
}

TEST(MemoryPlannerTest, BufferSlotsAreDisjointAndOversizeIsReported) {
  NPUConfig config = Tiny();
  BufferPlanResult fit = PlanBuffers({{1000, 2}, {500, 2}, {64, 1}}, config);
  ASSERT_TRUE(fit.ok) << fit.reason;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  const std::vector<int64_t> sizes = {1000, 500, 64};
  for (size_t c = 0; c < sizes.size(); ++c) {
    for (int64_t offset : fit.layout.l1_offsets[c]) ranges.push_back({offset, offset + sizes[c]});
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_LE(ranges[i - 1].second, ranges[i].first);
  EXPECT_LE(ranges.back().second, config.TierBytes(Tier::kL1));
  BufferPlanResult too_big = PlanBuffers({{3000, 2}}, config);
  EXPECT_FALSE(too_big.ok);
  EXPECT_NE(too_big.reason.find("L1"), std::string::npos);
}

TEST(SchedulerTest, DoubleBufferingOverlapsDmaWithCompute) {
  Program program = Compile(ParseGraph(kConvNet), Tiny());
  Profile profile = Simulate(program);
  int64_t busy = 0;
  for (int64_t cycles : profile.busy_cycles) busy += cycles;
  EXPECT_LT(profile.total_cycles, busy);  // engines and DMA ran at the same time
  // The next tile's load waits only for the slot's previous reader, not the current compute.
  const std::vector<Command>& commands = program.commands;
  int64_t loads_before_compute_end = 0;
  for (size_t i = 0; i < commands.size(); ++i) {
    if (commands[i].is_dma() || i + 1 >= commands.size()) continue;
    for (size_t j = i + 1; j < commands.size() && j < i + 4; ++j) {
      const Command& next = commands[j];
      if (next.is_dma() && !next.dma().store && next.group == commands[i].group &&
          std::find(next.deps.begin(), next.deps.end(), commands[i].id) == next.deps.end()) {
        ++loads_before_compute_end;
      }
    }
  }
  EXPECT_GT(loads_before_compute_end, 0);
}

TEST(SchedulerTest, UnfittableGroupIsAValueErrorNamingIt) {
  NPUConfig config;
  config.l1_sram_kb = 4;
  // A softmax row of 4096 floats (16 KB) cannot be split and does not fit 4 KB of L1.
  const char* graph = R"({"version": 1, "symbol": "s", "nodes": [
    {"op": "input", "name": "x", "shape": [2, 4096], "dtype": "float32"},
    {"op": "nn.softmax", "name": "y", "inputs": [0], "shape": [2, 4096], "dtype": "float32",
     "attrs": {"axis": 1}}], "arg_nodes": [0], "heads": [1]})";
  try {
    Compile(ParseGraph(graph), config);
    FAIL();
  } catch (const tvm::ffi::Error& err) {
    EXPECT_EQ(err.kind(), "ValueError");
    EXPECT_NE(std::string(err.message()).find("group y"), std::string::npos) << err.message();
  }
}

using kernels::test_util::ExpectValueError;

TEST(CompilerTest, DramAndTileLimitsAreValueErrorsBeforeAnythingIsEmitted) {
  Graph graph = ParseGraph(kConvNet);
  NPUConfig small;
  small.dram_mb = 1;
  EXPECT_NO_THROW(Compile(graph, small));  // about 20 KB of tensors
  // 3,037,000,500 x 3 floats: the issue's batch, which used to grow memory without bound.
  const char* huge = R"({"version": 1, "symbol": "h", "nodes": [
    {"op": "input", "name": "x", "shape": [3037000500, 3], "dtype": "float32"},
    {"op": "nn.relu", "name": "y", "inputs": [0], "shape": [3037000500, 3], "dtype": "float32"}],
    "arg_nodes": [0], "heads": [1]})";
  ExpectValueError([&] { Compile(ParseGraph(huge), NPUConfig()); }, "NPUConfig.dram_mb");
  NPUConfig few_tiles = Tiny();
  few_tiles.max_tiles = 4;
  ExpectValueError([&] { Compile(graph, few_tiles); }, "NPUConfig.max_tiles");
}

TEST(CompilerTest, EmptyResultsCompileToNothingAndRun) {
  // Issue 9: a zero-size dim made CountTiles divide by zero. TVM computes an empty result; so
  // does the NPU, with no tiles at all.
  const char* graph_json = R"({"version": 1, "symbol": "e", "nodes": [
    {"op": "input", "name": "x", "shape": [0, 4], "dtype": "float32"},
    {"op": "const", "name": "w", "shape": [4, 8], "dtype": "float32"},
    {"op": "matmul", "name": "m", "inputs": [0, 1], "shape": [0, 8], "dtype": "float32"},
    {"op": "nn.relu", "name": "r", "inputs": [2], "shape": [0, 8], "dtype": "float32"}],
    "arg_nodes": [0], "heads": [3]})";
  Graph graph = ParseGraph(graph_json);
  for (const NPUConfig& config : {NPUConfig(), Tiny()}) {
    const Program program = Compile(graph, config);
    EXPECT_TRUE(program.groups.empty());
    EXPECT_TRUE(program.commands.empty());
    std::vector<float> weights(32, 1.0f);
    EXPECT_TRUE(Emulated(program, {{}}, {weights}).empty());
    EXPECT_EQ(Simulate(program).total_cycles, 0);
  }
}

TEST(TilingTest, ClipWindowAlwaysAddsUpToTheWindowRange) {
  for (int64_t size : {1, 5, 17}) {
    for (int64_t first = -6; first <= size + 3; ++first) {
      for (int64_t last = first + 1; last <= first + 9; ++last) {
        const tiling::ClippedWindow w = tiling::ClipWindow(first, last, size);
        EXPECT_GE(w.pad_before, 0);
        EXPECT_GE(w.pad_after, 0);
        EXPECT_GE(w.extent, 0);
        EXPECT_GE(w.begin, 0);
        EXPECT_LE(w.begin + w.extent, size);
        EXPECT_EQ(w.pad_before + w.extent + w.pad_after, last - first)
            << first << ".." << last << " in " << size;
        EXPECT_EQ(w.extent,
                  std::max<int64_t>(0, std::min(last, size) - std::max<int64_t>(0, first)));
      }
    }
  }
}

TEST(CompilerTest, OneByOneNhwcConvWithPaddingWiderThanTheKernelMatchesTheUntiledReference) {
  // Issue 9: input 1x17x18x20, padding (2, 1, 2, 2), bias + relu stopped at an internal check,
  // because output tiles lying wholly in the padding got a negative-size window.
  const char* graph_json = R"({"version": 1, "symbol": "c", "nodes": [
    {"op": "input", "name": "x", "shape": [1, 17, 18, 20], "dtype": "float32"},
    {"op": "const", "name": "w", "shape": [1, 1, 20, 8], "dtype": "float32"},
    {"op": "const", "name": "b", "shape": [8], "dtype": "float32"},
    {"op": "nn.conv2d", "name": "y", "inputs": [0, 1], "shape": [1, 21, 21, 8], "dtype": "float32",
     "attrs": {"strides": [1, 1], "padding": [2, 1, 2, 2], "dilation": [1, 1], "groups": 1,
               "data_layout": "NHWC", "kernel_layout": "HWIO"}},
    {"op": "add", "name": "z", "inputs": [3, 2], "shape": [1, 21, 21, 8], "dtype": "float32"},
    {"op": "nn.relu", "name": "r", "inputs": [4], "shape": [1, 21, 21, 8], "dtype": "float32"}],
    "arg_nodes": [0], "heads": [5]})";
  ExpectTiledRunsMatchUntiled(ParseGraph(graph_json), {NPUConfig(), Tiny()}, 5, 1e-4);
}

TEST(CompilerTest, AGroupLargerThanL1IsSplitWithinTheGroupAndMatchesTheUntiledReference) {
  // wav2vec2's grouped positional conv in small: 4 groups of 16 -> 16 channels, 3x3 taps. One
  // group's weights (9.2 KB) do not fit Tiny()'s 4 KB L1; this failed with "the
  // smallest tile does not fit L1" before tiles could hold part of a group.
  const char* graph_json = R"({"version": 1, "symbol": "g", "nodes": [
    {"op": "input", "name": "x", "shape": [1, 64, 6, 20], "dtype": "float32"},
    {"op": "const", "name": "w", "shape": [64, 16, 3, 3], "dtype": "float32"},
    {"op": "nn.conv2d", "name": "y", "inputs": [0, 1], "shape": [1, 64, 6, 20],
     "dtype": "float32", "attrs": {"strides": [1, 1], "padding": [1, 1, 1, 1],
     "dilation": [1, 1], "groups": 4, "data_layout": "NCHW", "kernel_layout": "OIHW"}},
    {"op": "nn.relu", "name": "r", "inputs": [2], "shape": [1, 64, 6, 20], "dtype": "float32"}],
    "arg_nodes": [0], "heads": [3]})";
  ExpectTiledRunsMatchUntiled(ParseGraph(graph_json), {NPUConfig(), Tiny()}, 7, 1e-4,
                              [](const Program& program, const NPUConfig& config) {
                                for (const GroupInfo& group : program.groups) {
                                  EXPECT_LE(group.l1_bytes, config.TierBytes(Tier::kL1))
                                      << group.name;
                                }
                              });
}

TEST(CompilerTest, ASelectOfAComparisonTilesLikeTheUntiledReference) {
  // softplus as torch exports it, where(x > t, x, y), with a broadcast threshold and a per-column
  // fallback; the comparison's 0 / 1 mask joins the group of its producer.
  const char* graph_json = R"({"version": 1, "symbol": "select", "nodes": [
    {"op": "input", "name": "x", "shape": [1, 3, 6, 20], "dtype": "float32"},
    {"op": "const", "name": "t", "shape": [1, 1, 6, 1], "dtype": "float32"},
    {"op": "const", "name": "y", "shape": [20], "dtype": "float32"},
    {"op": "exp", "name": "e", "inputs": [0], "shape": [1, 3, 6, 20], "dtype": "float32"},
    {"op": "greater", "name": "c", "inputs": [3, 1], "shape": [1, 3, 6, 20], "dtype": "float32"},
    {"op": "where", "name": "w", "inputs": [4, 0, 2], "shape": [1, 3, 6, 20],
     "dtype": "float32"}],
    "arg_nodes": [0], "heads": [5]})";
  ExpectTiledRunsMatchUntiled(ParseGraph(graph_json), {NPUConfig(), Tiny()}, 9, 0.0);
}

TEST(TransferPlanTest, DramBoxIndexFindsExactlyWhatAFullScanFinds) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int64_t> coord(0, 12), extent(0, 5), pick(0, 3);
  const std::vector<std::vector<int64_t>> strides = {{60, 12, 1}, {60, 12, 1}, {1, 5, 60}};
  std::vector<DmaCommand> boxes(300);
  for (DmaCommand& dma : boxes) {
    dma.view.strides = strides[pick(rng) % 3];
    dma.box.begin = {coord(rng) % 4, coord(rng), coord(rng)};
    dma.box.extent = {1 + extent(rng) % 2, extent(rng), 1 + extent(rng)};
  }
  DramBoxIndex index;
  for (size_t i = 0; i < boxes.size(); ++i) {
    std::vector<int64_t> found;
    index.ForEachOverlap(boxes[i], [&](int64_t id) { found.push_back(id); });
    std::sort(found.begin(), found.end());
    std::vector<int64_t> scanned;
    for (size_t j = 0; j < i; ++j) {
      if (BoxesMayOverlap(boxes[j], boxes[i])) scanned.push_back(static_cast<int64_t>(j));
    }
    EXPECT_EQ(found, scanned) << "box " << i;
    index.Add(static_cast<int64_t>(i), &boxes[i]);
  }
}

}  // namespace
}  // namespace example_npu
