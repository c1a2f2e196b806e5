/*!
 * \file config/matrix_engine.h
 * \brief Cycles of the d x d systolic matrix engine, per fold, for both dataflows.
 *
 * A command gives the engine a block of work: `pixels` output rows (im2col rows of a
 * convolution, lhs rows of a matmul) by `channels` output columns, each reduced over `depth`
 * products. The array covers d of one dimension and d of another at a time (a fold) and pays
 * its pipeline fill and drain once per fold:
 *
 *   output stationary: a cell owns one output; a fold is d pixels x d channels, and the depth
 *     streams through the array skewed by one cycle per row and per column:
 *       ceil(P/d) * ceil(O/d) * (2d - 2 + depth * passes)
 *   weight stationary: a cell holds one weight; a fold is d depth x d channels, loaded in d
 *     cycles, then every pixel streams through and the partial sums ripple out:
 *       ceil(depth/d) * ceil(O/d) * (3d - 2 + P * passes)
 *
 *   block (a MAC array that works in blocks, like Arm's Ethos-U): each cycle computes
 *     mac_block_pixels x mac_block_channels outputs, each over mac_block_depth products, with
 *     no fill or drain (pipelined between blocks):
 *       ceil(P/bp) * ceil(O/bc) * taps * ceil(depth/taps/bd) * passes
 *     (a convolution reduces each kernel tap's input channels in blocks of bd, so a layer with
 *     few input channels leaves most of the block's depth idle)
 *
 * The first two are SCALE-Sim's stall-free per-fold costs with R = C = d (its 2R + C + P - 2 and
 * R + C + K - 2). A cell does one 8-bit multiply-accumulate per cycle, so a 16-bit operand takes
 * 2 passes over the streamed dimension and a 32-bit one 4; fill and drain do not repeat.
 * Grouped convolutions fold each group's channels separately (a fold's column shares one input
 * stream). The tiling planner and the timing model both cost commands with this function.
 */
#ifndef EXAMPLE_NPU_CONFIG_MATRIX_ENGINE_H_
#define EXAMPLE_NPU_CONFIG_MATRIX_ENGINE_H_

#include <cstdint>

#include "config/npu_config.h"

namespace example_npu {

/*! \brief One matrix-engine command's work (channels and depth are per group). */
struct MatrixWork {
  int64_t pixels = 0;
  /*! \brief Output channels of all groups together. */
  int64_t channels = 0;
  /*! \brief Products summed into each output. */
  int64_t depth = 0;
  int64_t groups = 1;
  /*! \brief Kernel taps of a convolution (depth = taps x input channels per group): the block
   * dataflow reduces each tap's channels in blocks of mac_block_depth. */
  int64_t taps = 1;
};

/*! \brief Passes over the streamed dimension per operand: 1 for 8-bit, 2 for 16-bit, 4 for
 * 32-bit types. */
int64_t MatrixPasses(DType dtype);

/*! \brief Folds of `work` on the configured array under the configured dataflow. */
int64_t MatrixFolds(const NPUConfig& config, const MatrixWork& work);

/*! \brief Cycles of `work` on operands of `dtype` (0 for empty work). */
int64_t MatrixEngineCycles(const NPUConfig& config, DType dtype, const MatrixWork& work);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_CONFIG_MATRIX_ENGINE_H_
