// The command stream's dependencies across groups: every pair of commands that touch the same
// bytes (on chip, or in DRAM) with at least one write is ordered, and groups overlap in time.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/compiler.h"
#include "sim/timing.h"

namespace example_npu {
namespace {

// conv3x3 -> maxpool -> conv3x3 -> maxpool -> conv1x1: the third group's output reuses the
// DRAM scratch of the first group's, and consecutive groups share L1 when they do not both fit.
const char* kChain = R"({"version": 1, "symbol": "chain", "nodes": [
  {"op": "input", "name": "x", "shape": [1, 16, 24, 24], "dtype": "float32"},
  {"op": "const", "name": "w1", "shape": [32, 16, 3, 3], "dtype": "float32"},
  {"op": "const", "name": "w2", "shape": [32, 32, 3, 3], "dtype": "float32"},
  {"op": "const", "name": "w3", "shape": [16, 32, 1, 1], "dtype": "float32"},
  {"op": "nn.conv2d", "name": "a", "inputs": [0, 1], "shape": [1, 32, 24, 24], "dtype": "float32",
   "attrs": {"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1,
             "data_layout": "NCHW", "kernel_layout": "OIHW"}},
  {"op": "nn.max_pool2d", "name": "b", "inputs": [4], "shape": [1, 32, 12, 12], "dtype": "float32",
   "attrs": {"pool_size": [2, 2], "strides": [2, 2], "dilation": [1, 1], "padding": [0, 0, 0, 0],
             "ceil_mode": false, "count_include_pad": false, "layout": "NCHW"}},
  {"op": "nn.conv2d", "name": "c", "inputs": [5, 2], "shape": [1, 32, 12, 12], "dtype": "float32",
   "attrs": {"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1,
             "data_layout": "NCHW", "kernel_layout": "OIHW"}},
  {"op": "nn.max_pool2d", "name": "d", "inputs": [6], "shape": [1, 32, 6, 6], "dtype": "float32",
   "attrs": {"pool_size": [2, 2], "strides": [2, 2], "dilation": [1, 1], "padding": [0, 0, 0, 0],
             "ceil_mode": false, "count_include_pad": false, "layout": "NCHW"}},
  {"op": "nn.conv2d", "name": "e", "inputs": [7, 3], "shape": [1, 16, 6, 6], "dtype": "float32",
   "attrs": {"strides": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": 1,
             "data_layout": "NCHW", "kernel_layout": "OIHW"}}],
  "arg_nodes": [0], "heads": [8]})";

// Four matmuls in a row: the third's result reuses the first's DRAM scratch, and its 16-wide tiles
// each span 16 rows of it, so a store overlaps many loads of the second matmul's tiles, most of
// them ordered through others (the slots those loads passed through).
const char* kMatmulChain = R"({"version": 1, "symbol": "mm", "nodes": [
  {"op": "input", "name": "x", "shape": [64, 96], "dtype": "float32"},
  {"op": "const", "name": "w1", "shape": [96, 96], "dtype": "float32"},
  {"op": "const", "name": "w2", "shape": [96, 96], "dtype": "float32"},
  {"op": "const", "name": "w3", "shape": [96, 96], "dtype": "float32"},
  {"op": "const", "name": "w4", "shape": [96, 96], "dtype": "float32"},
  {"op": "matmul", "name": "a", "inputs": [0, 1], "shape": [64, 96], "dtype": "float32"},
  {"op": "matmul", "name": "b", "inputs": [5, 2], "shape": [64, 96], "dtype": "float32"},
  {"op": "matmul", "name": "c", "inputs": [6, 3], "shape": [64, 96], "dtype": "float32"},
  {"op": "matmul", "name": "d", "inputs": [7, 4], "shape": [64, 96], "dtype": "float32"}],
  "arg_nodes": [0], "heads": [8]})";

NPUConfig WithL1(int64_t kb) {
  NPUConfig config;
  config.l1_sram_kb = kb;
  config.l2_cmx_kb = 2 * kb;
  return config;
}

/*! \brief Bytes [begin, end) of one memory: a tier, or one DRAM tensor placement. */
struct Span {
  std::string memory;
  int64_t begin = 0;
  int64_t end = 0;
  bool Overlaps(const Span& other) const {
    return memory == other.memory && begin < other.end && other.begin < end;
  }
};

