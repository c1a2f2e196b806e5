#include "compiler/fusion.h"

#include <algorithm>

namespace example_npu {

bool IsElementwise(OpKind op) {
  switch (op) {
    case OpKind::kAdd:
    case OpKind::kSubtract:
    case OpKind::kMultiply:
    case OpKind::kDivide:
    case OpKind::kMaximum:
    case OpKind::kMinimum:
    case OpKind::kRelu:
    case OpKind::kClip:
    case OpKind::kSigmoid:
    case OpKind::kTanh:
    case OpKind::kGelu:
    case OpKind::kGeluTanh:
    case OpKind::kBatchNorm:
      return true;
    default:
      return false;
  }
}

namespace {

bool IsHead(const Graph& graph, int64_t id) {
  return std::find(graph.heads.begin(), graph.heads.end(), id) != graph.heads.end();
}

/*! \brief The single consumer of `id` that may extend the chain ending at `id`, or -1. */
int64_t ChainableConsumer(const Graph& graph, const std::vector<std::vector<int64_t>>& consumers,
                          const std::vector<bool>& grouped, int64_t id) {
  if (consumers[id].size() != 1 || IsHead(graph, id)) return -1;
  const int64_t next = consumers[id][0];
  const Node& node = graph.nodes[next];
  if (!IsElementwise(node.op) || node.shape != graph.nodes[id].shape) return -1;
  // The chain value must be operand 0 for batch_norm and appear exactly once for the others.
  int64_t uses = std::count(node.inputs.begin(), node.inputs.end(), id);
  if (uses != 1) return -1;
  if (node.op == OpKind::kBatchNorm && node.inputs[0] != id) return -1;
  // Side operands are read from DRAM, so they must be computed by an earlier group.
  for (int64_t input : node.inputs) {
    if (input != id && graph.nodes[input].kind == NodeKind::kOp && !grouped[input]) return -1;
  }
  return next;
}

}  // namespace

std::vector<FusedGroup> FuseGraph(const Graph& graph) {
  const int64_t count = static_cast<int64_t>(graph.nodes.size());
  std::vector<std::vector<int64_t>> consumers(count);
  for (int64_t id = 0; id < count; ++id) {
    for (int64_t input : graph.nodes[id].inputs) {
      // A node reading the same producer twice counts once: it is one consumer.
      auto& list = consumers[input];
      if (std::find(list.begin(), list.end(), id) == list.end()) list.push_back(id);
    }
  }
  std::vector<bool> grouped(count, false);
  std::vector<FusedGroup> groups;
  for (int64_t id = 0; id < count; ++id) {
    if (graph.nodes[id].kind != NodeKind::kOp || grouped[id]) continue;
    FusedGroup group;
    group.anchor = id;
    grouped[id] = true;
    // Data movement is a view (see layout.h) or a DMA copy, which has no result tile to extend.
    if (!IsDataMovement(graph.nodes[id].op)) {
      for (int64_t tail = id, next;
           (next = ChainableConsumer(graph, consumers, grouped, tail)) >= 0;) {
        group.chain.push_back(next);
        grouped[next] = true;
        tail = next;
      }
    }
    groups.push_back(group);
  }
  return groups;
}

}  // namespace example_npu
