#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "compiler/compiler.h"
#include "graph_test_util.h"
#include "sim/dataflow.h"
#include "sim/emulator.h"
#include "sim/transfer_plan.h"

namespace example_npu {
namespace {

// relu(x) + b with b broadcast over channels, then a layout change (NHWC output of a transpose):
// plain contiguous boxes for the elementwise group, strided ones for the transpose.
const char* kElementwise = R"({"version": 1, "symbol": "ew", "nodes": [
  {"op": "input", "name": "x", "shape": [2, 24, 20, 20], "dtype": "float32"},
  {"op": "const", "name": "b", "shape": [1, 24, 1, 1], "dtype": "float32"},
  {"op": "nn.relu", "name": "r", "inputs": [0], "shape": [2, 24, 20, 20], "dtype": "float32"},
  {"op": "add", "name": "a", "inputs": [2, 1], "shape": [2, 24, 20, 20], "dtype": "float32"},
  {"op": "nn.max_pool2d", "name": "p", "inputs": [3], "shape": [2, 24, 10, 10], "dtype": "float32",
   "attrs": {"pool_size": [2, 2], "strides": [2, 2], "dilation": [1, 1], "padding": [0, 0, 0, 0],
             "ceil_mode": false, "count_include_pad": false, "layout": "NCHW"}}],
  "arg_nodes": [0], "heads": [4, 3]})";

using test_util::SmallL1;

struct Outputs {
  std::vector<float> pooled;
  std::vector<float> sum;
};

Outputs Execute(const Emulator& emulator, const std::vector<float>& x,
                const std::vector<float>& b) {
  Outputs run{std::vector<float>(2 * 24 * 10 * 10, -1.0f), std::vector<float>(x.size(), -1.0f)};
  DramBindings dram;
  dram.inputs = {x.data()};
  dram.constants = {b.data()};
  dram.outputs = {run.pooled.data(), run.sum.data()};
  emulator.Run(dram);
  return run;
}

class EmulatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    x_.resize(2 * 24 * 20 * 20);
    b_.resize(24);
    for (float& v : x_) v = uniform(rng);
    for (float& v : b_) v = uniform(rng);
  }

  /*! \brief The numpy-style reference of kElementwise. */
  Outputs Reference() const {
    Outputs run{std::vector<float>(2 * 24 * 10 * 10), std::vector<float>(x_.size())};
    for (size_t i = 0; i < x_.size(); ++i) {
      run.sum[i] = std::max(x_[i], 0.0f) + b_[(i / 400) % 24];
    }
    for (int64_t plane = 0; plane < 48; ++plane) {
      for (int64_t h = 0; h < 10; ++h) {
        for (int64_t w = 0; w < 10; ++w) {
          const float* s = &run.sum[plane * 400 + 2 * h * 20 + 2 * w];
          run.pooled[plane * 100 + h * 10 + w] = std::max({s[0], s[1], s[20], s[21]});
        }
      }
    }
    return run;
  }

  std::vector<float> x_, b_;
};

TEST_F(EmulatorTest, ForwardedAndMaterialisedTransfersComputeTheSameBits) {
  for (const NPUConfig& config : {NPUConfig(), SmallL1()}) {
    const Program program = Compile(ParseGraph(kElementwise), config);
    const Emulator forwarding(program, EmulatorOptions{true});
    const Emulator copying(program, EmulatorOptions{false});
    EXPECT_GT(forwarding.transfers().forwarded(), 0);
    EXPECT_EQ(copying.transfers().forwarded(), 0);
    const Outputs expected = Reference();
    const Outputs forwarded = Execute(forwarding, x_, b_);
    const Outputs copied = Execute(copying, x_, b_);
    EXPECT_EQ(forwarded.sum, expected.sum);
    EXPECT_EQ(forwarded.pooled, expected.pooled);
    EXPECT_EQ(copied.sum, expected.sum);
    EXPECT_EQ(copied.pooled, expected.pooled);
  }
}

