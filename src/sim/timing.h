/*!
 * \file sim/timing.h
 * \brief Cycle and energy model of a compiled program: a scoreboard over engines and DMA.
 *
 * Each command has a cost (cycles on its resource, bytes per tier, energy). DMA commands need a
 * DMA channel and the port of the remote tier (DRAM or L2): occupancy is bytes / bandwidth and
 * completion adds the tier latency, so several outstanding transfers hide latency but never
 * exceed bandwidth. A command starts at the earliest time when its dependencies are done and its
 * resources have a free interval long enough, which is how double-buffered loads overlap
 * compute. Groups are ordered only by the dependencies the scheduler recorded between them, so a
 * group's first loads can run while the previous group computes.
 * Where the remote bytes live follows the NPUConfig: weights in DRAM or off-chip flash, feature
 * maps in DRAM or in the SRAM arena (when they fit), each memory on its own port with its own
 * bandwidth and latency; flash counts as DRAM (off-chip) traffic, the arena as L2 (on-chip).
 * Depthwise and elementwise work can occupy the MAC array's timeline instead of their own
 * units' (an NPU that runs one op at a time), and every group pays op_setup_cycles once.
 * Energy is MAC + vector-op + per-tier byte energy, scaled by (V / 0.9 V)^2 of the power mode.
 */
#ifndef EXAMPLE_NPU_SIM_TIMING_H_
#define EXAMPLE_NPU_SIM_TIMING_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/command_stream.h"

namespace example_npu {

constexpr int kNumTiers = 4;  // L0, L1, L2, DRAM (Tier order)
constexpr int kNumEngines = 5;

/*! \brief One command on its track, for traces. */
struct TraceEvent {
  int64_t command = 0;
  std::string track;
  int64_t start = 0;
  int64_t duration = 0;
};

/*! \brief Per fused group ("node" of the profile). */
struct GroupProfile {
  std::string name;
  std::vector<std::string> ops;
  Engine engine = Engine::kVector;
  int64_t tiles = 0;
  std::vector<int64_t> tile_shape;
  int64_t macs = 0;
  /*! \brief First command's start and last command's end; groups may overlap. */
  int64_t start = 0;
  int64_t end = 0;
  std::array<int64_t, kNumTiers> bytes{};
  double energy_pj = 0;
  int64_t l1_bytes = 0;  // this group's tile buffers (every slot of every buffer class)
  int64_t l2_bytes = 0;  // this group's weights staged in L2
};

struct Profile {
  std::string symbol;
  std::string power_mode;
  double clock_mhz = 0;
  int64_t total_cycles = 0;
  double energy_pj = 0;
  int64_t macs = 0;
  std::array<int64_t, kNumTiers> bytes{};
  std::array<int64_t, kNumEngines> busy_cycles{};
  // Memory used: the most L1 and L2 bytes in use at once (a group's tile buffers and staged
  // weights, and the next group's while the two overlap), and the DRAM scratch of the
  // intermediates between groups.
  int64_t l1_used_bytes = 0;
  int64_t l2_used_bytes = 0;
  int64_t dram_scratch_bytes = 0;
  std::vector<GroupProfile> groups;
  std::vector<TraceEvent> events;

  double latency_us() const { return total_cycles / clock_mhz; }
  /*! \brief JSON consumed by example_npu.profile (Python). */
  std::string ToJSON() const;
};

/*! \brief Schedules the command stream and returns its cycles, traffic and energy. */
Profile Simulate(const Program& program);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_SIM_TIMING_H_
