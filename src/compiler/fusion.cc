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
    case OpKind::kSqrt:
    case OpKind::kRsqrt:
    case OpKind::kExp:
    case OpKind::kLog:
    case OpKind::kErf:
    case OpKind::kAbs:
    case OpKind::kNegative:
    case OpKind::kPower:
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

bool Contains(const std::vector<int64_t>& ids, int64_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

/*!
 * \brief Whether node `id` is data that exists before any group runs or after an earlier one:
 * a graph input or constant, an earlier group's value, or a view of such data that the layout
 * never materialises (a non-output permute / slice / broadcast of ready data, or a reshape of an
 * input or constant, as a conv bias reshaped to (1, C, 1, 1)).
 */
bool Ready(const Graph& graph, const std::vector<bool>& grouped, int64_t id) {
  const Node& node = graph.nodes[id];
  if (node.kind != NodeKind::kOp || grouped[id]) return true;
  if (IsHead(graph, id)) return false;
  switch (node.op) {
    case OpKind::kPermuteDims:
    case OpKind::kStridedSlice:
    case OpKind::kBroadcastTo:
      return Ready(graph, grouped, node.inputs[0]);
    case OpKind::kReshape:
      return graph.nodes[node.inputs[0]].kind != NodeKind::kOp;
    default:
      return false;
  }
}

/*!
 * \brief The first consumer of `tail` (the chain's latest value) that may extend the chain, or -1.
 * It is elementwise with the tail's shape and reads the tail once (batch_norm: as operand 0);
 * every other operand is a value on chip (an earlier member of `members`) or one an earlier
 * group has stored to DRAM.
 */
int64_t ChainableConsumer(const Graph& graph, const std::vector<std::vector<int64_t>>& consumers,
                          const std::vector<bool>& grouped, const std::vector<int64_t>& members,
                          int64_t tail) {
  if (IsHead(graph, tail)) return -1;
  for (int64_t next : consumers[tail]) {
    const Node& node = graph.nodes[next];
    if (grouped[next] || !IsElementwise(node.op) || node.shape != graph.nodes[tail].shape) continue;
    if (std::count(node.inputs.begin(), node.inputs.end(), tail) != 1) continue;
    if (node.op == OpKind::kBatchNorm && node.inputs[0] != tail) continue;
    bool operands_ready = true;
    for (int64_t input : node.inputs) {
      const bool on_chip = Contains(members, input);
      const bool in_dram = Ready(graph, grouped, input);
      operands_ready &= input == tail || on_chip || in_dram;
    }
    if (operands_ready) return next;
  }
  return -1;
}

/*!
 * \brief The longest prefix of `members` (anchor first) that is a valid group: every member but
 * the last is read only inside the prefix (it is never stored) and is no graph output.
 */
size_t ValidPrefix(const Graph& graph, const std::vector<std::vector<int64_t>>& consumers,
                   const std::vector<int64_t>& members) {
  for (size_t length = members.size(); length > 1; --length) {
    const std::vector<int64_t> prefix(members.begin(), members.begin() + length);
    bool valid = true;
    for (size_t k = 0; k + 1 < length && valid; ++k) {
      valid = !IsHead(graph, prefix[k]);
      for (int64_t consumer : consumers[prefix[k]]) valid &= Contains(prefix, consumer);
    }
    if (valid) return length;
  }
  return 1;
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
    std::vector<int64_t> members = {id};
    grouped[id] = true;
    // Data movement is a view (see layout.h) or a DMA copy, which has no result tile to extend.
    if (!IsDataMovement(graph.nodes[id].op)) {
      for (int64_t next;
           (next = ChainableConsumer(graph, consumers, grouped, members, members.back())) >= 0;) {
        members.push_back(next);
        grouped[next] = true;
      }
    }
    const size_t length = ValidPrefix(graph, consumers, members);
    for (size_t k = length; k < members.size(); ++k) grouped[members[k]] = false;
    FusedGroup group;
    group.anchor = id;
    group.chain.assign(members.begin() + 1, members.begin() + length);
    groups.push_back(group);
  }
  return groups;
}

}  // namespace example_npu