TEST_F(EmulatorTest, OnlyUnchangedDramTransfersAreForwarded) {
  const Program program = Compile(ParseGraph(kElementwise), SmallL1());
  const Emulator emulator(program);
  const TransferPlan& plan = emulator.transfers();
  for (const Command& command : program.commands) {
    if (command.is_dma() && plan.skipped[command.id]) {
      // Dense runs in this graph (no engine here takes strided views).
      EXPECT_TRUE(plan.copies[command.id].contiguous()) << "command " << command.id;
      EXPECT_TRUE(plan.copies[command.id].unchanged());
      EXPECT_EQ(command.dma().remote_tier, Tier::kDram);
    }
    if (!command.is_dma()) {
      // A forwarded input or result always points at a DRAM tensor of the graph.
      for (const DramRef& ref : plan.input_from[command.id]) {
        if (ref.valid()) EXPECT_LT(ref.tensor, static_cast<int64_t>(program.graph.nodes.size()));
      }
    }
  }
}

TEST_F(EmulatorTest, ConcurrentRunsAreDeterministic) {
  const Program program = Compile(ParseGraph(kElementwise), SmallL1());
  const Emulator emulator(program);
  bool any_concurrent = false;
  for (const GroupSchedule& group : emulator.dataflow().groups) {
    any_concurrent |= group.concurrent;
    EXPECT_FALSE(group.tile_starts.empty());
    EXPECT_EQ(group.tile_starts.front(), group.begin);
  }
  EXPECT_TRUE(any_concurrent);
  const Outputs first = Execute(emulator, x_, b_);
  for (int i = 0; i < 20; ++i) {
    const Outputs again = Execute(emulator, x_, b_);
    ASSERT_EQ(again.sum, first.sum) << "run " << i;
    ASSERT_EQ(again.pooled, first.pooled) << "run " << i;
  }
}

/*! \brief `count` values drawn uniformly from [-1, 1). */
std::vector<float> Uniform(size_t count, std::mt19937* rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = uniform(*rng);
  return values;
}

/*! \brief The `size` outputs of `emulator` run on input x and constant w. */
std::vector<float> EmulatedConv(const Emulator& emulator, const std::vector<float>& x,
                                const std::vector<float>& w, size_t size) {
  std::vector<float> out(size, 0.0f);
  DramBindings dram;
  dram.inputs = {x.data()};
  dram.constants = {w.data()};
  dram.outputs = {out.data()};
  emulator.Run(dram);
  return out;
}

/*! \brief An NHWC / HWIO float32 convolution of x [1, h, w, c] by a k x k kernel at stride 1
 * with `pad` on every side, `groups` groups and `out_c` output channels. */
