/*!
 * \file graph/node_checks.h
 * \brief Errors that name the node they concern, axis normalisation and image sizes, for the
 * graph's validation (validate.cc) and shape inference (shape_inference.cc).
 */
#ifndef EXAMPLE_NPU_GRAPH_NODE_CHECKS_H_
#define EXAMPLE_NPU_GRAPH_NODE_CHECKS_H_

#include <tvm/ffi/error.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "kernels/kernels.h"
#include "support/json_input.h"

namespace example_npu {
namespace node_checks {

inline std::string Where(const Node& node) {
  return "node " + Printable(node.name) + " (" + OpKindName(node.op) + ")";
}

inline void ExpectRank(const Node& node, const Shape& shape, size_t rank, const char* what) {
  if (shape.size() != rank) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": " << what << " must have rank " << rank
                              << ", got shape " << ShapeText(shape);
  }
}

inline int64_t NormalizeAxis(int64_t axis, size_t rank, const std::string& what) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    TVM_FFI_THROW(ValueError) << what << ": axis " << axis << " is out of range for rank " << r;
  }
  return axis < 0 ? axis + r : axis;
}

/*! \brief Distinct axes normalised to [0, rank), sorted. */
inline std::vector<int64_t> NormalizedSet(std::vector<int64_t> axes, size_t rank,
                                          const std::string& what) {
  for (int64_t& axis : axes) axis = NormalizeAxis(axis, rank, what);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) {
    TVM_FFI_THROW(ValueError) << what << ": repeated axis";
  }
  return axes;
}

/*! \brief {H, W} of a 4-D NCHW / NHWC shape. */
inline std::array<int64_t, 2> ImageSize(const Shape& shape, kernels::DataLayout layout) {
  const bool nchw = layout == kernels::DataLayout::kNCHW;
  return {nchw ? shape[2] : shape[1], nchw ? shape[3] : shape[2]};
}

}  // namespace node_checks
}  // namespace example_npu

#endif  // EXAMPLE_NPU_GRAPH_NODE_CHECKS_H_
