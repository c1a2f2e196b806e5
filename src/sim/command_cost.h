/*!
 * \file sim/command_cost.h
 * \brief What one command costs: cycles on its engine, latency, bytes per memory tier, energy.
 *
 * timing.cc places the commands on their engines' timelines with these costs: a DMA's in
 * dma_cost.cc (from where memory_placement.cc puts its remote bytes), a compute command's in
 * command_cost.cc.
 */
#ifndef EXAMPLE_NPU_SIM_COMMAND_COST_H_
#define EXAMPLE_NPU_SIM_COMMAND_COST_H_

#include <array>
#include <cstdint>

#include "compiler/command_stream.h"
#include "kernels/kernels.h"
#include "sim/timing.h"

namespace example_npu {
namespace command_cost {

// Cycles to decode and issue one command (descriptor fetch, address generation).
constexpr int64_t kIssueCycles = 4;

struct Cost {
  int64_t cycles = 0;   // occupancy of the engine / channel / port
  int64_t latency = 0;  // extra cycles until the result is usable (DMA)
  std::array<int64_t, kNumTiers> bytes{};
  double energy_pj = 0;
};

inline int TierIndex(Tier tier) { return static_cast<int>(tier); }

inline int64_t TileBytes(const TileRef& tile) {
  return kernels::NumElements(tile.shape) * DTypeBytes(tile.dtype);
}

/*! \brief The engine whose timeline `compute` occupies: NPUConfig.depthwise_engine and
 * elementwise_engine move vector and pooling work onto the MAC array's. Activations (and then
 * requantization) keep their unit, a pipeline stage after the array. */
Engine TimelineOf(const NPUConfig& config, const ComputeCommand& compute);

/*! \brief Cycles, bytes and energy of one compute command on its engine. */
Cost ComputeCost(const Program& program, const ComputeCommand& compute);

}  // namespace command_cost
}  // namespace example_npu

#endif  // EXAMPLE_NPU_SIM_COMMAND_COST_H_
