/*!
 * \file sim/dataflow.h
 * \brief The dependency graph the emulator executes: which commands may run at the same time.
 *
 * The emulator derives the hazards itself from what each command touches once the transfer plan
 * is known: on-chip buffers (L1 slots, L2 staging areas) by tier and offset, DRAM tensors by box,
 * and nothing for forwarded transfers. Groups are separated by a barrier (each group lays out L1
 * afresh). A group whose dependency graph has little parallelism (one long chain of partial
 * sums, say) runs in stream order instead, so its kernels can use the host threads themselves.
 * A concurrent group of independent tiles may run them grouped by a large operand they read in
 * place (a weight's column tiles), so each of its tiles comes from memory once.
 */
#ifndef EXAMPLE_NPU_SIM_DATAFLOW_H_
#define EXAMPLE_NPU_SIM_DATAFLOW_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "compiler/command_stream.h"
#include "sim/transfer_plan.h"

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
  /*!
   * \brief The order the threads claim tiles in (indices into tile_starts), or empty for stream
   * order. Set only when no tile reads another tile's results (nor overwrites them outside L1),
   * so any order computes the same bits; `deps` then follow this order (see TileOrder in
   * dataflow.cc). Host execution only: the cycle model reads the command stream.
   */
  std::vector<int64_t> tile_order;
  /*!
   * \brief The commands one thread runs, in the order it runs them (stream order, or a
   * concurrent group's tiles in tile_order), less those the emulator leaves out (forwarded,
   * fused, merged): see ListPerformed.
   */
  std::vector<int64_t> in_order;
};

struct Dataflow {
  /*! \brief Per command: every command of its group it must wait for (earlier in the order the
   * group runs: stream order, or its tile_order), sorted. */
  std::vector<std::vector<int64_t>> deps;
  std::vector<GroupSchedule> groups;
};

/*!
 * \brief The read/write dependencies of every command under `plan`, and per group whether
 * concurrent execution pays: it does when the total work is at least `min_speedup` times the
 * work on the critical path.
 */
Dataflow AnalyzeDataflow(const Program& program, const TransferPlan& plan,
                         double min_speedup = 1.5);

/*!
 * \brief Fills every group's in_order with the commands i where performed[i], after the groups'
 * `concurrent` flags are final.
 */
void ListPerformed(const std::vector<bool>& performed, Dataflow* dataflow);

/*!
 * \brief Runs execute(i) for every command of `group`'s in_order on one thread, or, for a
 * concurrent group with several threads, for every command of the group, tile by tile on up to
 * kernels::MaxThreads() threads, each command after all of its deps. An exception from execute
 * stops the group and is rethrown once every thread has stopped.
 */
void RunGroup(const Dataflow& dataflow, const GroupSchedule& group,
              const std::function<void(int64_t)>& execute);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_SIM_DATAFLOW_H_
