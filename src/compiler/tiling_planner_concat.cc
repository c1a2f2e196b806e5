/*!
 * \file compiler/tiling_planner_concat.cc
 * \brief Tiling of concat and qnn.concat: each input is walked in tiles and stored into its slice
 * of the output along the axis. concat only moves data (DMA); a qnn.concat input whose
 * quantization differs from the output's is requantized on the vector unit between load and store.
 */
#include <tvm/ffi/error.h>

#include <algorithm>

#include "compiler/tiling_planner_details.h"

namespace example_npu {
namespace tiling {
namespace {

class ConcatRule : public OutputTiler {
 public:
  using OutputTiler::OutputTiler;

  TilePlan Plan() override {
    TVM_FFI_ICHECK(group_.chain.empty()) << "concat groups fuse no elementwise chain";
    const Node& anchor = Anchor();
    UseIdentityOrder(anchor.shape.size());
    bool any_requantized = false;
    for (size_t k = 0; k < anchor.inputs.size(); ++k) {
      any_requantized |= Requantizes(k);
      item_ = std::max(item_, DTypeBytes(graph_.nodes[anchor.inputs[k]].dtype));
    }
    auto cost = [&](const std::vector<int64_t>& extent) {
      return TotalBytes(Buffers(extent, any_requantized));
    };
    TilePlan plan;
    plan.engine = any_requantized ? Engine::kVector : Engine::kDma;
    for (int64_t input : anchor.inputs) {
      const Shape& shape = graph_.nodes[input].shape;
      auto tile = ChooseOutputTile(shape, order_, std::vector<bool>(shape.size(), false),
                                   L1Budget(), cost, config_.vector_elements);
      if (!tile.has_value()) {
        plan.reason = std::string(OpKindName(anchor.op)) + ": the smallest tile does not fit L1";
        return plan;
      }
      input_tiles_.push_back(*tile);
      plan.tiles += CountTiles(shape, *tile);
    }
    const auto largest = std::max_element(
        input_tiles_.begin(), input_tiles_.end(), [](const auto& a, const auto& b) {
          return kernels::NumElements(a) < kernels::NumElements(b);
        });
    plan.ok = true;
    plan.tile_shape = input_tiles_.front();
    plan.buffers = Buffers(*largest, any_requantized);
    return plan;
  }

  void Emit(TileScheduler* scheduler) const override {
    const Node& anchor = Anchor();
    const int64_t axis = Axis();
    const TensorView target = layout_.ViewOf(group_.anchor);
    int64_t offset = 0;
    for (size_t k = 0; k < anchor.inputs.size(); ++k) {
      const TensorView source = layout_.ViewOf(anchor.inputs[k]);
      const bool requantize = Requantizes(k);
      ForEachTile(source.shape, order_, input_tiles_[k],
                  [&](const std::vector<int64_t>& begin, const std::vector<int64_t>& extent) {
                    TileRef tile = scheduler->Load(0, source, TensorBox{-1, begin, extent, order_});
                    if (requantize) {
                      TileRef result = scheduler->NewResult(1, tile.shape, DType::kFloat32);
                      const auto& inputs = std::get<QnnConcatAttrs>(anchor.attrs).inputs;
                      scheduler->Compute(MakeCompute(anchor, group_.anchor, {tile}, result,
                                                     QnnRequantizeAttrs{inputs[k]}));
                      tile = result;
                    }
                    std::vector<int64_t> out_begin = begin;
                    out_begin[axis] += offset;
                    scheduler->Store(tile, target, TensorBox{-1, out_begin, extent, order_});
                  });
      offset += source.shape[axis];
    }
  }

 private:
  int64_t Axis() const {
    if (const auto* qnn = std::get_if<QnnConcatAttrs>(&Anchor().attrs)) return qnn->axis;
    return std::get<ConcatAttrs>(Anchor().attrs).axis;
  }

  /*! \brief Whether input k needs arithmetic: a qnn.concat input quantized unlike the output. */
  bool Requantizes(size_t k) const {
    const auto* qnn = std::get_if<QnnConcatAttrs>(&Anchor().attrs);
    if (qnn == nullptr) return false;
    const DType source = graph_.nodes[Anchor().inputs[k]].dtype;
    const auto [lo, hi] = QuantizedRange(source);
    return source != Anchor().dtype || !kernels::IsIdentity(qnn->inputs[k], lo, hi);
  }

  /*! \brief A double-buffered input tile (the widest input dtype), plus a float32 result tile when
   * an input is requantized. Costs O(1): it is evaluated for every tile candidate of every
   * input, so a pass over the inputs here made a concat of N inputs cost N^2. */
  std::vector<BufferClass> Buffers(const std::vector<int64_t>& extent, bool requantized) const {
    const int64_t elements = kernels::NumElements(extent);
    std::vector<BufferClass> buffers{BufferClass{AlignUp(elements * item_), 2}};
    if (requantized) {
      buffers.push_back(BufferClass{AlignUp(elements * DTypeBytes(DType::kFloat32)), 2});
    }
    return buffers;
  }

  std::vector<std::vector<int64_t>> input_tiles_;
  int64_t item_ = 1;  // bytes per element of the widest input
};

}  // namespace

std::unique_ptr<TilingRule> MakeConcatRule(const Graph& graph, const FusedGroup& group,
                                           const LayoutPlan& layout, const NPUConfig& config) {
  return std::make_unique<ConcatRule>(graph, group, layout, config);
}

}  // namespace tiling
}  // namespace example_npu
