#include "sim/transfer_plan.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "sim/engines.h"

namespace example_npu {
namespace {

/*! \brief The copy of one DMA (remote strides in tile order against the dense tile) and its
 * box's element offset in the remote storage. */
void PlanCopy(const Program& program, const DmaCommand& dma, BoxCopy* copy, int64_t* offset,
              std::vector<int64_t>* remote_strides) {
  const TensorBox& box = dma.box;
  const DType tensor_type = program.graph.nodes[dma.view.tensor].dtype;
  *offset = dma.view.offset;
  for (size_t d = 0; d < box.begin.size(); ++d) *offset += box.begin[d] * dma.view.strides[d];
  std::vector<int64_t> extent;
  remote_strides->clear();
  for (int64_t axis : box.tile_order) {
    remote_strides->push_back(dma.view.strides[axis]);
    extent.push_back(box.extent[axis]);
  }
  const std::vector<int64_t> tile_strides = kernels::RowMajorStrides(extent);
  *copy = dma.store ? BoxCopy(dma.tile.dtype, tile_strides, tensor_type, *remote_strides, extent)
                    : BoxCopy(tensor_type, *remote_strides, dma.tile.dtype, tile_strides, extent);
  // The remote side is the stored tensor (in DRAM, or its whole copy staged in L2): a box the
  // compiler placed partly outside it would read or write another buffer's bytes.
  const int64_t span = dma.store ? copy->DestinationSpan() : copy->SourceSpan();
  const Node& stored = program.graph.nodes[dma.view.tensor];
  TVM_FFI_ICHECK(span == 0 ||
                 (*offset >= 0 && *offset + span <= kernels::NumElements(stored.shape)))
      << "a DMA " << (dma.store ? "store" : "load") << " of " << stored.name
      << " reaches outside it";
}

/*!
 * \brief Identifies a box loaded in one tile order: tensor, the view's offset and strides (two
 * slices of one tensor are different views with equal boxes), begin, extent, order.
 */
std::vector<int64_t> BoxKey(const DmaCommand& dma) {
  std::vector<int64_t> key = {dma.view.tensor, dma.view.offset};
  for (const std::vector<int64_t>* part :
       {&dma.view.strides, &dma.box.begin, &dma.box.extent, &dma.box.tile_order}) {
    key.insert(key.end(), part->begin(), part->end());
  }
  return key;
}

/*!
 * \brief Plans `dma`, a load that gathers a constant or input box (strided or transposed; from
 * DRAM, or from a constant's L2 staging copy, which holds the same bytes), to copy its tile from
 * the box's arranged tile; loads of the same box and order share one. `arena_bytes` is the
 * arena's size.
 */
void PlanArranged(const Program& program, const DmaCommand& dma, int64_t command, bool constant,
                  std::map<std::vector<int64_t>, int64_t>* index, int64_t* arena_bytes,
                  TransferPlan* plan) {
  const DType dtype = program.graph.nodes[dma.view.tensor].dtype;
  const int64_t elements = kernels::NumElements(dma.box.extent);
  auto [it, added] = index->emplace(BoxKey(dma), static_cast<int64_t>(plan->arranged.size()));
  if (added) {
    plan->arranged.push_back(ArrangedTile{dma.view.tensor, plan->remote_offset[command],
                                          plan->copies[command], constant, *arena_bytes});
    *arena_bytes += (elements * DTypeBytes(dtype) + 63) / 64 * 64;  // cache-line aligned tiles
    if (!constant) plan->arranged_at_group[program.commands[command].group].push_back(it->second);
  }
  plan->arranged_of[command] = it->second;
  plan->remote_offset[command] = 0;
  plan->copies[command] = BoxCopy(dtype, {1}, dma.tile.dtype, {1}, {elements});
}

/*! \brief Arranges the gathering (non-contiguous) loads of constants, and of input boxes loaded
 * twice or more by one group. */
void PlanArrangedTiles(const Program& program, TransferPlan* plan) {
  const int64_t count = static_cast<int64_t>(program.commands.size());
  plan->arranged_of.assign(count, -1);
  plan->arranged_at_group.resize(program.groups.size());
  std::map<std::vector<int64_t>, int64_t> const_index;
  ForEachGroup(program, [&](int64_t begin, int64_t end) {
    auto eligible = [&](int64_t i, TensorPlacement::Kind kind) {
      const Command& command = program.commands[i];
      return command.is_dma() && !command.dma().store && !command.dma().gather &&
             !plan->copies[i].contiguous() && kernels::NumElements(command.dma().box.extent) > 0 &&
             program.placements[command.dma().view.tensor].kind == kind;
    };
    std::map<std::vector<int64_t>, int64_t> input_loads;
    for (int64_t i = begin; i < end; ++i) {
      if (eligible(i, TensorPlacement::Kind::kInput))
        ++input_loads[BoxKey(program.commands[i].dma())];
    }
    std::map<std::vector<int64_t>, int64_t> input_index;
    int64_t group_bytes = 0;
    for (int64_t i = begin; i < end; ++i) {
      if (eligible(i, TensorPlacement::Kind::kConst)) {
        PlanArranged(program, program.commands[i].dma(), i, true, &const_index,
                     &plan->const_arena_bytes, plan);
      } else if (eligible(i, TensorPlacement::Kind::kInput) &&
                 input_loads[BoxKey(program.commands[i].dma())] > 1) {
        PlanArranged(program, program.commands[i].dma(), i, false, &input_index, &group_bytes,
                     plan);
      }
    }
    plan->run_arena_bytes = std::max(plan->run_arena_bytes, group_bytes);
  });
}

/*! \brief One use of an L1 tile's contents: a compute input, an accumulation or a store. */
struct TileUse {
  int64_t command;
  int64_t input = -1;  // compute input index; -1: not a plain compute input
};

class GroupForwarder {
 public:
  GroupForwarder(const Program& program, TransferPlan* plan) : program_(program), plan_(plan) {}

