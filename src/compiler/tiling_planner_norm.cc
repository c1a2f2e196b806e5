/*!
 * \file compiler/tiling_planner_norm.cc
 * \brief Tiling of group_norm / instance_norm on the vector unit, in the split space where a
 * group is a set of whole dims (kernels/norm.h).
 *
 * When whole groups fit L1, a tile holds one or more groups: it is loaded once, its statistics
 * are computed into a small tile, and the same input tile is normalised. A group larger than L1
 * streams through in chunks twice, as an NPU would: the statistics accumulate chunk by chunk
 * (in the row-major order TVM sums in, so the sums are TVM's bit for bit), then every chunk is
 * loaded again and normalised. Fused consumers (SiLU, a residual add) run on each normalised
 * tile before it is stored.
 */
#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/tiling_planner_details.h"
#include "kernels/norm.h"

namespace example_npu {
namespace tiling {
namespace {

class NormRule : public OutputTiler {
 public:
  NormRule(const Graph& graph, const FusedGroup& group, const LayoutPlan& layout,
           const NPUConfig& config)
      : OutputTiler(graph, group, layout, config), attrs_(std::get<NormAttrs>(Anchor().attrs)) {
    space_ = kernels::GroupNormSpace(Anchor().shape, attrs_.params);
    c_axis_ = attrs_.params.channel_axis;
  }

  /*! \brief Views of the logical tensor seen in the split space (the channel dim split). */
  TensorView Lift(const TensorView& view) const override {
    TensorView lifted = view;
    const size_t c = static_cast<size_t>(c_axis_);
    const bool whole = view.shape[c] != 1;
    const int64_t per_group = space_.shape[c + 1];
    lifted.shape[c] = whole ? space_.shape[c] : 1;
    lifted.strides[c] = whole ? view.strides[c] * per_group : 0;
    lifted.shape.insert(lifted.shape.begin() + c + 1, whole ? per_group : 1);
    lifted.strides.insert(lifted.strides.begin() + c + 1, whole ? view.strides[c] : 0);
    return lifted;
  }

  TilePlan Plan() override {
    const size_t rank = space_.shape.size();
    UseIdentityOrder(rank);
    TilePlan plan;
    plan.engine = Engine::kVector;
    // Whole groups first: every reduced dim fixed at its full extent.
    std::vector<bool> fixed = space_.reduced;
    auto cost = [&](const std::vector<int64_t>& extent) {
      return TotalBytes(OwnBuffers(extent)) + EpilogueBytes(extent);
    };
    auto tile =
        ChooseOutputTile(space_.shape, order_, fixed, L1Budget(), cost, config_.vector_elements);
    streaming_ = !tile.has_value();
    if (streaming_) {
      // One group at a time, in chunks of its reduced dims (inner dims grown first, so the
      // chunks in row-major order visit the group's elements in row-major order).
      Shape group_shape = space_.shape;
      for (size_t d = 0; d < rank; ++d) {
        if (!space_.reduced[d]) group_shape[d] = 1;
      }
      tile = ChooseOutputTile(group_shape, order_, std::vector<bool>(rank, false), L1Budget(), cost,
                              config_.vector_elements);
      if (!tile.has_value()) {
        plan.reason = std::string(OpKindName(Anchor().op)) + ": the smallest chunk does not fit L1";
        return plan;
      }
    }
    tile_ = *tile;
    plan.ok = true;
    plan.tile_shape = tile_;
    plan.tiles = CountTiles(space_.shape, tile_) * (streaming_ ? 2 : 1);
    plan.buffers = OwnBuffers(tile_);
    AddEpilogueBuffers(tile_, &plan.buffers);
    return plan;
  }

  void Emit(TileScheduler* scheduler) const override {
    const size_t rank = space_.shape.size();
    if (!streaming_) {
      ForEachTile(space_.shape, order_, tile_,
                  [&](const std::vector<int64_t>& begin, const std::vector<int64_t>& extent) {
                    const TensorBox box{-1, begin, extent, order_};
                    const TileRef in = scheduler->Load(0, Input(), box);
                    const TileRef stats = Statistics(scheduler, {in}, extent, false);
                    Normalize(scheduler, in, stats, box);
                  });
      return;
    }
    // Per group: statistics over all its chunks, then every chunk normalised.
    std::vector<int64_t> one_group(rank, 1);
    Shape chunk_grid = space_.shape;
    for (size_t d = 0; d < rank; ++d) {
      if (!space_.reduced[d]) chunk_grid[d] = 1;
    }
    ForEachTile(space_.shape, order_, GroupTile(),
                [&](const std::vector<int64_t>& group_begin, const std::vector<int64_t>&) {
                  auto for_each_chunk = [&](const std::function<void(const TensorBox&)>& fn) {
                    ForEachTile(
                        chunk_grid, order_, tile_,
                        [&](const std::vector<int64_t>& begin, const std::vector<int64_t>& extent) {
                          std::vector<int64_t> at = begin;
                          for (size_t d = 0; d < rank; ++d) at[d] += group_begin[d];
                          fn(TensorBox{-1, at, extent, order_});
                        });
                  };
                  TileRef stats;
                  bool first = true;
                  for_each_chunk([&](const TensorBox& box) {
                    const TileRef in = scheduler->Load(0, Input(), box);
                    stats = first ? Statistics(scheduler, {in}, box.extent, false)
                                  : Statistics(scheduler, {in, stats}, box.extent, true, stats);
                    first = false;
                  });
                  for_each_chunk([&](const TensorBox& box) {
                    Normalize(scheduler, scheduler->Load(0, Input(), box), stats, box);
                  });
                });
  }

