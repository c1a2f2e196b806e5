#include "compiler/layout.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <numeric>

#include "support/checked_math.h"

namespace example_npu {
namespace {

bool IsSpatialAnchor(OpKind op) {
  switch (op) {
    case OpKind::kConv2d:
    case OpKind::kMaxPool2d:
    case OpKind::kAvgPool2d:
    case OpKind::kQnnConv2d:
    case OpKind::kQnnConv2dTranspose:
    case OpKind::kQnnMaxPool2d:
    case OpKind::kQnnAvgPool2d:
    case OpKind::kConv2dTranspose:
    case OpKind::kResize2d:
    case OpKind::kAdaptiveAvgPool2d:
      return true;
    default:
      return false;
  }
}

bool IsNCHW(const Node& node) {
  if (const auto* conv = std::get_if<ConvAttrs>(&node.attrs)) {
    return conv->params.data_layout == kernels::DataLayout::kNCHW;
  }
  if (const auto* qnn_conv = std::get_if<QnnAttrs>(&node.attrs)) {
    if (node.op == OpKind::kQnnConv2dTranspose) {
      return qnn_conv->transposed.params.data_layout == kernels::DataLayout::kNCHW;
    }
    return node.op == OpKind::kQnnConv2d &&
           qnn_conv->conv.data_layout == kernels::DataLayout::kNCHW;
  }
  if (const auto* pool = std::get_if<PoolAttrs>(&node.attrs)) {
    return pool->params.layout == kernels::DataLayout::kNCHW;
  }
  if (const auto* qnn_pool = std::get_if<QnnPoolAttrs>(&node.attrs)) {
    return qnn_pool->params.pool.layout == kernels::DataLayout::kNCHW;
  }
  if (const auto* transposed = std::get_if<ConvTransposeAttrs>(&node.attrs)) {
    return transposed->params.data_layout == kernels::DataLayout::kNCHW;
  }
  if (const auto* resize = std::get_if<ResizeAttrs>(&node.attrs)) {
    return resize->params.layout == kernels::DataLayout::kNCHW;
  }
  if (const auto* adaptive = std::get_if<AdaptivePoolAttrs>(&node.attrs)) {
    return adaptive->params.layout == kernels::DataLayout::kNCHW;
  }
  return false;
}

/*! \brief Storage strides of a tensor stored with `order` (outermost logical dim first). */
std::vector<int64_t> OrderedStrides(const Shape& shape, const std::vector<int64_t>& order) {
  std::vector<int64_t> strides(shape.size(), 0);
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= shape[*it];
  }
  return strides;
}

bool IsContiguous(const TensorView& view) {
  // Size-1 dims may carry any stride (a slice of one row, a broadcast unit dim).
  const std::vector<int64_t> dense = ContiguousStrides(view.shape);
  for (size_t d = 0; d < dense.size(); ++d) {
    if (view.shape[d] != 1 && view.strides[d] != dense[d]) return false;
  }
  return true;
}

}  // namespace

std::vector<int64_t> ContiguousStrides(const Shape& shape) {
  std::vector<int64_t> order(shape.size());
  std::iota(order.begin(), order.end(), 0);
  return OrderedStrides(shape, order);
}

bool UsesNHWCTiles(const Graph& graph, const FusedGroup& group) {
  const Node& anchor = graph.nodes[group.anchor];
  return IsSpatialAnchor(anchor.op) && IsNCHW(anchor);
}