  /*! \brief Decides forwarding for the commands [begin, end) of one group. */
  void Run(int64_t begin, int64_t end) {
    group_ = program_.commands[begin].group;
    std::map<int64_t, int64_t> writer_of;  // L1 offset -> command whose result it holds
    for (int64_t i = begin; i < end; ++i) {
      const Command& command = program_.commands[i];
      if (command.is_dma()) {
        if (command.dma().tile.tier != Tier::kL1) continue;
        if (command.dma().store) {
          Use(writer_of, command.dma().tile.offset, TileUse{i});
        } else {
          writer_of[command.dma().tile.offset] = i;
        }
        continue;
      }
      const ComputeCommand& compute = command.compute();
      for (size_t k = 0; k < compute.inputs.size(); ++k) {
        if (compute.inputs[k].tier != Tier::kL1) continue;
        Use(writer_of, compute.inputs[k].offset, TileUse{i, static_cast<int64_t>(k)});
      }
      if (compute.accumulate) Use(writer_of, compute.output.offset, TileUse{i});
      writer_of[compute.output.offset] = i;
    }
    for (const auto& [writer, uses] : uses_) {
      if (program_.commands[writer].is_dma()) {
        ForwardLoad(writer, uses);
      } else {
        ForwardResult(writer, uses);
      }
    }
  }

 private:
  void Use(const std::map<int64_t, int64_t>& writer_of, int64_t offset, TileUse use) {
    auto it = writer_of.find(offset);
    if (it != writer_of.end()) uses_[it->second].push_back(use);
  }

  /*! \brief How a transfer can be skipped: not at all, as a dense run, or as a strided view. */
  enum class Forward { kNo, kDense, kStrided };

  Forward HowToForward(const DmaCommand& dma, int64_t command) const {
    const BoxCopy& copy = plan_->copies[command];
    if (dma.gather) return Forward::kNo;  // its rows are known only when it runs
    // An arranged tile is dense and read-only while its group runs.
    if (plan_->arranged_of[command] >= 0) return Forward::kDense;
    if (dma.remote_tier != Tier::kDram || conflicted().count(DramKeyOf(program_, dma))) {
      return Forward::kNo;
    }
    if (copy.contiguous()) return Forward::kDense;
    const std::vector<int64_t>& strides = plan_->remote_strides[command];
    const bool eight_bit_load =
        !dma.store && (dma.tile.dtype == DType::kInt8 || dma.tile.dtype == DType::kUInt8);
    const bool view = copy.unchanged() && !strides.empty() && strides.back() == 1 &&
                      (dma.tile.dtype == DType::kFloat32 || eight_bit_load);
    return view ? Forward::kStrided : Forward::kNo;
  }

