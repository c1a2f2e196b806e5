/*!
 * \file sim/merged_matmul_tiles.h
 * \brief Which float32 matmul tiles the emulator computes as a few large GEMMs straight into
 * DRAM, before the rest of their group runs (planned once per program, after the transfer plan).
 *
 * A transformer's linear layer compiles to thousands of output tiles of 16 x 16 (ViT-B/16: 1,872
 * for one QKV projection), each a matmul step on operands read in place, a bias add and a store.
 * Per tile the host then spends about as long reading the three command records and dispatching
 * them as multiplying, and tile by tile the layer's weights stream from memory once per row
 * block. Where a tile's chain is exactly that (the matmul's result read only by the add, the
 * add's only by one store into DRAM that nothing else of the group reads), the chain commutes
 * with every other command of its group: its operands are DRAM the group does not write (or
 * tiles arranged when the group starts) and nothing of the group touches its output. So the
 * group's chains are computed when the group starts, stacked where they are the same columns of
 * the next rows and laid side by side where they are the next columns of the same rows (the
 * weight tiles as panels of one B), and their commands then do nothing. Where the compiler split
 * a tile's reduction, its partial products (the lhs rows read in place through their stride)
 * accumulate into the stored rows in the same order.
 * Host order only: every output is the same float (the same register-tile kernel, each sum a
 * multiply-add chain in order over k, the partial products and the add's operands in their
 * order), and the cycle model still counts every command (it reads the command stream).
 */
#ifndef EXAMPLE_NPU_SIM_MERGED_MATMUL_TILES_H_
#define EXAMPLE_NPU_SIM_MERGED_MATMUL_TILES_H_

#include <cstdint>
#include <vector>

#include "compiler/command_stream.h"
#include "sim/fused_requantization.h"
#include "sim/transfer_plan.h"

namespace example_npu {

struct MergedMatmulTiles {
  /*!
   * \brief One matmul step of a chain: out (+)= a x b, then (its last step) + addend. A chain
   * whose reduction the compiler split over steps accumulates into the same rows.
   */
  struct Step {
    /*! \brief The operands in place: a's rows `lda` elements apart, b's `ldb` apart; b one
     * matrix, or (panel_width > 0: adjacent tiles' steps as one) in panels of that many columns,
     * panel_stride elements apart (the dense weight tiles as the transfer plan arranged them). */
    DramRef a, b;
    int64_t lda = 0, ldb = 0;
    int64_t m = 0, k = 0, n = 0;
    int64_t panel_width = 0, panel_stride = 0;
    bool accumulate = false;
    /*! \brief The add's other operand (invalid: no add), its row stride (0: one row for all),
     * and whether it was the add's first operand. */
    DramRef addend;
    int64_t addend_row_stride = 0;
    bool addend_first = false;
    /*! \brief A relu or clip (the command that computes it on one tile) applied to the rows
     * after the add, or -1. */
    int64_t activation = -1;
    /*! \brief The stored rows: the first output element and the elements between rows. */
    DramRef out;
    int64_t out_row_stride = 0;
  };
  /*! \brief Chains of steps with disjoint outputs: each chain's steps run in order. */
  using Chains = std::vector<std::vector<Step>>;
  /*! \brief Per command: part of a chain its group computes when it starts (does nothing). */
  std::vector<bool> merged_away;
  /*! \brief Per group (Command::group): the chains computed when it starts, merged. */
  std::vector<Chains> at_group_start;
};

/*! \brief The chains of `program`'s float32 matmul tiles its groups compute when they start (see
 * the file comment); commands already folded into a fused requantization are passed over. */
MergedMatmulTiles PlanMergedMatmulTiles(const Program& program, const TransferPlan& plan,
                                        const FusedRequantization& fused);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_SIM_MERGED_MATMUL_TILES_H_
