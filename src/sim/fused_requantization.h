/*!
 * \file sim/fused_requantization.h
 * \brief Which requantization steps the emulator computes inside the quantized op step before
 * them, and where their results go (planned once per program, as the transfer plan is).
 */
#ifndef EXAMPLE_NPU_SIM_FUSED_REQUANTIZATION_H_
#define EXAMPLE_NPU_SIM_FUSED_REQUANTIZATION_H_

#include <cstdint>
#include <vector>

#include "compiler/command_stream.h"
#include "kernels/requantize_sums.h"
#include "sim/transfer_plan.h"

namespace example_npu {

/*!
 * \brief Requantization steps the emulator computes inside the quantized op step just before
 * them, from the op's int32 sums (kernels/requantize_sums.h), where they requantize that step's
 * whole result in place and nothing else reads its accumulators: the same numbers without the
 * tile of int64 accumulators. Where only stores into an 8- or 16-bit integer tensor read the
 * requantized tile, it holds those integers instead of floats and the stores copy them as they
 * are (re-planned in the transfer plan); one store of a dense run is forwarded as the transfer
 * plan forwards float results (the step writes into DRAM). Timing still counts every command (it
 * reads the command stream).
 */
struct FusedRequantization {
  /*! \brief A requantization step and its tables, prepared once. */
  struct Step {
    int64_t command;
    kernels::PreparedRequantization prepared;
    /*! \brief What the requantized tile holds. */
    kernels::SumsType type = kernels::SumsType::kFloat32;
    /*! \brief Where its integers are written instead of the tile, its one store forwarded, and
     * the elements between their pixels there. */
    DramRef dram;
    int64_t dram_pixel_stride = 0;
  };
  /*! \brief Per command: the index in `steps` of the requantization computed with it, or -1. */
  std::vector<int64_t> with;
  /*! \brief Per command: computed with the step before it, so not run on its own. */
  std::vector<bool> folded;
  std::vector<Step> steps;
};

/*!
 * \brief The requantization steps of `program` the emulator fuses (none unless `fuse`); the
 * stores of those that hold output integers are re-planned in `plan` (and forwarded only when
 * `forward`, as the plan's own transfers are).
 */
FusedRequantization PlanFusedRequantization(const Program& program, TransferPlan* plan, bool fuse,
                                            bool forward);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_SIM_FUSED_REQUANTIZATION_H_
