/*!
 * \file compiler/fusion.h
 * \brief Fusion: groups each anchor op with the elementwise ops that consume its result.
 *
 * A fused group runs as one tile loop: the anchor (matmul, convolution, pooling, softmax, ...)
 * produces an output tile in L1 and the chained elementwise ops (bias add, activation) are
 * applied to that tile before it is stored, so the intermediates never reach DRAM.
 */
#ifndef EXAMPLE_NPU_COMPILER_FUSION_H_
#define EXAMPLE_NPU_COMPILER_FUSION_H_

#include <cstdint>
#include <vector>

#include "graph/graph.h"

namespace example_npu {

struct FusedGroup {
  int64_t anchor = -1;
  /*!
   * \brief Elementwise ops applied in order to the anchor's output tile. A member may also read
   * an earlier member (x * sigmoid(x), hardswish's x * clip(x + 3) / 6): that value stays on chip.
   */
  std::vector<int64_t> chain;
  /*! \brief The node whose value the group stores (the last of the chain, or the anchor). */
  int64_t output() const { return chain.empty() ? anchor : chain.back(); }
  /*!
   * \brief A second node the group computes and stores, or -1: the indices of a topk anchor
   * that returns values (the same selection of the same rows, made and read once).
   */
  int64_t side_output = -1;
  /*! \brief The anchor, the chain members and the side output. */
  std::vector<int64_t> Members() const;
};

/*! \brief True for ops that map one output element to the same-index element of their input(s). */
bool IsElementwise(OpKind op);

/*!
 * \brief Partitions the op nodes into fused groups, in topological order. An elementwise consumer
 * of the chain's latest value joins when it has that value's shape and its other operands are
 * on chip (earlier members) or in DRAM (earlier groups); the chain is then cut back to where
 * every member but the last is read only inside the group and is no graph output.
 */
std::vector<FusedGroup> FuseGraph(const Graph& graph);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_COMPILER_FUSION_H_