std::string ConvGraph(int64_t h, int64_t w, int64_t c, int64_t k, int64_t pad, int64_t groups,
                      int64_t out_c) {
  const std::string oh = std::to_string(h + 2 * pad - k + 1),
                    ow = std::to_string(w + 2 * pad - k + 1);
  const std::string p = std::to_string(pad);
  return R"({"version": 1, "symbol": "conv", "nodes": [
    {"op": "input", "name": "x", "shape": [1, )" +
         std::to_string(h) + ", " + std::to_string(w) + ", " + std::to_string(c) +
         R"(], "dtype": "float32"},
    {"op": "const", "name": "w", "shape": [)" +
         std::to_string(k) + ", " + std::to_string(k) + ", " + std::to_string(c / groups) + ", " +
         std::to_string(out_c) + R"(], "dtype": "float32"},
    {"op": "nn.conv2d", "name": "c", "inputs": [0, 1], "shape": [1, )" +
         oh + ", " + ow + ", " + std::to_string(out_c) +
         R"(], "dtype": "float32", "attrs": {"strides": [1, 1], "padding": [)" + p + ", " + p +
         ", " + p + ", " + p + R"(], "dilation": [1, 1], "groups": )" + std::to_string(groups) +
         R"(, "data_layout": "NHWC", "kernel_layout": "HWIO"}}],
    "arg_nodes": [0], "heads": [2]})";
}

TEST(EmulatorStridedTest, DepthwiseTilesAreReadAndWrittenInPlaceWithTheSameBits) {
  std::mt19937 rng(5);
  const std::vector<float> x = Uniform(20 * 22 * 64, &rng), w = Uniform(9 * 64, &rng);
  for (const NPUConfig& config : {NPUConfig(), SmallL1()}) {
    // A depthwise convolution whose tiles are channel slices: strided boxes the vector engine
    // takes in place.
    const Program program = Compile(ParseGraph(ConvGraph(20, 22, 64, 3, 1, 64, 64)), config);
    std::vector<std::vector<float>> results;
    for (bool forward : {true, false}) {
      const Emulator emulator(program, EmulatorOptions{forward});
      bool strided = false;
      for (const DramRef& ref : emulator.transfers().output_to) strided |= ref.view >= 0;
      EXPECT_EQ(strided, forward);
      results.push_back(EmulatedConv(emulator, x, w, x.size()));
    }
    EXPECT_EQ(results[0], results[1]);
    // Spot-check against the definition (zero padding, HWIO weight).
    for (int64_t h : {0, 7, 19}) {
      for (int64_t wi : {0, 11, 21}) {
        for (int64_t c : {0, 33, 63}) {
          double acc = 0.0;
          for (int64_t kh = 0; kh < 3; ++kh) {
            for (int64_t kw = 0; kw < 3; ++kw) {
              const int64_t ih = h + kh - 1, iw = wi + kw - 1;
              if (ih < 0 || ih >= 20 || iw < 0 || iw >= 22) continue;
              acc += static_cast<double>(x[(ih * 22 + iw) * 64 + c]) * w[(kh * 3 + kw) * 64 + c];
            }
          }
          EXPECT_NEAR(results[0][(h * 22 + wi) * 64 + c], acc, 1e-5);
        }
      }
    }
  }
}

TEST(EmulatorStagingTest, StagingsNothingReadOnTheHostAreSkippedWithTheSameBits) {
  std::mt19937 rng(6);
  const std::vector<float> x = Uniform(14 * 14 * 96, &rng), w = Uniform(96 * 320, &rng);
  // A pointwise convolution whose weight the compiler stages in L2 for its pixel tiles.
  const Program program = Compile(ParseGraph(ConvGraph(14, 14, 96, 1, 0, 1, 320)), SmallL1());
  std::vector<int64_t> stagings;
  for (const Command& command : program.commands) {
    if (command.is_dma() && !command.dma().store && command.dma().tile.tier == Tier::kL2) {
      stagings.push_back(command.id);
    }
  }
  ASSERT_FALSE(stagings.empty());
  std::vector<std::vector<float>> results;
  for (bool forward : {true, false}) {
    const Emulator emulator(program, EmulatorOptions{forward});
    for (int64_t staging : stagings) {
      EXPECT_EQ(emulator.transfers().skipped[staging], forward) << "staging " << staging;
    }
    results.push_back(EmulatedConv(emulator, x, w, 14 * 14 * 320));
  }
  EXPECT_EQ(results[0], results[1]);
  for (int64_t p : {0, 97, 195}) {
    for (int64_t c : {0, 161, 319}) {
      double acc = 0.0;
      for (int64_t k = 0; k < 96; ++k) acc += static_cast<double>(x[p * 96 + k]) * w[k * 320 + c];
      EXPECT_NEAR(results[0][p * 320 + c], acc, 1e-4);
    }
  }
}

TEST_F(EmulatorTest, SeveralThreadsShareOneEmulator) {
  // Each thread runs its own inputs through the same emulator (its own memories per run, the
  // kernel pool busy or not) and must get exactly what a lone run gets.
  const Program program = Compile(ParseGraph(kElementwise), SmallL1());
  const Emulator emulator(program);
  constexpr int kThreads = 4;
  std::vector<std::vector<float>> inputs(kThreads, x_);
  std::vector<Outputs> expected;
  for (int t = 0; t < kThreads; ++t) {
    for (float& v : inputs[t]) v += static_cast<float>(t);
    expected.push_back(Execute(emulator, inputs[t], b_));
  }
  std::vector<Outputs> actual(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) actual[t] = Execute(emulator, inputs[t], b_);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(actual[t].sum, expected[t].sum) << "thread " << t;
    EXPECT_EQ(actual[t].pooled, expected[t].pooled) << "thread " << t;
  }
}

