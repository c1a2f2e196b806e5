/*!
 * \file compiler/layout.h
 * \brief Layout: how each tensor is stored in DRAM and how consumers address it.
 *
 * Convolution and pooling engines work on NHWC tiles (channels innermost, one vector of
 * channels per pixel). An NCHW activation passed between such groups is stored NHWC, so only the
 * subgraph boundary pays for the conversion (a strided DMA with short bursts, which the cost
 * model charges). permute_dims and reshape that only feed other ops are never materialised:
 * their consumers read the source tensor through a strided view.
 */
#ifndef EXAMPLE_NPU_COMPILER_LAYOUT_H_
#define EXAMPLE_NPU_COMPILER_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "compiler/command_stream.h"
#include "compiler/fusion.h"
#include "graph/graph.h"

namespace example_npu {

struct LayoutPlan {
  /*! \brief Per node: storage order of its logical dims (outermost first). */
  std::vector<std::vector<int64_t>> storage_order;
  /*! \brief Per node: a permute_dims / reshape whose consumers read its source directly. */
  std::vector<bool> is_view;
  /*!
   * \brief Per node: how consumers address it, views resolved to the tensor that holds the data.
   * Resolved once, in node order (a chain of 20,000 views is no deeper than one).
   */
  std::vector<TensorView> views;

  const TensorView& ViewOf(int64_t id) const { return views[id]; }
  /*! \brief For a data-movement node: its value as a view of its input, materialised or not. */
  TensorView SourceView(const Graph& graph, int64_t id) const;
};

/*! \brief Row-major strides of a shape. */
std::vector<int64_t> ContiguousStrides(const Shape& shape);

/*! \brief True when an NCHW conv/pool group would run on NHWC tiles (see layout.cc). */
bool UsesNHWCTiles(const Graph& graph, const FusedGroup& group);

LayoutPlan PlanLayout(const Graph& graph, const std::vector<FusedGroup>& groups);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_COMPILER_LAYOUT_H_
