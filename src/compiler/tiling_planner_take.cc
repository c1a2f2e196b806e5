/*!
 * \file compiler/tiling_planner_take.cc
 * \brief Tiling of take with run-time ids (an embedding lookup): tiles of whole rows; each loads
 * its ids, gathers their table rows by DMA and stores them. Nothing is computed.
 */
#include <tvm/ffi/error.h>

#include <string>
#include <variant>

#include "compiler/tiling_planner_details.h"

namespace example_npu {
namespace tiling {
namespace {

class TakeRule : public OutputTiler {
 public:
  using OutputTiler::OutputTiler;

  TilePlan Plan() override {
    TVM_FFI_ICHECK(group_.chain.empty()) << "take groups fuse no elementwise chain";
    const Node& anchor = Anchor();
    UseIdentityOrder(anchor.shape.size());
    TilePlan plan;
    plan.engine = Engine::kDma;
    if (!RowsContiguous(layout_.ViewOf(anchor.inputs[0]))) {
      plan.reason = "take: the table's rows are not contiguous in DRAM";
      return plan;
    }
    // Whole rows: only the id dim is split.
    std::vector<bool> fixed(anchor.shape.size(), true);
    fixed[0] = false;
    auto cost = [&](const std::vector<int64_t>& extent) {
      return 2 * IdsTileBytes(extent) + CopyCost(extent);
    };
    if (!ChooseTile(fixed, cost, &plan)) return plan;
    plan.buffers.push_back(BufferClass{IdsTileBytes(tile_), 2});
    plan.buffers.push_back(BufferClass{CopyTileBytes(tile_), 2});
    return plan;
  }

  void Emit(TileScheduler* scheduler) const override {
    const Node& anchor = Anchor();
    const TensorView table = layout_.ViewOf(anchor.inputs[0]);
    const TensorView ids = layout_.ViewOf(anchor.inputs[1]);
    const TensorView target = layout_.ViewOf(group_.anchor);
    const bool negative_from_end = std::get<TakeAttrs>(anchor.attrs).negative_from_end;
    ForEachTile(anchor.shape, order_, tile_,
                [&](const std::vector<int64_t>& begin, const std::vector<int64_t>& extent) {
                  TileRef id_tile =
                      scheduler->Load(0, ids, TensorBox{-1, {begin[0]}, {extent[0]}, {0}});
                  TileRef rows =
                      scheduler->Gather(1, table, id_tile, extent, negative_from_end);
                  scheduler->Store(rows, target, TensorBox{-1, begin, extent, order_});
                });
  }

 private:
  int64_t IdsTileBytes(const std::vector<int64_t>& extent) const {
    return AlignUp(extent[0] * OperandBytes(1));
  }

  /*! \brief Whether each row (dims 1..) of `view` is one dense run, as the gather copies it. */
  static bool RowsContiguous(const TensorView& view) {
    int64_t dense = 1;
    for (size_t d = view.shape.size(); d-- > 1;) {
      if (view.shape[d] != 1 && view.strides[d] != dense) return false;
      dense *= view.shape[d];
    }
    return true;
  }
};

}  // namespace

std::unique_ptr<TilingRule> MakeTakeRule(const Graph& graph, const FusedGroup& group,
                                         const LayoutPlan& layout, const NPUConfig& config) {
  return std::make_unique<TakeRule>(graph, group, layout, config);
}

}  // namespace tiling
}  // namespace example_npu