  /*!
   * \brief Whether compute `command` can take its output and input `input` (-1: none) as strided
   * views of `dtype` elements: float32 ones where StridedView holds, and the 8-bit activation of
   * a depthwise qnn.conv2d's op step (QuantizedConv2d reads it in place).
   */
  bool TakesViews(int64_t command, DType dtype, int64_t input = -1) const {
    const ComputeCommand& compute = program_.commands[command].compute();
    const OpKind op = program_.graph.nodes[compute.node].op;
    if (const QnnAttrs* qnn = std::get_if<QnnAttrs>(&compute.attrs)) {
      return op == OpKind::kQnnConv2d && compute.step == ComputeStep::kOp && input == 0 &&
             compute.inputs.size() == 2 && compute.inputs[0].dtype == dtype &&
             kernels::IsDepthwiseNhwc(compute.inputs[0].shape, compute.inputs[1].shape, qnn->conv);
    }
    if (dtype != DType::kFloat32) return false;
    std::vector<OperandF32> operands;
    for (const TileRef& tile : compute.inputs) operands.push_back(OperandF32{nullptr, &tile.shape});
    return StridedView(op, compute.attrs, operands) &&
           (input < 0 || ViewableInput(op, static_cast<size_t>(input)));
  }

  void ForwardLoad(int64_t load, const std::vector<TileUse>& uses) {
    const DmaCommand& dma = program_.commands[load].dma();
    const Forward how = HowToForward(dma, load);
    if (how == Forward::kNo) return;
    for (const TileUse& use : uses) {
      if (use.input < 0) return;  // a store or an accumulation needs the tile itself
      if (how == Forward::kStrided && !TakesViews(use.command, dma.tile.dtype, use.input)) return;
    }
    const int64_t view = how == Forward::kStrided ? load : -1;
    for (const TileUse& use : uses) {
      plan_->input_from[use.command][use.input] =
          DramRef{dma.view.tensor, plan_->remote_offset[load], view, plan_->arranged_of[load]};
    }
    plan_->skipped[load] = true;
  }

  void ForwardResult(int64_t compute, const std::vector<TileUse>& uses) {
    if (uses.size() != 1 || program_.commands[compute].compute().accumulate) return;
    const Command& store = program_.commands[uses[0].command];
    if (!store.is_dma() || !store.dma().store) return;
    const Forward how = HowToForward(store.dma(), store.id);
    if (how == Forward::kNo ||
        (how == Forward::kStrided && !TakesViews(compute, store.dma().tile.dtype))) {
      return;
    }
    plan_->output_to[compute] = DramRef{store.dma().view.tensor, plan_->remote_offset[store.id],
                                        how == Forward::kStrided ? store.id : -1};
    plan_->skipped[store.id] = true;
  }

  const std::set<DramKey>& conflicted() const { return plan_->conflicted[group_]; }

  const Program& program_;
  TransferPlan* plan_;
  int64_t group_ = 0;
  std::map<int64_t, std::vector<TileUse>> uses_;  // writer -> uses of what it wrote
};

/*!
 * \brief Whether command `i` may read L2 on the host: a load from L2 that copies (not forwarded,
 * not from an arranged tile), a store or gather of an L2 tile, a compute on one.
 */
bool ReadsL2(const Program& program, const TransferPlan& plan, int64_t i) {
  const Command& command = program.commands[i];
  if (command.is_dma()) {
    const DmaCommand& dma = command.dma();
    if (dma.remote_tier == Tier::kL2 && !plan.skipped[i] && plan.arranged_of[i] < 0) return true;
    return (dma.store && dma.tile.tier == Tier::kL2) ||
           (dma.gather && dma.gather_ids.tier == Tier::kL2);
  }
  const ComputeCommand& compute = command.compute();
  return compute.output.tier == Tier::kL2 ||
         std::any_of(compute.inputs.begin(), compute.inputs.end(),
                     [](const TileRef& tile) { return tile.tier == Tier::kL2; });
}

/*!
 * \brief Skips the copies that stage a tensor in L2 where nothing in their group reads L2 on
 * the host: the staged tiles' loads were forwarded or take their bytes from arranged tiles (made
 * from the tensor in DRAM). Stagings are per group (the scheduler stages afresh in each).
 */
void SkipUnreadStagings(const Program& program, TransferPlan* plan) {
  ForEachGroup(program, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (ReadsL2(program, *plan, i)) return;
    }
    for (int64_t i = begin; i < end; ++i) {
      const Command& command = program.commands[i];
      if (command.is_dma() && !command.dma().store && !command.dma().gather &&
          command.dma().tile.tier == Tier::kL2) {
        plan->skipped[i] = true;
      }
    }
  });
}

}  // namespace