Span OnChip(const TileRef& tile) {
  return Span{TierName(tile.tier), tile.offset,
              tile.offset + kernels::NumElements(tile.shape) * DTypeBytes(tile.dtype)};
}

/*! \brief The DRAM bytes a box of a strided view spans, from first to last element. */
Span InDram(const Program& program, const TensorView& view, const TensorBox& box) {
  const TensorPlacement& placement = program.placements[view.tensor];
  const bool scratch = placement.kind == TensorPlacement::Kind::kScratch;
  const int64_t item = DTypeBytes(program.graph.nodes[view.tensor].dtype);
  int64_t first = 0, last = 0;
  for (size_t d = 0; d < box.extent.size(); ++d) {
    first += box.begin[d] * view.strides[d];
    last += (box.begin[d] + box.extent[d] - 1) * view.strides[d];
  }
  const int64_t base = scratch ? placement.index : 0;
  const std::string memory = scratch ? "scratch"
                                     : "dram" + std::to_string(static_cast<int>(placement.kind)) +
                                           "." + std::to_string(placement.index);
  return Span{memory, base + first * item, base + (last + 1) * item};
}

struct Access {
  std::vector<Span> reads;
  std::vector<Span> writes;
};

Access Touches(const Program& program, const Command& command) {
  Access access;
  if (command.is_dma()) {
    const DmaCommand& dma = command.dma();
    if (dma.store) {
      access.reads.push_back(OnChip(dma.tile));
      access.writes.push_back(InDram(program, dma.view, dma.box));
    } else {
      if (dma.remote_tier == Tier::kL2) {
        // Anywhere in the staged copy: the staging command wrote all of it.
        const Node& tensor = program.graph.nodes[dma.view.tensor];
        access.reads.push_back(Span{
            "L2", dma.remote_offset,
            dma.remote_offset + kernels::NumElements(tensor.shape) * DTypeBytes(tensor.dtype)});
      } else {
        access.reads.push_back(InDram(program, dma.view, dma.box));
      }
      access.writes.push_back(OnChip(dma.tile));
    }
  } else {
    for (const TileRef& input : command.compute().inputs) access.reads.push_back(OnChip(input));
    if (command.compute().accumulate) access.reads.push_back(OnChip(command.compute().output));
    access.writes.push_back(OnChip(command.compute().output));
  }
  return access;
}

/*!
 * \brief Whether two commands touch common bytes, one of them writing. DRAM spans run from a
 * box's first to its last element, so within a group (whose tiles write disjoint, interleaved
 * boxes) only on-chip bytes count; the emulator orders a group's DRAM accesses by exact box.
 */
bool Conflict(const Access& a, const Access& b, bool same_group) {
  auto any = [same_group](const std::vector<Span>& x, const std::vector<Span>& y) {
    for (const Span& s : x) {
      for (const Span& t : y) {
        const bool on_chip = s.memory == "L1" || s.memory == "L2";
        if ((on_chip || !same_group) && s.Overlaps(t)) return true;
      }
    }
    return false;
  };
  return any(a.writes, b.writes) || any(a.writes, b.reads) || any(a.reads, b.writes);
}

