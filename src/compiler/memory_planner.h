/*!
 * \file compiler/memory_planner.h
 * \brief Memory planning: on-chip buffer offsets per group, DRAM offsets for intermediates.
 *
 * L1 holds a group's tile buffers (every slot of every buffer class, laid out back to back,
 * 64-byte aligned), at the bottom or, alternating, the top of the tier; staged weights go to L2.
 * Intermediates between groups live in DRAM scratch, where a tensor's bytes are reused once its
 * last reader group has run.
 */
#ifndef EXAMPLE_NPU_COMPILER_MEMORY_PLANNER_H_
#define EXAMPLE_NPU_COMPILER_MEMORY_PLANNER_H_

#include <string>
#include <vector>

#include "compiler/command_stream.h"
#include "compiler/fusion.h"
#include "compiler/layout.h"
#include "compiler/tile_scheduler.h"

namespace example_npu {

/*! \brief Lays out the slots of `classes`; ok=false with a reason when they exceed a tier. */
struct BufferPlanResult {
  bool ok = false;
  std::string reason;
  BufferLayout layout;
};
/*!
 * \brief Slots back to back from offset 0 upwards, or (`from_top`) mirrored from the top of each
 * tier downwards, first class highest. Consecutive groups alternate ends, so a group's first
 * loads land in bytes the previous group is not using when both fit together.
 */
BufferPlanResult PlanBuffers(const std::vector<BufferClass>& classes, const NPUConfig& config,
                             bool from_top = false);

/*!
 * \brief Places every tensor: inputs, outputs and constants where the caller keeps them,
 * materialised intermediates in DRAM scratch with liveness-based reuse (first-fit over the
 * interval of groups from producer to last reader). Returns the scratch size in bytes.
 */
int64_t PlanDram(const Graph& graph, const std::vector<FusedGroup>& groups,
                 const LayoutPlan& layout, std::vector<TensorPlacement>* placements);

/*!
 * \brief Throws ValueError when the DRAM the function needs (its inputs, constants and outputs
 * plus `scratch_bytes` of intermediates) exceeds NPUConfig.dram_mb. Runs before any tile or
 * command is planned and before the emulator allocates, so an oversized graph costs nothing.
 */
void CheckDramCapacity(const Graph& graph, const std::vector<TensorPlacement>& placements,
                       int64_t scratch_bytes, const NPUConfig& config);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_COMPILER_MEMORY_PLANNER_H_
