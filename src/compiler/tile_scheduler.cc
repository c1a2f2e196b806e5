#include "compiler/tile_scheduler.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <numeric>
#include <utility>

namespace example_npu {
namespace {

// DRAM and CMX move whole bursts: a strided run shorter than this still costs a full burst.
constexpr int64_t kBurstBytes = 32;

std::vector<int64_t> BoxKey(const TensorView& view, const TensorBox& box) {
  std::vector<int64_t> key = {view.tensor, view.offset};
  key.insert(key.end(), view.strides.begin(), view.strides.end());
  key.insert(key.end(), box.begin.begin(), box.begin.end());
  key.insert(key.end(), box.extent.begin(), box.extent.end());
  key.insert(key.end(), box.tile_order.begin(), box.tile_order.end());
  return key;
}

Shape TileShape(const TensorBox& box) {
  Shape shape;
  for (int64_t axis : box.tile_order) shape.push_back(box.extent[axis]);
  return shape;
}

}  // namespace

TileScheduler::TileScheduler(const Graph& graph, const LayoutPlan& layout, Program* program)
    : graph_(graph), layout_(layout), program_(program) {}

void TileScheduler::BeginGroup(int64_t group, const std::vector<BufferClass>& classes,
                               const BufferLayout& buffers) {
  RetireGroup();
  group_ = group;
  classes_ = classes;
  slots_.assign(classes.size(), {});
  next_slot_.assign(classes.size(), 0);
  l2_offsets_ = buffers.l2_offsets;
  l2_area_bytes_ = buffers.l2_area_bytes;
  l2_stage_command_.assign(classes.size(), -1);
  l2_readers_.assign(classes.size(), {});
  for (size_t c = 0; c < classes.size(); ++c) {
    for (int64_t offset : buffers.l1_offsets[c]) {
      Slot slot;
      slot.offset = offset;
      slot.bytes = buffers.slot_bytes[c];
      slot.chain = chains_++;
      slots_[c].push_back(slot);
    }
  }
  slot_at_offset_.clear();
  for (auto& cls : slots_) {
    for (Slot& slot : cls) slot_at_offset_[slot.offset] = &slot;
  }
}

void TileScheduler::RetireGroup() {
  for (size_t c = 0; c < slots_.size(); ++c) {
    for (const Slot& slot : slots_[c]) {
      if (slot.fresh) continue;  // never written: whatever was there before still counts
      earlier_on_chip_.push_back(
          OnChipUse{Tier::kL1, slot.offset, slot.offset + slot.bytes, slot.writer, slot.readers});
    }
    if (l2_stage_command_[c] >= 0) {
      const int64_t begin = l2_offsets_[c];
      earlier_on_chip_.push_back(OnChipUse{Tier::kL2, begin, begin + l2_area_bytes_[c],
                                           l2_stage_command_[c], l2_readers_[c]});
    }
  }
  dram_.BeginGroup();
}

void TileScheduler::AfterEarlierOnChip(Command* command, Tier tier, int64_t begin, int64_t end) {
  auto kept = earlier_on_chip_.begin();
  for (OnChipUse& use : earlier_on_chip_) {
    const bool overlaps = use.tier == tier && use.begin < end && begin < use.end;
    if (overlaps) {
      if (use.writer >= 0) command->deps.push_back(use.writer);
      command->deps.insert(command->deps.end(), use.readers.begin(), use.readers.end());
    }
    // A use inside the new write's bytes is ordered before it, and so before everything that
    // will wait for this write: it need not be tracked any more.
    if (overlaps && begin <= use.begin && use.end <= end) continue;
    if (&*kept != &use) *kept = std::move(use);
    ++kept;
  }
  earlier_on_chip_.erase(kept, earlier_on_chip_.end());
}

TileScheduler::DramRange TileScheduler::DramRangeOf(const TensorView& view,
                                                    const TensorBox& box) const {
  const TensorPlacement& placement = program_->placements[view.tensor];
  const bool scratch = placement.kind == TensorPlacement::Kind::kScratch;
  DramRange range;
  range.space = {static_cast<int>(placement.kind), scratch ? 0 : placement.index};
  const int64_t item = DTypeBytes(graph_.nodes[view.tensor].dtype);
  int64_t first = 0, last = 0;
  for (size_t d = 0; d < box.extent.size(); ++d) {
    if (box.extent[d] <= 0) return range;  // empty: touches nothing
    first += box.begin[d] * view.strides[d];
    last += (box.begin[d] + box.extent[d] - 1) * view.strides[d];
  }
  const int64_t base = scratch ? placement.index : 0;
  range.begin = base + first * item;
  range.end = base + (last + 1) * item;
  return range;
}

void TileScheduler::OrderDram(Command* command, const DramRange& range, bool store) {
  if (!dram_.Order(range.space, range.begin, range.end, store, &command->deps)) {
    command->after_earlier_groups = true;
  }
}

TileScheduler::Slot& TileScheduler::SlotAt(const TileRef& tile) {
  // A map, not a scan: a group fusing a long elementwise chain has thousands of slots.
  auto it = slot_at_offset_.find(tile.offset);
  TVM_FFI_ICHECK(it != slot_at_offset_.end()) << "no L1 slot at offset " << tile.offset;
  return *it->second;
}

int64_t TileScheduler::Append(Command command) {
  command.id = static_cast<int64_t>(program_->commands.size());
  command.group = group_;
  std::vector<int64_t>& deps = command.deps;
  if (!std::is_sorted(deps.begin(), deps.end())) std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  program_->commands.push_back(std::move(command));
  return program_->commands.back().id;
}

void TileScheduler::AddDeps(Command* command, Slot* slot, bool writes) {
  if (slot->writer >= 0) command->deps.push_back(slot->writer);
  if (!writes) return;
  command->deps.insert(command->deps.end(), slot->readers.begin(), slot->readers.end());
  if (slot->fresh) {
    AfterEarlierOnChip(command, Tier::kL1, slot->offset, slot->offset + slot->bytes);
    slot->fresh = false;
  }
}

int64_t BusBytes(const TensorView& view, const TensorBox& box, DType dtype) {
  // Broadcast dims (stride 0) re-read the same bytes: the DMA fetches them once.
  std::vector<size_t> dims;
  int64_t elements = 1;
  for (size_t d = 0; d < box.extent.size(); ++d) {
    if (view.strides[d] == 0) continue;
    dims.push_back(d);
    elements *= box.extent[d];
  }
  std::sort(dims.begin(), dims.end(),
            [&](size_t a, size_t b) { return view.strides[a] < view.strides[b]; });
  int64_t run = 1;
  int64_t expected_stride = 1;
  for (size_t d : dims) {
    if (box.extent[d] == 1) continue;
    if (view.strides[d] != expected_stride) break;
    run *= box.extent[d];
    expected_stride = view.strides[d] * box.extent[d];
  }
  const int64_t run_bytes = run * DTypeBytes(dtype);
  const int64_t bursts = (run_bytes + kBurstBytes - 1) / kBurstBytes;
  return (elements / std::max<int64_t>(run, 1)) * bursts * kBurstBytes;
}

TileRef TileScheduler::Load(int64_t cls, const TensorView& view, const TensorBox& box) {
  const DType dtype = graph_.nodes[view.tensor].dtype;
  std::vector<int64_t> key = BoxKey(view, box);
  for (Slot& slot : slots_[cls]) {
    if (slot.key == key) return TileRef{Tier::kL1, slot.offset, TileShape(box), dtype};
  }
  Command command;
  DmaCommand& dma = command.dma();
  dma.box = box;
  dma.view = view;
  if (classes_[cls].staged_in_l2) {
    if (l2_stage_command_[cls] < 0) {
      // Stage the whole tensor in L2 once; every tile then loads from there.
      const Shape& full = graph_.nodes[view.tensor].shape;
      // The staged copy is the whole stored tensor (views address it with their offsets).
      TVM_FFI_ICHECK_LE(kernels::NumElements(full) * DTypeBytes(dtype), l2_area_bytes_[cls])
          << "the L2 copy of " << graph_.nodes[view.tensor].name << " overflows its area";
      TensorView storage = layout_.ViewOf(view.tensor);
      Command stage;
      stage.dma().view = storage;
      stage.dma().box = TensorBox{view.tensor, std::vector<int64_t>(full.size(), 0), full,
                                  layout_.storage_order[view.tensor]};
      stage.dma().tile = TileRef{Tier::kL2, l2_offsets_[cls], TileShape(stage.dma().box), dtype};
      stage.dma().bus_bytes = BusBytes(storage, stage.dma().box, dtype);
      AfterEarlierOnChip(&stage, Tier::kL2, l2_offsets_[cls],
                         l2_offsets_[cls] + l2_area_bytes_[cls]);
      const DramRange source = DramRangeOf(storage, stage.dma().box);
      OrderDram(&stage, source, /*store=*/false);
      l2_stage_command_[cls] = Append(std::move(stage));
      dram_.Record(source.space, source.begin, source.end, l2_stage_command_[cls], /*store=*/false);
    }
    dma.remote_tier = Tier::kL2;
    dma.remote_offset = l2_offsets_[cls];
    command.deps.push_back(l2_stage_command_[cls]);
  }
  const DramRange source = classes_[cls].staged_in_l2 ? DramRange{} : DramRangeOf(view, box);
  OrderDram(&command, source, /*store=*/false);
  TVM_FFI_ICHECK_LE(kernels::NumElements(box.extent) * DTypeBytes(dtype), classes_[cls].bytes)
      << "tile of " << graph_.nodes[view.tensor].name << " overflows its L1 slot";
  Slot& slot = slots_[cls][next_slot_[cls]];
  next_slot_[cls] = (next_slot_[cls] + 1) % static_cast<int64_t>(slots_[cls].size());
  dma.tile = TileRef{Tier::kL1, slot.offset, TileShape(box), dtype};
  dma.bus_bytes = BusBytes(view, box, dtype);
  AddDeps(&command, &slot, /*writes=*/true);
  const bool from_l2 = classes_[cls].staged_in_l2;
  slot.writer = Append(std::move(command));
  slot.readers.clear();
  slot.key = std::move(key);
  if (from_l2) l2_readers_[cls].push_back(slot.writer);
  dram_.Record(source.space, source.begin, source.end, slot.writer, /*store=*/false, slot.chain,
               slot.writer);
  return program_->commands[slot.writer].dma().tile;
}

TileRef TileScheduler::Gather(int64_t cls, const TensorView& table, const TileRef& ids,
                              const Shape& rows, bool negative_from_end) {
  const DType dtype = graph_.nodes[table.tensor].dtype;
  Command command;
  DmaCommand& dma = command.dma();
  dma.gather = true;
  dma.gather_ids = ids;
  dma.gather_negative_from_end = negative_from_end;
  dma.view = table;
  std::vector<int64_t> order(table.shape.size());
  std::iota(order.begin(), order.end(), 0);
  dma.box = TensorBox{-1, std::vector<int64_t>(table.shape.size(), 0), table.shape, order};
  // Any row may be read: ordered against earlier groups' writes of the whole table.
  const DramRange source = DramRangeOf(table, dma.box);
  OrderDram(&command, source, /*store=*/false);
  TVM_FFI_ICHECK_LE(kernels::NumElements(rows) * DTypeBytes(dtype), classes_[cls].bytes)
      << "gathered rows of " << graph_.nodes[table.tensor].name << " overflow their L1 slot";
  Slot& ids_slot = SlotAt(ids);
  AddDeps(&command, &ids_slot, /*writes=*/false);
  Slot& slot = slots_[cls][next_slot_[cls]];
  next_slot_[cls] = (next_slot_[cls] + 1) % static_cast<int64_t>(slots_[cls].size());
  dma.tile = TileRef{Tier::kL1, slot.offset, rows, dtype};
  // Each row is one run of whole bursts.
  const int64_t count = rows.empty() ? 0 : rows[0];
  const int64_t row_bytes = count == 0 ? 0 : kernels::NumElements(rows) / count * DTypeBytes(dtype);
  dma.bus_bytes = count * ((row_bytes + kBurstBytes - 1) / kBurstBytes) * kBurstBytes;
  AddDeps(&command, &slot, /*writes=*/true);
  const int64_t id = Append(std::move(command));
  SlotAt(ids).readers.push_back(id);
  slot.writer = id;
  slot.readers.clear();
  slot.key.clear();
  dram_.Record(source.space, source.begin, source.end, id, /*store=*/false, slot.chain, id);
  return program_->commands[id].dma().tile;
}

TileRef TileScheduler::NewResult(int64_t cls, const Shape& shape, DType dtype) {
  TVM_FFI_ICHECK_LE(kernels::NumElements(shape) * DTypeBytes(dtype), classes_[cls].bytes)
      << "result tile overflows its L1 slot";
  Slot& slot = slots_[cls][next_slot_[cls]];
  next_slot_[cls] = (next_slot_[cls] + 1) % static_cast<int64_t>(slots_[cls].size());
  slot.key.clear();
  return TileRef{Tier::kL1, slot.offset, shape, dtype};
}

void TileScheduler::Compute(ComputeCommand compute) {
  Command command;
  for (const TileRef& input : compute.inputs) AddDeps(&command, &SlotAt(input), false);
  Slot& out = SlotAt(compute.output);
  AddDeps(&command, &out, /*writes=*/true);
  command.op = std::move(compute);
  const int64_t id = Append(std::move(command));
  for (const TileRef& input : program_->commands[id].compute().inputs) {
    SlotAt(input).readers.push_back(id);
  }
  out.writer = id;
  out.readers.clear();
  out.key.clear();
}

void TileScheduler::Store(const TileRef& tile, const TensorView& view, const TensorBox& box) {
  Command command;
  command.dma().store = true;
  command.dma().view = view;
  command.dma().box = box;
  command.dma().tile = tile;
  command.dma().bus_bytes = BusBytes(view, box, graph_.nodes[view.tensor].dtype);
  Slot& slot = SlotAt(tile);
  AddDeps(&command, &slot, /*writes=*/false);
  const DramRange target = DramRangeOf(view, box);
  OrderDram(&command, target, /*store=*/true);
  const int64_t id = Append(std::move(command));
  slot.readers.push_back(id);
  // The store reads the slot's current version: the stores and loads of older ones are implied.
  dram_.Record(target.space, target.begin, target.end, id, /*store=*/true,
               slot.writer >= 0 ? slot.chain : -1, slot.writer);
}

}  // namespace example_npu