 private:
  const TensorView Input() const { return Lift(layout_.ViewOf(Anchor().inputs[0])); }

  /*! \brief gamma / beta (one value per channel) placed on the split channel dims. */
  TensorView ChannelParam(size_t input) const {
    const TensorView view = layout_.ViewOf(Anchor().inputs[input]);
    const size_t rank = space_.shape.size(), c = static_cast<size_t>(c_axis_);
    TensorView placed{view.tensor, Shape(rank, 1), std::vector<int64_t>(rank, 0), view.offset};
    placed.shape[c] = space_.shape[c];
    placed.strides[c] = view.strides[0] * space_.shape[c + 1];
    placed.shape[c + 1] = space_.shape[c + 1];
    placed.strides[c + 1] = view.strides[0];
    return placed;
  }

  /*! \brief One tile of every group: unit kept dims, full reduced dims. */
  std::vector<int64_t> GroupTile() const {
    std::vector<int64_t> tile = space_.shape;
    for (size_t d = 0; d < tile.size(); ++d) {
      if (!space_.reduced[d]) tile[d] = 1;
    }
    return tile;
  }

  int64_t KeptElements(const std::vector<int64_t>& extent) const {
    int64_t kept = 1;
    for (size_t d = 0; d < extent.size(); ++d) {
      if (!space_.reduced[d]) kept *= extent[d];
    }
    return kept;
  }

  /*! \brief input chunk, statistics, gamma and beta: each double-buffered. */
  std::vector<BufferClass> OwnBuffers(const std::vector<int64_t>& extent) const {
    const TensorBox box{-1, std::vector<int64_t>(extent.size(), 0), extent, order_};
    const int64_t param_elements = kernels::NumElements(ProjectBox(ChannelParam(1), box).extent);
    return {BufferClass{AlignUp(kernels::NumElements(extent) * OperandBytes(0)), 2},
            BufferClass{AlignUp(KeptElements(extent) * 2 * 4), 2},
            BufferClass{AlignUp(param_elements * OperandBytes(1)), 2},
            BufferClass{AlignUp(param_elements * OperandBytes(2)), 2}};
  }

  NormAttrs StepAttrs(NormAttrs::Step step, bool accumulate) const {
    NormAttrs attrs = attrs_;
    attrs.step = step;
    attrs.accumulate = accumulate;
    return attrs;
  }

  /*! \brief The statistics of a chunk into a new statistics tile, or added to `previous`. */
  TileRef Statistics(TileScheduler* scheduler, std::vector<TileRef> inputs,
                     const std::vector<int64_t>& extent, bool accumulate,
                     const TileRef& previous = TileRef{}) const {
    const TileRef stats =
        accumulate ? previous
                   : scheduler->NewResult(1, Shape{KeptElements(extent), 2}, DType::kFloat32);
    ComputeCommand compute = MakeCompute(Anchor(), group_.anchor, std::move(inputs), stats,
                                         StepAttrs(NormAttrs::Step::kStatistics, accumulate));
    compute.elements = kernels::NumElements(extent);
    scheduler->Compute(std::move(compute));
    return stats;
  }

  void Normalize(TileScheduler* scheduler, const TileRef& in, const TileRef& stats,
                 const TensorBox& box) const {
    const TensorView gamma = ChannelParam(1), beta = ChannelParam(2);
    const TileRef g = scheduler->Load(2, gamma, ProjectBox(gamma, box));
    const TileRef b = scheduler->Load(3, beta, ProjectBox(beta, box));
    const TileRef result = NewResult(scheduler, box);
    ComputeCommand compute = MakeCompute(Anchor(), group_.anchor, {in, stats, g, b}, result,
                                         StepAttrs(NormAttrs::Step::kApply, false));
    scheduler->Compute(std::move(compute));
    EmitEpilogue(scheduler, result, box);
  }

  NormAttrs attrs_;
  kernels::NormSpace space_;
  int64_t c_axis_ = 1;
  bool streaming_ = false;
};

}  // namespace

std::unique_ptr<TilingRule> MakeNormRule(const Graph& graph, const FusedGroup& group,
                                         const LayoutPlan& layout, const NPUConfig& config) {
  return std::make_unique<NormRule>(graph, group, layout, config);
}

}  // namespace tiling
}  // namespace example_npu
