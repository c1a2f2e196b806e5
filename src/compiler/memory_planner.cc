#include "compiler/memory_planner.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <sstream>

#include "support/checked_math.h"
#include "support/json_input.h"

namespace example_npu {
namespace {

constexpr int64_t kAlign = 64;

int64_t AlignUp(int64_t bytes) {
  return checked::Add(bytes, kAlign - 1, "tensor byte size") / kAlign * kAlign;
}

int64_t TensorBytes(const Node& node) {
  return checked::Mul(kernels::NumElements(node.shape), DTypeBytes(node.dtype), "tensor bytes");
}

struct Interval {
  int64_t offset;
  int64_t bytes;
  int64_t first_group;
  int64_t last_group;
};

}  // namespace

BufferPlanResult PlanBuffers(const std::vector<BufferClass>& classes, const NPUConfig& config,
                             bool from_top) {
  BufferPlanResult result;
  int64_t l1 = 0, l2 = 0;
  for (const BufferClass& cls : classes) {
    std::vector<int64_t> offsets;
    for (int64_t slot = 0; slot < cls.slots; ++slot) {
      offsets.push_back(l1);
      l1 += AlignUp(cls.bytes);
    }
    result.layout.l1_offsets.push_back(offsets);
    result.layout.slot_bytes.push_back(AlignUp(cls.bytes));
    result.layout.l2_offsets.push_back(cls.staged_in_l2 ? l2 : -1);
    result.layout.l2_area_bytes.push_back(cls.staged_in_l2 ? AlignUp(cls.staged_tensor_bytes) : 0);
    l2 += result.layout.l2_area_bytes.back();
  }
  result.layout.l1_bytes = l1;
  result.layout.l2_bytes = l2;
  std::ostringstream reason;
  if (l1 > config.TierBytes(Tier::kL1)) {
    reason << "tile buffers need " << l1 << " bytes of L1, which has "
           << config.TierBytes(Tier::kL1);
  } else if (l2 > config.TierBytes(Tier::kL2)) {
    reason << "staged weights need " << l2 << " bytes of L2, which has "
           << config.TierBytes(Tier::kL2);
  }
  result.reason = reason.str();
  result.ok = result.reason.empty();
  if (result.ok && from_top) {
    // Mirror the layout: the first class ends at the top of the tier, growing downwards.
    result.layout.l1_base = config.TierBytes(Tier::kL1) - l1;
    result.layout.l2_base = l2 > 0 ? config.TierBytes(Tier::kL2) - l2 : 0;
    for (size_t c = 0; c < classes.size(); ++c) {
      for (int64_t& offset : result.layout.l1_offsets[c]) {
        offset = config.TierBytes(Tier::kL1) - offset - result.layout.slot_bytes[c];
      }
      int64_t& staged = result.layout.l2_offsets[c];
      if (staged >= 0) {
        staged = config.TierBytes(Tier::kL2) - staged - result.layout.l2_area_bytes[c];
      }
    }
  }
  return result;
}

int64_t PlanDram(const Graph& graph, const std::vector<FusedGroup>& groups,
                 const LayoutPlan& layout, std::vector<TensorPlacement>* placements) {
  const int64_t count = static_cast<int64_t>(graph.nodes.size());
  placements->assign(count, TensorPlacement{});
  for (int64_t id = 0; id < count; ++id) (*placements)[id].storage_order = layout.storage_order[id];
  for (size_t i = 0; i < graph.arg_nodes.size(); ++i) {
    (*placements)[graph.arg_nodes[i]].kind = TensorPlacement::Kind::kInput;
    (*placements)[graph.arg_nodes[i]].index = static_cast<int64_t>(i);
  }
  std::vector<int64_t> consts = graph.ConstNodes();
  for (size_t i = 0; i < consts.size(); ++i) {
    (*placements)[consts[i]].kind = TensorPlacement::Kind::kConst;
    (*placements)[consts[i]].index = static_cast<int64_t>(i);
  }
  // The first head naming an op node owns it; a node returned twice is copied by the runtime.
  for (size_t i = 0; i < graph.heads.size(); ++i) {
    TensorPlacement& placement = (*placements)[graph.heads[i]];
    if (graph.nodes[graph.heads[i]].kind == NodeKind::kOp &&
        placement.kind == TensorPlacement::Kind::kNone && !layout.is_view[graph.heads[i]]) {
      placement.kind = TensorPlacement::Kind::kOutput;
      placement.index = static_cast<int64_t>(i);
    }
  }
  // Liveness in group order: produced by its group, alive until the last group reading it
  // (directly or through a view).
  std::vector<int64_t> group_of(count, -1);
  for (size_t g = 0; g < groups.size(); ++g) {
    for (int64_t id : groups[g].Members()) group_of[id] = static_cast<int64_t>(g);
  }
  std::vector<int64_t> last_use(count, -1);
  for (int64_t id = count - 1; id >= 0; --id) {
    const Node& node = graph.nodes[id];
    if (node.kind != NodeKind::kOp) continue;
    const int64_t reader = layout.is_view[id] ? last_use[id] : group_of[id];
    for (int64_t input : node.inputs) last_use[input] = std::max(last_use[input], reader);
  }
  std::vector<Interval> live;
  int64_t scratch = 0;
  std::vector<std::pair<int64_t, int64_t>> stored;  // (group, node) in group order
  for (size_t g = 0; g < groups.size(); ++g) {
    stored.emplace_back(g, groups[g].output());
    if (groups[g].side_output >= 0) stored.emplace_back(g, groups[g].side_output);
  }
  for (const auto& [g, out] : stored) {
    TensorPlacement& placement = (*placements)[out];
    if (placement.kind != TensorPlacement::Kind::kNone || layout.is_view[out]) continue;
    const int64_t bytes = AlignUp(TensorBytes(graph.nodes[out]));
    // First fit among addresses not used by a tensor whose lifetime overlaps [g, last_use].
    const int64_t first = static_cast<int64_t>(g), last = std::max(first, last_use[out]);
    // Groups come in order: a tensor dead before this group is dead for every later one. Dropping
    // it keeps `live` short (a chain of groups was quadratic in its length).
    live.erase(std::remove_if(live.begin(), live.end(),
                              [&](const Interval& other) { return other.last_group < first; }),
               live.end());
    std::vector<Interval> overlapping;
    for (const Interval& other : live) {
      if (other.first_group <= last && first <= other.last_group) overlapping.push_back(other);
    }
    std::sort(overlapping.begin(), overlapping.end(),
              [](const Interval& a, const Interval& b) { return a.offset < b.offset; });
    int64_t offset = 0;
    for (const Interval& other : overlapping) {
      if (checked::Add(offset, bytes, "DRAM scratch") <= other.offset) break;
      offset = std::max(offset, other.offset + other.bytes);
    }
    placement.kind = TensorPlacement::Kind::kScratch;
    placement.index = offset;
    live.push_back(Interval{offset, bytes, first, last});
    scratch = std::max(scratch, checked::Add(offset, bytes, "DRAM scratch"));
  }
  return scratch;
}

void CheckDramCapacity(const Graph& graph, const std::vector<TensorPlacement>& placements,
                       int64_t scratch_bytes, const NPUConfig& config) {
  const char* what = "DRAM footprint";
  int64_t total = scratch_bytes;
  for (size_t id = 0; id < graph.nodes.size(); ++id) {
    const TensorPlacement::Kind kind = placements[id].kind;
    if (kind == TensorPlacement::Kind::kInput || kind == TensorPlacement::Kind::kConst ||
        kind == TensorPlacement::Kind::kOutput) {
      total = checked::Add(total, TensorBytes(graph.nodes[id]), what);
    }
  }
  if (total > config.TierBytes(Tier::kDram)) {
    TVM_FFI_THROW(ValueError) << "NPU function " << Printable(graph.symbol) << " needs " << total
                              << " bytes of DRAM (inputs, weights, outputs and " << scratch_bytes
                              << " bytes of intermediates), more than the " << config.dram_mb
                              << " MB of NPUConfig.dram_mb";
  }
}

}  // namespace example_npu