TEST(DataflowTest, DependenciesPointBackwardsWithinTheirGroup) {
  const Program program = Compile(ParseGraph(kElementwise), SmallL1());
  const Dataflow dataflow = AnalyzeDataflow(program, PlanTransfers(program, true));
  ASSERT_EQ(dataflow.groups.size(), program.groups.size());
  for (const GroupSchedule& group : dataflow.groups) {
    for (int64_t i = group.begin; i < group.end; ++i) {
      for (int64_t dep : dataflow.deps[i]) {
        EXPECT_GE(dep, group.begin);
        EXPECT_LT(dep, i);
      }
    }
  }
}

// conv + bias + relu: the bias is a side operand the chain loads after the matrix step.
const char* kConvBiasRelu = R"({"version": 1, "symbol": "cbr", "nodes": [
  {"op": "input", "name": "x", "shape": [1, 16, 24, 24], "dtype": "float32"},
  {"op": "const", "name": "w", "shape": [32, 16, 3, 3], "dtype": "float32"},
  {"op": "const", "name": "b", "shape": [1, 32, 1, 1], "dtype": "float32"},
  {"op": "nn.conv2d", "name": "c", "inputs": [0, 1], "shape": [1, 32, 24, 24], "dtype": "float32",
   "attrs": {"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1,
             "data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "NCHW"}},
  {"op": "add", "name": "a", "inputs": [3, 2], "shape": [1, 32, 24, 24], "dtype": "float32"},
  {"op": "nn.relu", "name": "r", "inputs": [4], "shape": [1, 32, 24, 24], "dtype": "float32"}],
  "arg_nodes": [0], "heads": [5]})";

TEST(DataflowTest, AFusedTileKeepsItsMatrixStepAndItsEpilogueTogether) {
  // A thread runs a tile's commands in order; if the side-operand load after the matrix step
  // began a tile of its own, the thread that took it would wait for the other thread's matrix
  // step every time, and two threads would be no faster than one.
  const Program program = Compile(ParseGraph(kConvBiasRelu), SmallL1());
  const Dataflow dataflow = AnalyzeDataflow(program, PlanTransfers(program, true));
  ASSERT_EQ(dataflow.groups.size(), 1u);
  const GroupSchedule& group = dataflow.groups.front();
  ASSERT_GE(group.tile_starts.size(), 2u);
  for (size_t t = 0; t < group.tile_starts.size(); ++t) {
    const int64_t end = t + 1 < group.tile_starts.size() ? group.tile_starts[t + 1] : group.end;
    int matrix = 0, stores = 0;
    for (int64_t i = group.tile_starts[t]; i < end; ++i) {
      const Command& command = program.commands[i];
      matrix += !command.is_dma() && command.compute().engine == Engine::kMatrix;
      stores += command.is_dma() && command.dma().store;
    }
    EXPECT_GE(matrix, 1) << "tile " << t;
    EXPECT_EQ(stores, 1) << "tile " << t;
  }
}

// A Linear layer whose weight (3 MiB) outgrows a core's cache: stream order would read all of it
// once per row of output tiles.
const char* kLinear = R"({"version": 1, "symbol": "fc", "nodes": [
  {"op": "input", "name": "x", "shape": [100, 768], "dtype": "float32"},
  {"op": "const", "name": "w", "shape": [768, 1024], "dtype": "float32"},
  {"op": "const", "name": "b", "shape": [1024], "dtype": "float32"},
  {"op": "matmul", "name": "m", "inputs": [0, 1], "shape": [100, 1024], "dtype": "float32"},
  {"op": "add", "name": "a", "inputs": [3, 2], "shape": [100, 1024], "dtype": "float32"}],
  "arg_nodes": [0], "heads": [4]})";

