/*!
 * \file sim/emulator.h
 * \brief Executes a compiled program's command stream on emulated memories, for real.
 *
 * L1 and L2 are byte buffers of the configured capacity, DRAM is the caller's tensors plus a
 * scratch buffer; DMA commands move the actual bytes (strided boxes, layout changes, float16
 * narrowing on store) and compute commands run the kernels on tiles resident in L1, except for
 * transfers the transfer plan forwards (sim/transfer_plan.h), whose bytes the computes use where
 * they lie. Commands run on host threads in any order their dependencies allow (sim/dataflow.h);
 * every legal order computes the same bytes. Timing is not simulated here: see sim/timing.h.
 */
#ifndef EXAMPLE_NPU_SIM_EMULATOR_H_
#define EXAMPLE_NPU_SIM_EMULATOR_H_

#include <memory>
#include <mutex>
#include <vector>

#include "compiler/command_stream.h"
#include "kernels/cache_line_vector.h"
#include "kernels/weight_pack_cache.h"
#include "sim/dataflow.h"
#include "sim/fused_requantization.h"
#include "sim/merged_column_tiles.h"
#include "sim/merged_matmul_tiles.h"
#include "sim/transfer_plan.h"

namespace example_npu {

/*! \brief The DRAM-resident tensors of one run, in graph order (data pointers, byte offsets
 * already applied). */
struct DramBindings {
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  std::vector<const void*> constants;
  /*! \brief Changes whenever new constants are bound (even at the same addresses): the
   * emulator's arranged constant tiles are rebuilt when it or an address changes. */
  int64_t constants_version = 0;
};

class Memories;

struct EmulatorOptions {
  /*! \brief Forward contiguous transfers instead of copying them (see sim/transfer_plan.h). */
  bool forward_dma = true;
  /*! \brief Compute requantization steps inside the op steps before them (FusedRequantization). */
  bool fuse_requantize = true;
  /*! \brief The defaults, with EXAMPLE_NPU_FORWARD_DMA=0 in the environment turning forwarding
   * off (every transfer then moves its bytes through L1) and EXAMPLE_NPU_FUSE_REQUANTIZE=0 the
   * fused requantization (every step then runs on its own). */
  static EmulatorOptions FromEnvironment();
};

/*!
 * \brief Runs a compiled program on emulated memories. Built once per program (it analyses the
 * dataflow and keeps memories for reuse); Run() is thread-safe for runs with the same constants,
 * each call takes its own memories.
 */
class Emulator {
 public:
  /*! \brief `program` must outlive the emulator. */
  explicit Emulator(const Program& program, EmulatorOptions options = EmulatorOptions());
  ~Emulator();
  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;

  /*! \brief Runs every command of the program, group by group (see sim/dataflow.h). */
  void Run(const DramBindings& dram) const;

  const Dataflow& dataflow() const { return dataflow_; }
  const TransferPlan& transfers() const { return transfers_; }
  const FusedRequantization& fused_requantization() const { return fused_; }
  const MergedColumnTiles& merged_column_tiles() const { return merged_; }
  const MergedMatmulTiles& merged_matmul_tiles() const { return matmuls_; }

 private:
  std::unique_ptr<Memories> Acquire() const;
  void Release(std::unique_ptr<Memories> memories) const;

  /*! \brief The arena of arranged constant tiles (TransferPlan::arranged) for these constant
   * bindings, rebuilt when the constants' storage changes. Concurrent runs must share one set of
   * constants (as an Executor's runs do): a rebuild would move the arena under a running one. */
  const uint8_t* ConstArena(const DramBindings& dram) const;

  const Program& program_;
  TransferPlan transfers_;
  Dataflow dataflow_;
  FusedRequantization fused_;
  MergedColumnTiles merged_;
  MergedMatmulTiles matmuls_;
  /*! \brief Per command: whether a run performs it (not forwarded, folded or merged away). */
  std::vector<bool> performed_;
  int64_t l1_bytes_ = 0;
  int64_t l2_bytes_ = 0;
  // Memories of finished runs: reusing them saves allocating and zeroing SRAM on every call.
  mutable std::mutex pool_mu_;
  mutable std::vector<std::unique_ptr<Memories>> pool_;
  mutable std::mutex arena_mu_;
  mutable std::vector<const void*> arena_sources_;  // the constants the arena was built from
  mutable int64_t arena_version_ = 0;
  mutable kernels::CacheLineVector<uint8_t> arena_;
  // Constant int8 weights packed for the dot-product unit, cleared with the arena's constants.
  mutable kernels::WeightPackCache packed_weights_;
};

}  // namespace example_npu

#endif  // EXAMPLE_NPU_SIM_EMULATOR_H_
