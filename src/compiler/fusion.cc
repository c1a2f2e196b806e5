#include "compiler/fusion.h"

#include <algorithm>
#include <variant>

namespace example_npu {

bool IsElementwise(OpKind op) {
  if (IsComparison(op)) return true;
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
    case OpKind::kRound:
    case OpKind::kFloor:
    case OpKind::kCeil:
    case OpKind::kPower:
    case OpKind::kBatchNorm:
    case OpKind::kLeakyRelu:
    case OpKind::kPrelu:
      return true;
    default:
      return false;
  }
}

std::vector<int64_t> FusedGroup::Members() const {
  std::vector<int64_t> members = {anchor};
  members.insert(members.end(), chain.begin(), chain.end());
  if (side_output >= 0) members.push_back(side_output);
  return members;
}

namespace {

/*! \brief Whether `b` is the indices of the same selection as the values topk `a`. */
bool TopkIndicesOf(const Node& a, const Node& b) {
  if (a.op != OpKind::kTopk || b.op != OpKind::kTopk || a.inputs != b.inputs) return false;
  const kernels::TopkParams& va = std::get<TopkAttrs>(a.attrs).params;
  const kernels::TopkParams& vb = std::get<TopkAttrs>(b.attrs).params;
  return !va.indices && vb.indices && va.axis == vb.axis && va.k == vb.k &&
         va.largest == vb.largest;
}

/*!
 * \brief Per-graph facts the chain search reads: consumers, outputs, and each node's position in
 * the chain being built (-1: not a member). Lookups are O(1), so a chain of thousands of ops
 * costs linear time.
 */
struct ChainSearch {
  explicit ChainSearch(const Graph& graph)
      : graph(graph),
        consumers(graph.nodes.size()),
        head(graph.nodes.size(), false),
        grouped(graph.nodes.size(), false),
        position(graph.nodes.size(), -1) {
    for (size_t id = 0; id < graph.nodes.size(); ++id) {
      for (int64_t input : graph.nodes[id].inputs) {
        // A node reading the same producer twice counts once: it is one consumer.
        std::vector<int64_t>& list = consumers[input];
        if (list.empty() || list.back() != static_cast<int64_t>(id)) list.push_back(id);
      }
    }
    for (int64_t id : graph.heads) head[id] = true;
  }

  /*!
   * \brief Whether node `id` is data that exists before any group runs or after an earlier one:
   * a graph input or constant, an earlier group's value, or a view of such data that the layout
   * never materialises (a non-output permute / slice / broadcast of ready data, or a reshape of
   * an input or constant, as a conv bias reshaped to (1, C, 1, 1)).
   */
  bool Ready(int64_t id) const {
    while (true) {  // along a chain of views, without recursion
      const Node& node = graph.nodes[id];
      if (node.kind != NodeKind::kOp || grouped[id]) return true;
      if (head[id]) return false;
      switch (node.op) {
        case OpKind::kPermuteDims:
        case OpKind::kStridedSlice:
        case OpKind::kBroadcastTo:
          id = node.inputs[0];
          continue;
        case OpKind::kReshape:
          return graph.nodes[node.inputs[0]].kind != NodeKind::kOp;
        default:
          return false;
      }
    }
  }

  /*!
   * \brief The first consumer of `tail` (the chain's latest value) that may extend the chain, or
   * -1. It is elementwise with the tail's shape and reads the tail once (batch_norm: as operand
   * 0); every other operand is a value on chip (an earlier member) or one an earlier group has
   * stored to DRAM.
   */
  int64_t ChainableConsumer(int64_t tail) const {
    if (head[tail]) return -1;
    for (int64_t next : consumers[tail]) {
      const Node& node = graph.nodes[next];
      if (grouped[next] || !IsElementwise(node.op) || node.shape != graph.nodes[tail].shape) {
        continue;
      }
      if (std::count(node.inputs.begin(), node.inputs.end(), tail) != 1) continue;
      if (node.op == OpKind::kBatchNorm && node.inputs[0] != tail) continue;
      bool operands_ready = true;
      for (int64_t input : node.inputs) {
        operands_ready &= input == tail || position[input] >= 0 || Ready(input);
      }
      if (operands_ready) return next;
    }
    return -1;
  }

  /*!
   * \brief The longest prefix of `members` (anchor first) that is a valid group: every member but
   * the last is read only inside the prefix (it is never stored) and is no graph output. A
   * prefix of length L is valid when each member k <= L - 2 is no output and its consumers all
   * sit before L, i.e. when the running maximum of those consumers' positions is below L.
   */
  size_t ValidPrefix(const std::vector<int64_t>& members) const {
    const int64_t outside = static_cast<int64_t>(members.size());  // "not in the chain"
    std::vector<int64_t> reach(members.size());  // max consumer position over members 0..k
    int64_t running = 0;
    for (size_t k = 0; k < members.size(); ++k) {
      int64_t furthest = head[members[k]] ? outside : 0;
      for (int64_t consumer : consumers[members[k]]) {
        furthest = std::max(furthest, position[consumer] >= 0 ? position[consumer] : outside);
      }
      running = std::max(running, furthest);
      reach[k] = running;
    }
    for (size_t length = members.size(); length > 1; --length) {
      if (reach[length - 2] < static_cast<int64_t>(length)) return length;
    }
    return 1;
  }

  const Graph& graph;
  std::vector<std::vector<int64_t>> consumers;
  std::vector<bool> head;
  std::vector<bool> grouped;
  std::vector<int64_t> position;
};

}  // namespace

std::vector<FusedGroup> FuseGraph(const Graph& graph) {
  const int64_t count = static_cast<int64_t>(graph.nodes.size());
  ChainSearch search(graph);
  std::vector<FusedGroup> groups;
  for (int64_t id = 0; id < count; ++id) {
    if (graph.nodes[id].kind != NodeKind::kOp || search.grouped[id]) continue;
    std::vector<int64_t> members = {id};
    search.grouped[id] = true;
    search.position[id] = 0;
    // Data movement is a view (see layout.h) or a DMA copy, which has no result tile to extend.
    if (!IsDataMovement(graph.nodes[id].op)) {
      for (int64_t next; (next = search.ChainableConsumer(members.back())) >= 0;) {
        search.position[next] = static_cast<int64_t>(members.size());
        members.push_back(next);
        search.grouped[next] = true;
      }
    }
    const size_t length = search.ValidPrefix(members);
    for (size_t k = length; k < members.size(); ++k) search.grouped[members[k]] = false;
    for (int64_t member : members) search.position[member] = -1;
    FusedGroup group;
    group.anchor = id;
    group.chain.assign(members.begin() + 1, members.begin() + length);
    // A topk's values and indices: one selection. The indices come later in node order and
    // read only the shared input, so computing them in this group is in order.
    if (graph.nodes[id].op == OpKind::kTopk) {
      for (int64_t sibling : search.consumers[graph.nodes[id].inputs[0]]) {
        if (sibling > id && !search.grouped[sibling] &&
            TopkIndicesOf(graph.nodes[id], graph.nodes[sibling])) {
          group.side_output = sibling;
          search.grouped[sibling] = true;
          break;
        }
      }
    }
    groups.push_back(group);
  }
  return groups;
}

}  // namespace example_npu