TensorView LayoutPlan::SourceView(const Graph& graph, int64_t id) const {
  const Node& node = graph.nodes[id];
  const TensorView& source = ViewOf(node.inputs[0]);
  TensorView view{source.tensor, node.shape, {}, source.offset};
  switch (node.op) {
    case OpKind::kPermuteDims:
      for (int64_t axis : std::get<PermuteDimsAttrs>(node.attrs).axes) {
        view.strides.push_back(source.strides[axis]);
      }
      return view;
    case OpKind::kStridedSlice: {
      const SliceAttrs& slice = std::get<SliceAttrs>(node.attrs);
      for (size_t d = 0; d < source.strides.size(); ++d) {
        view.offset = checked::Add(view.offset,
                                   checked::Mul(slice.begin[d], source.strides[d], "view offset"),
                                   "view offset");
        view.strides.push_back(checked::Mul(slice.step[d], source.strides[d], "view stride"));
      }
      return view;
    }
    case OpKind::kBroadcastTo: {
      // numpy alignment at the trailing dim; new and size-1 source dims repeat (stride 0).
      const size_t pad = node.shape.size() - source.shape.size();
      view.strides.assign(node.shape.size(), 0);
      for (size_t d = 0; d < source.shape.size(); ++d) {
        if (source.shape[d] != 1) view.strides[pad + d] = source.strides[d];
      }
      return view;
    }
    default:
      TVM_FFI_ICHECK(node.op == OpKind::kReshape && IsContiguous(source))
          << "node " << node.name << " is not expressible as a view";
      view.strides = ContiguousStrides(node.shape);
      return view;
  }
}

LayoutPlan PlanLayout(const Graph& graph, const std::vector<FusedGroup>& groups) {
  const size_t count = graph.nodes.size();
  LayoutPlan plan;
  plan.storage_order.resize(count);
  plan.is_view.assign(count, false);
  for (size_t id = 0; id < count; ++id) {
    plan.storage_order[id].resize(graph.nodes[id].shape.size());
    std::iota(plan.storage_order[id].begin(), plan.storage_order[id].end(), 0);
  }
  std::vector<int64_t> group_of(count, -1);
  for (size_t g = 0; g < groups.size(); ++g) {
    for (int64_t id : groups[g].Members()) group_of[id] = static_cast<int64_t>(g);
  }
  std::vector<bool> is_head(count, false);
  for (int64_t head : graph.heads) is_head[head] = true;
  // Per node: (consumer, operand index) of every op that reads it.
  std::vector<std::vector<std::pair<int64_t, size_t>>> consumers(count);
  for (size_t id = 0; id < count; ++id) {
    const Node& node = graph.nodes[id];
    if (node.kind != NodeKind::kOp) continue;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      consumers[node.inputs[k]].emplace_back(static_cast<int64_t>(id), k);
    }
  }
  // Boundary layout conversions: an NCHW result of a spatial group whose every consumer is the
  // data operand of another NCHW spatial group stays in NHWC between them.
  for (const FusedGroup& group : groups) {
    int64_t out = group.output();
    if (!UsesNHWCTiles(graph, group) || is_head[out] || consumers[out].empty()) continue;
    bool all_nhwc_consumers = true;
    for (const auto& [id, k] : consumers[out]) {
      const FusedGroup& consumer_group = groups[group_of[id]];
      bool data_operand = consumer_group.anchor == id && k == 0;
      all_nhwc_consumers &= data_operand && UsesNHWCTiles(graph, consumer_group);
    }
    if (all_nhwc_consumers) plan.storage_order[out] = {0, 2, 3, 1};
  }
  // Views: data movement read by other ops only (reshape needs a contiguous source; concat
  // and take are always materialised, each input copied into its slice). Inputs come before their
  // consumers, so each node's view is resolved from its input's, already resolved.
  plan.views.resize(count);
  for (size_t id = 0; id < count; ++id) {
    const Node& node = graph.nodes[id];
    if (node.kind == NodeKind::kOp && !is_head[id]) {
      if (node.op == OpKind::kReshape) {
        plan.is_view[id] = IsContiguous(plan.ViewOf(node.inputs[0]));
      } else {
        plan.is_view[id] =
            IsDataMovement(node.op) && node.op != OpKind::kConcat && node.op != OpKind::kTake;
      }
    }
    plan.views[id] = plan.is_view[id]
                         ? plan.SourceView(graph, static_cast<int64_t>(id))
                         : TensorView{static_cast<int64_t>(id), node.shape,
                                      OrderedStrides(node.shape, plan.storage_order[id])};
  }
  return plan;
}

}  // namespace example_npu
