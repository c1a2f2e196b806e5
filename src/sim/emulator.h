/*!
 * \file sim/emulator.h
 * \brief Executes a compiled program's command stream on emulated memories, for real.
 *
 * L1 and L2 are byte buffers of the configured capacity, DRAM is the caller's tensors plus a
 * scratch buffer; DMA commands move the actual bytes (strided boxes, layout changes, float16
 * narrowing on store) and compute commands run the kernels on tiles resident in L1. Commands run
 * in stream order, which every dependency respects, so results equal any legal schedule.
 * Timing is not simulated here: see sim/timing.h.
 */
#ifndef EXAMPLE_NPU_SIM_EMULATOR_H_
#define EXAMPLE_NPU_SIM_EMULATOR_H_

#include <vector>

#include "compiler/command_stream.h"

namespace example_npu {

/*! \brief The DRAM-resident tensors of one run, in graph order (data pointers, byte offsets
 * already applied). */
struct DramBindings {
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  std::vector<const void*> constants;
};

/*! \brief Runs every command of `program`; thread-safe (each call owns its memories). */
void Emulate(const Program& program, const DramBindings& dram);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_SIM_EMULATOR_H_