std::set<DramKey> DramConflicts(const Program& program, int64_t begin, int64_t end) {
  std::set<DramKey> conflicted;
  std::set<DramKey> loaded;
  std::map<DramKey, DramBoxIndex> stores;
  for (int64_t i = begin; i < end; ++i) {
    const Command& command = program.commands[i];
    if (!command.is_dma() || command.dma().remote_tier != Tier::kDram) continue;
    const DramKey key = DramKeyOf(program, command.dma());
    if (!command.dma().store) {
      loaded.insert(key);
      continue;
    }
    DramBoxIndex& earlier = stores[key];
    if (!conflicted.count(key)) {
      earlier.ForEachOverlap(command.dma(), [&](int64_t) { conflicted.insert(key); });
    }
    earlier.Add(i, &command.dma());
  }
  for (const DramKey& key : loaded) {
    if (stores.count(key)) conflicted.insert(key);
  }
  return conflicted;
}

bool SameTile(const TileRef& a, const TileRef& b) {
  return a.tier == b.tier && a.offset == b.offset && a.shape == b.shape;
}

int64_t PixelStrideInDram(const TransferPlan& plan, const DmaCommand& dma, int64_t command) {
  const std::vector<int64_t>& strides = plan.remote_strides[command];  // in tile order
  std::vector<int64_t> extent;
  for (int64_t axis : dma.box.tile_order) extent.push_back(dma.box.extent[axis]);
  const size_t rank = extent.size();
  if (rank < 2 || strides.size() != rank || strides[rank - 1] != 1) return 0;
  for (size_t d = 0; d + 2 < rank; ++d) {
    if (extent[d] > 1 && strides[d] != strides[d + 1] * extent[d + 1]) return 0;
  }
  return strides[rank - 2];
}

DramKey DramKeyOf(const Program& program, const DmaCommand& dma) {
  const TensorPlacement& placement = program.placements[dma.view.tensor];
  return DramKey{static_cast<int>(placement.kind), placement.index};
}

bool BoxesMayOverlap(const DmaCommand& a, const DmaCommand& b) {
  if (a.view.strides != b.view.strides || a.view.offset != b.view.offset) return true;
  for (size_t d = 0; d < a.box.begin.size(); ++d) {
    const int64_t a_end = a.box.begin[d] + a.box.extent[d];
    const int64_t b_end = b.box.begin[d] + b.box.extent[d];
    if (a_end <= b.box.begin[d] || b_end <= a.box.begin[d]) return false;
  }
  return true;
}

namespace {

// A box filed under more cells than this is compared with every query instead.
constexpr int64_t kMaxCellsPerBox = 64;

bool IsEmpty(const TensorBox& box) {
  return std::any_of(box.extent.begin(), box.extent.end(), [](int64_t e) { return e <= 0; });
}

}  // namespace