TEST(DataflowTest, TilesSharingALargeOperandRunBackToBackWithTheSameBits) {
  constexpr int64_t kRows = 100, kDepth = 768, kCols = 1024;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(kRows * kDepth), w(kDepth * kCols), b(kCols);
  for (std::vector<float>* v : {&x, &w, &b}) {
    for (float& e : *v) e = uniform(rng);
  }
  const Program program = Compile(ParseGraph(kLinear), NPUConfig());
  const Emulator reordering(program, EmulatorOptions{true});
  const Emulator streaming(program, EmulatorOptions{false});  // nothing read in place: no reorder
  const std::vector<GroupSchedule>& groups = reordering.dataflow().groups;
  const auto reordered = std::find_if(groups.begin(), groups.end(),
                                      [](const GroupSchedule& g) { return !g.tile_order.empty(); });
  ASSERT_NE(reordered, groups.end());
  for (const GroupSchedule& group : streaming.dataflow().groups)
    EXPECT_TRUE(group.tile_order.empty());
  // The claim order is a permutation of the tiles, and every dep runs earlier in it.
  const GroupSchedule& group = *reordered;
  std::vector<int64_t> sorted = group.tile_order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t t = 0; t < sorted.size(); ++t) ASSERT_EQ(sorted[t], static_cast<int64_t>(t));
  std::vector<int64_t> position(group.end - group.begin);
  int64_t next = 0;
  for (int64_t t : group.tile_order) {
    const int64_t end = t + 1 < static_cast<int64_t>(group.tile_starts.size())
                            ? group.tile_starts[t + 1]
                            : group.end;
    for (int64_t i = group.tile_starts[t]; i < end; ++i) position[i - group.begin] = next++;
  }
  for (int64_t i = group.begin; i < group.end; ++i) {
    for (int64_t dep : reordering.dataflow().deps[i]) {
      ASSERT_GE(dep, group.begin);
      EXPECT_LT(position[dep - group.begin], position[i - group.begin]) << "command " << i;
    }
  }
  // One thread runs the commands each emulator performs (not forwarded, fused or merged away),
  // each once, stream order or (a concurrent group) tile by tile in claim order (ListPerformed).
  int64_t performed_count = 0;
  for (const Emulator* emulator : {&reordering, &streaming}) {
    auto performed = [&](int64_t i) {
      return !emulator->transfers().skipped[i] && !emulator->fused_requantization().folded[i] &&
             !emulator->merged_column_tiles().merged_away[i] &&
             !emulator->merged_matmul_tiles().merged_away[i];
    };
    for (const GroupSchedule& g : emulator->dataflow().groups) {
      std::vector<int64_t> expected_order;
      for (size_t claim = 0; claim < (g.concurrent ? g.tile_starts.size() : 1); ++claim) {
        const size_t t = g.tile_order.empty() ? claim : g.tile_order[claim];
        const int64_t begin = g.concurrent ? g.tile_starts[t] : g.begin;
        const int64_t end =
            !g.concurrent || t + 1 == g.tile_starts.size() ? g.end : g.tile_starts[t + 1];
        for (int64_t i = begin; i < end; ++i) {
          if (performed(i)) expected_order.push_back(i);
        }
      }
      EXPECT_EQ(g.in_order, expected_order) << "group from " << g.begin;
      performed_count += static_cast<int64_t>(expected_order.size());
    }
  }
  EXPECT_GT(performed_count, 0);
  auto run = [&](const Emulator& emulator) {
    std::vector<float> y(kRows * kCols, -1.0f);
    DramBindings dram;
    dram.inputs = {x.data()};
    dram.constants = {w.data(), b.data()};
    dram.outputs = {y.data()};
    emulator.Run(dram);
    return y;
  };
  const std::vector<float> expected = run(streaming);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(run(reordering), expected) << "run " << i;
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kCols; ++c) {
      double sum = b[c];
      for (int64_t k = 0; k < kDepth; ++k) sum += double{x[r * kDepth + k]} * w[k * kCols + c];
      ASSERT_NEAR(expected[r * kCols + c], sum, 1e-3) << r << ", " << c;
    }
  }
}

}  // namespace
}  // namespace example_npu