TEST(TileSchedulerTest, EveryConflictingPairIsOrderedAcrossGroupsToo) {
  for (const auto& [graph, kb] : std::vector<std::pair<const char*, int64_t>>{{kChain, 4},
                                                                              {kChain, 16},
                                                                              {kChain, 64},
                                                                              {kChain, 256},
                                                                              {kMatmulChain, 4},
                                                                              {kMatmulChain, 16}}) {
    Program program = Compile(ParseGraph(graph), WithL1(kb));
    const std::vector<Command>& commands = program.commands;
    const size_t n = commands.size();
    std::vector<Access> touches;
    for (const Command& command : commands) touches.push_back(Touches(program, command));
    // reaches[j][i]: command j waits for command i, directly or through other commands.
    std::vector<std::vector<bool>> reaches(n, std::vector<bool>(n, false));
    int64_t cross_group = 0;
    for (size_t j = 0; j < n; ++j) {
      for (size_t i = 0; i < j && commands[j].after_earlier_groups; ++i) {
        reaches[j][i] = reaches[j][i] || commands[i].group < commands[j].group;
      }
      for (int64_t dep : commands[j].deps) {
        ASSERT_LT(dep, static_cast<int64_t>(j));
        reaches[j][dep] = true;
        for (size_t i = 0; i < n; ++i) {
          if (reaches[dep][i]) reaches[j][i] = true;
        }
        cross_group += commands[dep].group != commands[j].group;
      }
      for (size_t i = 0; i < j; ++i) {
        if (!Conflict(touches[i], touches[j], commands[i].group == commands[j].group)) continue;
        EXPECT_TRUE(reaches[j][i])
            << "L1 " << kb << " KB: command " << j << " (group " << commands[j].group
            << ") does not wait for command " << i << " (group " << commands[i].group << ")";
      }
    }
    EXPECT_GT(cross_group, 0) << "L1 " << kb << " KB";
  }
}

TEST(TileSchedulerTest, NoCommandListsTwoLoadsOfOneSlotOfAnEarlierGroup) {
  // The later load into a slot waits for the earlier one (through its readers), so waiting for
  // both says nothing more: DramHazards lists the latest use of each slot a command meets.
  for (const char* graph : {kChain, kMatmulChain}) {
    Program program = Compile(ParseGraph(graph), WithL1(4));
    int64_t cross_group_loads = 0;
    for (const Command& command : program.commands) {
      std::vector<std::pair<int64_t, int64_t>> slots;  // (group, L1 offset) of loads waited for
      for (int64_t dep : command.deps) {
        const Command& other = program.commands[dep];
        if (other.group == command.group || !other.is_dma() || other.dma().store) continue;
        if (other.dma().tile.tier != Tier::kL1) continue;
        slots.emplace_back(other.group, other.dma().tile.offset);
        ++cross_group_loads;
      }
      std::sort(slots.begin(), slots.end());
      EXPECT_EQ(std::adjacent_find(slots.begin(), slots.end()), slots.end())
          << "command " << command.id << " waits for two loads into one slot";
    }
    EXPECT_GT(cross_group_loads, 0);
  }
}

TEST(TileSchedulerTest, ConsecutiveGroupsAlternateEndsOfL1) {
  const NPUConfig config = WithL1(256);
  Program program = Compile(ParseGraph(kChain), config);
  ASSERT_GE(program.groups.size(), 3u);
  for (size_t g = 0; g < program.groups.size(); ++g) {
    const GroupInfo& group = program.groups[g];
    if (g % 2 == 0) {
      EXPECT_EQ(group.l1_base, 0) << group.name;
    } else {
      EXPECT_EQ(group.l1_base + group.l1_bytes, config.TierBytes(Tier::kL1)) << group.name;
    }
  }
}

TEST(TileSchedulerTest, AGroupLoadsWhileThePreviousOneComputes) {
  Program program = Compile(ParseGraph(kChain), WithL1(256));
  Profile profile = Simulate(program);
  int64_t overlapping = 0, spans = 0;
  for (size_t g = 0; g < profile.groups.size(); ++g) {
    spans += profile.groups[g].end - profile.groups[g].start;
    if (g > 0 && profile.groups[g].start < profile.groups[g - 1].end) ++overlapping;
  }
  EXPECT_GT(overlapping, 0);
  EXPECT_LT(profile.total_cycles, spans);
  // The first command of each later group that starts early is a load of a constant (weights),
  // which no earlier group writes.
  for (const TraceEvent& event : profile.events) {
    const Command& command = program.commands[event.command];
    if (command.group == 0 || event.start >= profile.groups[command.group - 1].end) continue;
    if (!command.is_dma()) continue;
    const TensorPlacement& placement = program.placements[command.dma().view.tensor];
    EXPECT_TRUE(placement.kind == TensorPlacement::Kind::kConst ||
                placement.kind == TensorPlacement::Kind::kInput ||
                command.dma().remote_tier == Tier::kL2 || command.dma().store)
        << "command " << command.id;
  }
}

}  // namespace
}  // namespace example_npu
