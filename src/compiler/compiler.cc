#include "compiler/compiler.h"

#include <tvm/ffi/error.h>

#include <algorithm>

#include "compiler/fusion.h"
#include "compiler/layout.h"
#include "compiler/memory_planner.h"
#include "compiler/tile_scheduler.h"
#include "compiler/tiling_planner.h"
#include "support/checked_math.h"
#include "support/json_input.h"

namespace example_npu {

Program Compile(const Graph& graph, const NPUConfig& config) {
  config.Validate();
  Program program;
  program.graph = graph;
  program.config = config;
  const Graph& g = program.graph;
  std::vector<FusedGroup> groups = FuseGraph(g);
  LayoutPlan layout = PlanLayout(g, groups);
  program.dram_scratch_bytes = PlanDram(g, groups, layout, &program.placements);
  CheckDramCapacity(g, program.placements, program.dram_scratch_bytes, config);
  // Every group is planned before any is emitted, so the command vector is sized once for the
  // whole stream: regrowing it moves every command emitted so far (10^5 of them for a ViT).
  struct PlannedGroup {
    std::unique_ptr<TilingRule> rule;
    std::vector<BufferClass> buffers;
    BufferLayout layout;
  };
  std::vector<PlannedGroup> planned;
  int64_t tiles = 0;
  int64_t expected_commands = 0;
  for (const FusedGroup& group : groups) {
    if (layout.is_view[group.anchor]) continue;  // read through strides, never materialised
    // An empty result: nothing to compute (validation refused empty operands of other results).
    if (kernels::NumElements(g.nodes[group.output()].shape) == 0) continue;
    std::unique_ptr<TilingRule> rule = MakeTilingRule(g, group, layout, config);
    TilePlan plan = rule->Plan();
    GroupInfo info;
    info.name = g.nodes[group.output()].name;
    info.nodes = group.Members();
    if (!plan.ok) {
      TVM_FFI_THROW(ValueError) << "NPU compiler: group " << Printable(info.name) << ": "
                                << plan.reason;
    }
    // Every op of the group runs on every tile: that many compute steps (and their loads) go
    // into the command stream. Checked before anything is emitted, so the limit bounds what
    // compiling costs.
    const int64_t op_tiles =
        checked::Mul(plan.tiles, static_cast<int64_t>(info.nodes.size()), "tile count");
    tiles = checked::Add(tiles, op_tiles, "tile count");
    if (tiles > config.max_tiles) {
      TVM_FFI_THROW(ValueError) << "NPU compiler: the function needs more than " << config.max_tiles
                                << " op tiles (NPUConfig.max_tiles); group " << Printable(info.name)
                                << " alone needs " << plan.tiles << " tiles x " << info.nodes.size()
                                << " ops";
    }
    // Alternate ends of L1 and L2, so a group can load while the previous one computes.
    const bool from_top = program.groups.size() % 2 == 1;
    BufferPlanResult buffers = PlanBuffers(plan.buffers, config, from_top);
    if (!buffers.ok) {
      TVM_FFI_THROW(ValueError) << "NPU compiler: group " << Printable(info.name) << ": "
                                << buffers.reason;
    }
    info.engine = plan.engine;
    info.tiles = plan.tiles;
    info.tile_shape = plan.tile_shape;
    info.l1_base = buffers.layout.l1_base;
    info.l1_bytes = buffers.layout.l1_bytes;
    info.l2_base = buffers.layout.l2_base;
    info.l2_bytes = buffers.layout.l2_bytes;
    // About a load per operand, a compute per op and a store per tile.
    expected_commands = checked::Add(
        expected_commands,
        checked::Mul(plan.tiles, static_cast<int64_t>(2 * info.nodes.size() + 2), "tile count"),
        "tile count");
    program.groups.push_back(std::move(info));
    planned.push_back(PlannedGroup{std::move(rule), std::move(plan.buffers), buffers.layout});
  }
  program.commands.reserve(expected_commands);
  TileScheduler scheduler(g, layout, &program);
  for (size_t i = 0; i < planned.size(); ++i) {
    scheduler.BeginGroup(static_cast<int64_t>(i), planned[i].buffers, planned[i].layout);
    planned[i].rule->Emit(&scheduler);
  }
  return program;
}

}  // namespace example_npu