bool DramBoxIndex::CellsOf(const Bucket& bucket, const TensorBox& box, std::vector<Cell>* cells) {
  const size_t rank = bucket.cell_extent.size();
  if (box.begin.size() != rank) return false;
  Cell lo(rank), hi(rank);
  int64_t count = 1;
  for (size_t d = 0; d < rank; ++d) {
    lo[d] = box.begin[d] / bucket.cell_extent[d];
    hi[d] = (box.begin[d] + box.extent[d] - 1) / bucket.cell_extent[d];
    count *= hi[d] - lo[d] + 1;
    if (count > kMaxCellsPerBox) return false;
  }
  Cell cell = lo;
  while (true) {
    cells->push_back(cell);
    size_t d = rank;
    while (d > 0 && cell[d - 1] == hi[d - 1]) cell[d - 1] = lo[d - 1], --d;
    if (d == 0) return true;
    ++cell[d - 1];
  }
}

void DramBoxIndex::Add(int64_t id, const DmaCommand* dma) {
  const TensorBox& box = dma->box;
  if (IsEmpty(box)) {
    empty_.push_back(Entry{id, dma});
    return;
  }
  Bucket& bucket = buckets_[dma->view.strides];
  if (bucket.cell_extent.empty()) bucket.cell_extent = box.extent;
  std::vector<Cell> cells;
  if (!CellsOf(bucket, box, &cells)) {
    bucket.wide.push_back(Entry{id, dma});
    return;
  }
  for (const Cell& cell : cells) bucket.cells[cell].push_back(Entry{id, dma});
}

void DramBoxIndex::ForEachOverlap(const DmaCommand& dma,
                                  const std::function<void(int64_t)>& fn) const {
  std::vector<int64_t> found;
  auto check = [&](const Entry& entry) {
    if (BoxesMayOverlap(*entry.dma, dma)) found.push_back(entry.id);
  };
  for (const Entry& entry : empty_) check(entry);
  std::vector<Cell> cells;
  for (const auto& [strides, bucket] : buckets_) {
    for (const Entry& entry : bucket.wide) check(entry);
    cells.clear();
    // Different strides always count as overlapping (BoxesMayOverlap's rule): scan those.
    const bool filed =
        strides == dma.view.strides && !IsEmpty(dma.box) && CellsOf(bucket, dma.box, &cells);
    if (!filed) {
      for (const auto& [unused, entries] : bucket.cells) {
        for (const Entry& entry : entries) check(entry);
      }
      continue;
    }
    for (const Cell& cell : cells) {
      auto it = bucket.cells.find(cell);
      if (it == bucket.cells.end()) continue;
      for (const Entry& entry : it->second) check(entry);
    }
  }
  // A box filed under several cells is found once per cell.
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  for (int64_t id : found) fn(id);
}

void ReplanStore(const Program& program, int64_t command, DType tile_type, TransferPlan* plan) {
  DmaCommand store = program.commands[command].dma();
  TVM_FFI_ICHECK(store.store && !plan->skipped[command]) << "only a performed store is re-planned";
  store.tile.dtype = tile_type;
  PlanCopy(program, store, &plan->copies[command], &plan->remote_offset[command],
           &plan->remote_strides[command]);
}

TransferPlan PlanTransfers(const Program& program, bool forward) {
  const size_t count = program.commands.size();
  TransferPlan plan;
  plan.copies.resize(count);
  plan.remote_offset.assign(count, 0);
  plan.remote_strides.resize(count);
  plan.skipped.assign(count, false);
  plan.input_from.resize(count);
  plan.output_to.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const Command& command = program.commands[i];
    if (command.is_dma() && !command.dma().gather) {  // a gather copies rows it reads at run time
      PlanCopy(program, command.dma(), &plan.copies[i], &plan.remote_offset[i],
               &plan.remote_strides[i]);
    } else if (!command.is_dma()) {
      plan.input_from[i].resize(command.compute().inputs.size());
    }
  }
  plan.conflicted.resize(program.groups.size());
  ForEachGroup(program, [&](int64_t begin, int64_t end) {
    plan.conflicted[program.commands[begin].group] = DramConflicts(program, begin, end);
  });
  if (forward) {
    PlanArrangedTiles(program, &plan);
  } else {
    plan.arranged_of.assign(count, -1);
    plan.arranged_at_group.resize(program.groups.size());
  }
  if (!forward) return plan;
  ForEachGroup(program,
               [&](int64_t begin, int64_t end) { GroupForwarder(program, &plan).Run(begin, end); });
  SkipUnreadStagings(program, &plan);
  return plan;
}

}  // namespace example_npu
