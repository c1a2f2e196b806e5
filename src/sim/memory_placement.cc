#include "sim/memory_placement.h"

#include <algorithm>

#include "kernels/kernels.h"
#include "support/checked_math.h"

namespace example_npu {
namespace {

int64_t TensorBytes(const Program& program, int64_t tensor) {
  const Node& node = program.graph.nodes[tensor];
  return kernels::NumElements(node.shape) * DTypeBytes(node.dtype);
}

/*! \brief Arena bytes of an intermediate that only the group after its producer reads: a
 * stripe of NPUConfig.cascade_stripe_rows rows of each image (a 4-D NHWC map) when the two
 * groups run as a cascade, else the whole tensor. */
int64_t CascadeBytes(const Program& program, int64_t tensor) {
  const int64_t rows = program.config.cascade_stripe_rows;
  const Shape& shape = program.graph.nodes[tensor].shape;
  const int64_t whole = TensorBytes(program, tensor);
  if (rows == 0 || shape.size() != 4 || shape[1] <= rows) return whole;
  return whole / shape[1] * rows;
}

/*! \brief The intermediates an arena of `arena` bytes holds. Each lives from the first group
 * that moves it to the last; taken in the order they are first written, one stays in the arena
 * when, at every group of its life, it fits beside those already kept, and goes to DRAM
 * otherwise (leaving the room to later ones): a capacity check over time, as Vela's allocator
 * makes, rather than the addresses of the reused DRAM scratch area. */
std::vector<bool> KeepIntermediates(const Program& program, int64_t arena) {
  const size_t count = program.placements.size();
  std::vector<int64_t> first(count, -1), last(count, -1);
  for (const Command& command : program.commands) {
    if (!command.is_dma() || command.dma().gather) continue;
    const int64_t tensor = command.dma().view.tensor;
    if (program.placements[tensor].kind != TensorPlacement::Kind::kScratch) continue;
    if (first[tensor] < 0) first[tensor] = command.group;
    last[tensor] = std::max(last[tensor], command.group);
  }
  std::vector<int64_t> order;
  for (size_t tensor = 0; tensor < count; ++tensor) {
    if (first[tensor] >= 0) order.push_back(static_cast<int64_t>(tensor));
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return first[a] < first[b]; });
  std::vector<int64_t> used(program.groups.size() + 1, 0);
  std::vector<bool> keep(count, false);
  for (int64_t tensor : order) {
    const int64_t bytes = last[tensor] == first[tensor] + 1 ? CascadeBytes(program, tensor)
                                                            : TensorBytes(program, tensor);
    const auto begin = used.begin() + first[tensor], end = used.begin() + last[tensor] + 1;
    if (checked::Add(*std::max_element(begin, end), bytes, "arena bytes") > arena) continue;
    for (auto it = begin; it != end; ++it) *it += bytes;
    keep[tensor] = true;
  }
  return keep;
}

}  // namespace

ArenaPlacement PlaceFeatureMaps(const Program& program) {
  const NPUConfig& config = program.config;
  const int64_t arena = config.sram_arena_kb * 1024;
  int64_t io_bytes = 0;
  for (size_t id = 0; id < program.placements.size(); ++id) {
    const TensorPlacement::Kind kind = program.placements[id].kind;
    if (kind != TensorPlacement::Kind::kInput && kind != TensorPlacement::Kind::kOutput) continue;
    const Node& node = program.graph.nodes[id];
    io_bytes = checked::Add(io_bytes, kernels::NumElements(node.shape) * DTypeBytes(node.dtype),
                            "feature map bytes");
  }
  ArenaPlacement placement;
  switch (config.feature_map_memory_kind()) {
    case FeatureMapMemory::kDram:
      break;
    case FeatureMapMemory::kSram:
      // Everything when it fits together; else the intermediates take the arena.
      placement.io =
          checked::Add(io_bytes, program.dram_scratch_bytes, "feature map bytes") <= arena;
      placement.intermediate = KeepIntermediates(program, arena);
      break;
    case FeatureMapMemory::kSramIntermediates:
      placement.intermediate = KeepIntermediates(program, arena);
      break;
  }
  return placement;
}

Remote RemoteOf(const Program& program, const ArenaPlacement& arena, const DmaCommand& dma) {
  if (!dma.store && dma.remote_tier == Tier::kL2) return Remote::kL2;
  switch (program.placements[dma.view.tensor].kind) {
    case TensorPlacement::Kind::kConst:
      return program.config.weight_memory_kind() == WeightMemory::kFlash ? Remote::kFlash
                                                                         : Remote::kDram;
    case TensorPlacement::Kind::kScratch:
      return !arena.intermediate.empty() && arena.intermediate[dma.view.tensor] ? Remote::kSram
                                                                                : Remote::kDram;
    case TensorPlacement::Kind::kInput:
    case TensorPlacement::Kind::kOutput:
      return arena.io ? Remote::kSram : Remote::kDram;
    case TensorPlacement::Kind::kNone:
      break;
  }
  return Remote::kDram;
}

Tier TierOf(Remote remote) {
  return remote == Remote::kDram || remote == Remote::kFlash ? Tier::kDram : Tier::kL2;
}

}  // namespace example_npu
