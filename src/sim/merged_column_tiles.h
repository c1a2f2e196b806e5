/*!
 * \file sim/merged_column_tiles.h
 * \brief Which column tiles of a small quantized matmul the emulator computes with one kernel
 * call (planned once per program, after the fused requantization).
 *
 * The compiler splits a matmul's output columns over tiles the matrix engine takes in turn: a
 * fully connected layer at batch 1 (640 x 128) becomes eight tiles of 16 columns, each a weight
 * load, a multiply, a requantization and a store. Where the emulator computes each tile's
 * requantization inside its multiply and writes the integers straight into DRAM, the host work
 * of such a tile is a few hundred multiply-adds and all the fixed cost of a kernel call; the
 * tiles of one run (same rows of the same activation tile, adjacent columns of one constant
 * weight, adjacent output columns) are then computed by the last of them as one call over all
 * their columns, and the others do nothing. Host order only: the results are the same integers
 * (each column's sum and requantization are as before) and the cycle model still counts every
 * command (it reads the command stream).
 */
#ifndef EXAMPLE_NPU_SIM_MERGED_COLUMN_TILES_H_
#define EXAMPLE_NPU_SIM_MERGED_COLUMN_TILES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "compiler/command_stream.h"
#include "kernels/requantize_sums.h"
#include "sim/fused_requantization.h"
#include "sim/transfer_plan.h"

namespace example_npu {

struct MergedColumnTiles {
  /*! \brief One run of column tiles, computed when its last member runs. */
  struct Merge {
    /*! \brief The members' op commands, in stream order. */
    std::vector<int64_t> members;
    /*! \brief The first member's columns in the constant weight (row 0), and its row length. */
    DramRef weight;
    int64_t weight_stride = 0;
    /*! \brief All members' columns. */
    int64_t columns = 0;
    /*! \brief The members' requantizations, channels concatenated, and their tables. */
    std::unique_ptr<kernels::Requantization> requant;
    std::unique_ptr<kernels::PreparedRequantization> prepared;
  };
  /*! \brief Per command: the index in `merges` of the run it computes (its last member), or -1. */
  std::vector<int64_t> computes;
  /*! \brief Per command: an earlier member of a run, computed by the last one. */
  std::vector<bool> merged_away;
  std::vector<Merge> merges;
};

/*! \brief The runs of `program`'s column tiles to compute as one call (see the file comment). */
MergedColumnTiles PlanMergedColumnTiles(const Program& program, const TransferPlan& plan,
                                        const FusedRequantization& fused);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_SIM_MERGED_COLUMN_TILES_H_
