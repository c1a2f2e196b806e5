/*!
 * \file sim/dataflow.h
 * \brief The dependency graph the emulator executes: which commands may run at the same time.
 *
 * The compiler records the on-chip hazards of each group (L1 slot reuse, L2 staging). The
 * emulator adds what it needs to run commands on several host threads: read/write hazards on
 * DRAM tensors inside a group, and a barrier between groups (each group lays out L1 afresh).
 * A group whose dependency graph has little parallelism (one long chain of partial sums, say)
 * runs in stream order instead, so its kernels can use the host threads themselves.
 */
#ifndef EXAMPLE_NPU_SIM_DATAFLOW_H_
#define EXAMPLE_NPU_SIM_DATAFLOW_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "compiler/command_stream.h"

namespace example_npu {

/*! \brief The commands [begin, end) of one group and how the emulator runs them. */
struct GroupSchedule {
  int64_t begin = 0;
  int64_t end = 0;
  /*! \brief Run commands concurrently along `deps` (else one by one, in stream order). */
  bool concurrent = false;
  /*!
   * \brief Where each tile's commands start: its loads, computes and stores run on one thread,
   * so the tile stays in that core's cache.
   */
  std::vector<int64_t> tile_starts;
};

struct Dataflow {
  /*! \brief Per command: every earlier command of its group it must wait for, sorted. */
  std::vector<std::vector<int64_t>> deps;
  std::vector<GroupSchedule> groups;
};

/*!
 * \brief Completes the program's dependencies with DRAM hazards and decides per group whether
 * concurrent execution pays: it does when the total work is at least `min_speedup` times the
 * work on the critical path.
 */
Dataflow AnalyzeDataflow(const Program& program, double min_speedup = 1.5);

/*!
 * \brief Runs execute(i) for every command of `group`: in stream order, or, for a concurrent
 * group, tile by tile on up to kernels::MaxThreads() threads, each command after all of its deps.
 * An exception from execute stops the group and is rethrown once every thread has stopped.
 */
void RunGroup(const Dataflow& dataflow, const GroupSchedule& group,
              const std::function<void(int64_t)>& execute);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_SIM_DATAFLOW_H_
