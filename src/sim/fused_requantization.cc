#include "sim/fused_requantization.h"

#include <algorithm>
#include <map>
#include <utility>
#include <variant>
#include <vector>

namespace example_npu {
namespace {

/*!
 * \brief Whether requantization step `requantize` can be computed inside the op step before it:
 * it requantizes that step's whole result in place, which nothing else reads (the compiler gives
 * a tile's accumulators to its requantization only), and neither side is forwarded to DRAM.
 */
bool CanFuseRequantization(const Program& program, const TransferPlan& plan, int64_t requantize) {
  if (requantize == 0 || program.commands[requantize].is_dma() ||
      program.commands[requantize - 1].is_dma()) {
    return false;
  }
  const int64_t op = requantize - 1;
  const ComputeCommand& step = program.commands[requantize].compute();
  const ComputeCommand& compute = program.commands[op].compute();
  if (step.step != ComputeStep::kRequantize || compute.step != ComputeStep::kOp ||
      compute.node != step.node || compute.accumulate || step.inputs.size() != 1) {
    return false;
  }
  const OpKind kind = program.graph.nodes[compute.node].op;
  const QnnAttrs* attrs = std::get_if<QnnAttrs>(&compute.attrs);
  // A run-time weight's zero point is subtracted from the accumulators afterwards.
  if ((kind != OpKind::kQnnConv2d && kind != OpKind::kQnnMatmul) || attrs == nullptr ||
      attrs->weight_zero_point != 0) {
    return false;
  }
  return SameTile(compute.output, step.inputs[0]) && step.output.tier == compute.output.tier &&
         step.output.offset == compute.output.offset && !plan.output_to[op].valid() &&
         !plan.output_to[requantize].valid() && !plan.input_from[requantize][0].valid();
}

/*!
 * \brief Whether a store into a `dtype` tensor can take a requantization clamped to [min, max]
 * as the integers themselves: an 8- or 16-bit integer dtype whose range holds the clamp's.
 */
bool HoldsClampRange(DType dtype, int64_t min, int64_t max) {
  if (!IsQuantizedDType(dtype)) return false;
  const auto [lo, hi] = QuantizedRange(dtype);
  return min >= lo && max <= hi;
}

kernels::SumsType SumsTypeOf(DType dtype) {
  return dtype == DType::kInt8    ? kernels::SumsType::kInt8
         : dtype == DType::kUInt8 ? kernels::SumsType::kUInt8
                                  : kernels::SumsType::kInt16;
}

/*!
 * \brief Lets each fused step whose requantized tile only stores read (into an integer tensor
 * holding its clamp range) write those integers: the readers of each step's tile are found by
 * walking each group in stream order until the tile is overwritten (a group lays out its L1
 * afresh, so nothing after it reads the tile).
 */
void NarrowStoredRequantizations(const Program& program, bool forward, TransferPlan* plan,
                                 FusedRequantization* fused) {
  using BufferKey = std::pair<Tier, int64_t>;
  auto key = [](const TileRef& tile) { return BufferKey{tile.tier, tile.offset}; };
  const size_t steps = fused->steps.size();
  std::vector<std::vector<int64_t>> stores(steps);
  std::vector<bool> other_reader(steps, false);
  std::map<BufferKey, int64_t> holds;  // buffer -> the fused step whose result it holds
  int64_t group = -1;
  for (int64_t c = 0; c < static_cast<int64_t>(program.commands.size()); ++c) {
    const Command& command = program.commands[c];
    if (command.group != group) holds.clear();
    group = command.group;
    if (plan->skipped[c]) continue;
    auto read = [&](const TileRef& tile, bool store) {
      const auto held = holds.find(key(tile));
      if (held == holds.end()) return;
      const ComputeCommand& step = program.commands[fused->steps[held->second].command].compute();
      if (store && SameTile(tile, step.output) && tile.dtype == DType::kFloat32) {
        stores[held->second].push_back(c);
      } else {
        other_reader[held->second] = true;
      }
    };
    if (command.is_dma()) {
      const DmaCommand& dma = command.dma();
      if (dma.store) {
        read(dma.tile, dma.remote_tier == Tier::kDram && !dma.gather);
        continue;
      }
      if (dma.gather) read(dma.gather_ids, false);
      if (dma.remote_tier == Tier::kL2) read(TileRef{Tier::kL2, dma.remote_offset, {}, {}}, false);
      holds.erase(key(dma.tile));
      continue;
    }
    const ComputeCommand& compute = command.compute();
    for (size_t k = 0; k < compute.inputs.size(); ++k) {
      if (!plan->input_from[c][k].valid()) read(compute.inputs[k], false);
    }
    if (plan->output_to[c].valid()) continue;
    if (compute.accumulate) read(compute.output, false);
    holds.erase(key(compute.output));
    if (fused->folded[c]) holds[key(compute.output)] = fused->with[c - 1];
  }
  for (size_t s = 0; s < steps; ++s) {
    if (other_reader[s] || stores[s].empty()) continue;
    FusedRequantization::Step& step = fused->steps[s];
    const kernels::Requantization& r = step.prepared.requantization();
    auto dtype_of = [&](int64_t store) {
      return program.graph.nodes[program.commands[store].dma().view.tensor].dtype;
    };
    const DType dtype = dtype_of(stores[s][0]);
    if (!HoldsClampRange(dtype, r.min, r.max) ||
        std::any_of(stores[s].begin(), stores[s].end(),
                    [&](int64_t store) { return dtype_of(store) != dtype; })) {
      continue;
    }
    step.type = SumsTypeOf(dtype);
    for (int64_t store : stores[s]) ReplanStore(program, store, dtype, plan);
    // One store of the tile's pixels at one stride (a dense run, or a channel slice of whole
    // rows), into storage nothing else of the group touches (as the transfer plan forwards a float
    // result): the step writes the integers straight into DRAM.
    const int64_t store = stores[s][0];
    const DmaCommand& dma = program.commands[store].dma();
    const int64_t channels = step.prepared.channels();
    const int64_t pixel_stride =
        plan->copies[store].contiguous() ? channels : PixelStrideInDram(*plan, dma, store);
    if (forward && stores[s].size() == 1 && pixel_stride >= channels &&
        !plan->conflicted[program.commands[store].group].count(DramKeyOf(program, dma))) {
      step.dram = DramRef{dma.view.tensor, plan->remote_offset[store]};
      step.dram_pixel_stride = pixel_stride;
      plan->skipped[store] = true;
    }
  }
}

}  // namespace

FusedRequantization PlanFusedRequantization(const Program& program, TransferPlan* plan, bool fuse,
                                            bool forward) {
  const int64_t commands = static_cast<int64_t>(program.commands.size());
  FusedRequantization fused{std::vector<int64_t>(commands, -1), std::vector<bool>(commands), {}};
  for (int64_t i = 0; fuse && i < commands; ++i) {
    if (!CanFuseRequantization(program, *plan, i)) continue;
    const ComputeCommand& step = program.commands[i].compute();
    fused.with[i - 1] = static_cast<int64_t>(fused.steps.size());
    fused.folded[i] = true;
    const int64_t channels = step.output.shape.empty() ? 1 : step.output.shape.back();
    fused.steps.push_back(
        {i, kernels::PreparedRequantization(std::get<QnnAttrs>(step.attrs).requant, channels),
         kernels::SumsType::kFloat32, DramRef{}, 0});
  }
  NarrowStoredRequantizations(program, forward, plan, &fused);
  return fused;
}

}  // namespace example_npu
