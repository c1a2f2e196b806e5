/*!
 * \file sim/memory_placement.h
 * \brief Where a DMA's remote bytes live in the timing model: weights in DRAM or off-chip flash,
 * feature maps in DRAM or in the SRAM arena of NPUConfig.sram_arena_kb, placed once per program
 * as a compiler places a function's tensors before it runs; each memory has its own port.
 */
#ifndef EXAMPLE_NPU_SIM_MEMORY_PLACEMENT_H_
#define EXAMPLE_NPU_SIM_MEMORY_PLACEMENT_H_

#include <vector>

#include "compiler/command_stream.h"

namespace example_npu {

/*! \brief Where a DMA's remote bytes live; each has its own port. */
enum class Remote { kDram, kFlash, kSram, kL2 };
inline constexpr int kNumRemotes = 4;

/*! \brief Which feature maps the SRAM arena holds, decided once per program as a compiler places
 * a function's tensors before it runs: the inputs and outputs all or none, the intermediates one
 * by one (KeepIntermediates). */
struct ArenaPlacement {
  bool io = false;
  std::vector<bool> intermediate;  // [tensor]: an intermediate the arena holds
};

/*! \brief The feature maps the SRAM arena of `program.config` holds. */
ArenaPlacement PlaceFeatureMaps(const Program& program);

/*! \brief The memory whose port `dma` moves its remote bytes through. */
Remote RemoteOf(const Program& program, const ArenaPlacement& arena, const DmaCommand& dma);

/*! \brief Off-chip memories (DRAM, flash) count as DRAM traffic, the SRAM arena as L2's. */
Tier TierOf(Remote remote);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_SIM_MEMORY_PLACEMENT_H_
