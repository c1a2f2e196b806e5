/*!
 * \file compiler/tiling_planner_resample.cc
 * \brief Tiling of the index-mapped ops: resize2d and pad on the vector unit (a gather the DMA
 * feeds), adaptive average pooling on the pooling unit. A tile of the output reads the one box
 * of the input its index map reaches (kernels/resample.h), so upsampling loads each input pixel
 * once per tile and never materialises anything between.
 */
#include <algorithm>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "compiler/tiling_planner_details.h"
#include "kernels/resample.h"

namespace example_npu {
namespace tiling {
namespace {

class ResampleRule : public OutputTiler {
 public:
  using OutputTiler::OutputTiler;

  TilePlan Plan() override {
    const Node& anchor = Anchor();
    const size_t rank = anchor.shape.size();
    if (anchor.op != OpKind::kPad) {
      // Image ops run on NHWC tiles (channels innermost), whatever the tensor's layout.
      const bool nchw = ImageLayout() == kernels::DataLayout::kNCHW;
      order_ = nchw ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 1, 2, 3};
      h_axis_ = nchw ? 2 : 1;
    } else {
      UseIdentityOrder(rank);
    }
    auto input_bytes = [&](const std::vector<int64_t>& extent) {
      return AlignUp(LargestInputElements(extent) * OperandBytes(0));
    };
    auto cost = [&](const std::vector<int64_t>& extent) {
      return 2 * input_bytes(extent) + EpilogueBytes(extent);
    };
    TilePlan plan;
    plan.engine = anchor.op == OpKind::kAdaptiveAvgPool2d ? Engine::kPooling : Engine::kVector;
    if (!ChooseTile(std::vector<bool>(rank, false), cost, &plan)) return plan;
    plan.buffers.push_back(BufferClass{input_bytes(tile_), 2});
    AddEpilogueBuffers(tile_, &plan.buffers);
    return plan;
  }

  void Emit(TileScheduler* scheduler) const override {
    const TensorView input = layout_.ViewOf(Anchor().inputs[0]);
    ForEachTile(Anchor().shape, order_, tile_,
                [&](const std::vector<int64_t>& begin, const std::vector<int64_t>& extent) {
                  TensorBox out_box{-1, begin, extent, order_};
                  TensorBox in_box{-1, begin, extent, order_};
                  for (size_t d = 0; d < begin.size(); ++d) {
                    const kernels::Range range = SourceRange(d, begin[d], begin[d] + extent[d]);
                    in_box.begin[d] = range.begin;
                    in_box.extent[d] = range.end - range.begin;
                  }
                  TileRef in = scheduler->Load(0, input, in_box);
                  TileRef result = NewResult(scheduler, out_box);
                  ComputeCommand compute = MakeCompute(Anchor(), group_.anchor, {in}, result,
                                                       TileAttrs(in_box, out_box));
                  compute.elements = ComputeElements(out_box);
                  scheduler->Compute(std::move(compute));
                  EmitEpilogue(scheduler, result, out_box);
                });
  }

 private:
  kernels::DataLayout ImageLayout() const {
    if (const auto* resize = std::get_if<ResizeAttrs>(&Anchor().attrs)) {
      return resize->params.layout;
    }
    return std::get<AdaptivePoolAttrs>(Anchor().attrs).params.layout;
  }

  /*!
   * \brief Input indices of dim `d` read by outputs [first, end): the op's index map on the
   * mapped dims, the same indices elsewhere. A tile wholly in constant padding reads nothing;
   * it still loads one element, so that every compute has its input tile.
   */
  kernels::Range SourceRange(size_t d, int64_t first, int64_t end) const {
    const Node& anchor = Anchor();
    if (const auto* pad = std::get_if<PadAttrs>(&anchor.attrs)) {
      const kernels::Range range = kernels::PadSourceRange(pad->params, d, first, end);
      if (range.end > range.begin) return range;
      const int64_t row = std::clamp<int64_t>(first - pad->params.before[d], 0,
                                              std::max<int64_t>(pad->params.in_shape[d] - 1, 0));
      return kernels::Range{row, row + 1};
    }
    const int axis = static_cast<int>(d) - static_cast<int>(h_axis_);
    if (axis < 0 || axis > 1) return kernels::Range{first, end};
    if (const auto* resize = std::get_if<ResizeAttrs>(&anchor.attrs)) {
      return kernels::ResizeSourceRange(resize->params, axis, first, end);
    }
    return kernels::AdaptiveSourceRange(std::get<AdaptivePoolAttrs>(anchor.attrs).params, axis,
                                        first, end);
  }

  /*!
   * \brief Input elements of the largest box any tile of `extent` reads: measured over every
   * tile position, or (beyond kMeasuredTiles positions) bounded by the map's slope.
   */
  int64_t LargestInputElements(const std::vector<int64_t>& extent) const {
    constexpr int64_t kMeasuredTiles = 4096;
    const Shape& full = Anchor().shape;
    const Shape& in = graph_.nodes[Anchor().inputs[0]].shape;
    int64_t elements = 1;
    for (size_t d = 0; d < full.size(); ++d) {
      int64_t widest = 1;
      if (CeilDiv(full[d], extent[d]) > kMeasuredTiles) {
        // t outputs of a resize or adaptive pooling read at most ceil(t * in / out) + 3 inputs
        // (rounding and a bilinear neighbour); of a pad at most t, or all of a wrapped dim.
        const auto* pad = std::get_if<PadAttrs>(&Anchor().attrs);
        if (pad == nullptr) {
          widest = std::min(in[d], CeilDiv(extent[d] * in[d], full[d]) + 3);
        } else {
          widest =
              pad->params.mode == kernels::PadMode::kCircular ? in[d] : std::min(in[d], extent[d]);
        }
      } else {
        for (int64_t first = 0; first < full[d]; first += extent[d]) {
          const kernels::Range range = SourceRange(d, first, std::min(full[d], first + extent[d]));
          widest = std::max(widest, range.end - range.begin);
        }
      }
      elements *= std::max<int64_t>(widest, 1);
    }
    return elements;
  }

  /*! \brief The anchor's attributes for one tile: its boxes' origins, NHWC for image tiles. */
  OpAttrs TileAttrs(const TensorBox& in_box, const TensorBox& out_box) const {
    const Node& anchor = Anchor();
    if (const auto* pad = std::get_if<PadAttrs>(&anchor.attrs)) {
      PadAttrs attrs = *pad;
      attrs.params.in_begin = in_box.begin;
      attrs.params.out_begin = out_box.begin;
      return attrs;
    }
    auto place = [&](auto params) {
      params.layout = kernels::DataLayout::kNHWC;
      for (int s = 0; s < 2; ++s) {
        params.in_begin[s] = in_box.begin[h_axis_ + s];
        params.out_begin[s] = out_box.begin[h_axis_ + s];
      }
      return params;
    };
    if (const auto* resize = std::get_if<ResizeAttrs>(&anchor.attrs)) {
      return ResizeAttrs{place(resize->params)};
    }
    return AdaptivePoolAttrs{place(std::get<AdaptivePoolAttrs>(anchor.attrs).params)};
  }

  /*! \brief Work of a tile: one gather per output (four taps for bilinear), or every window tap
   * of adaptive pooling. */
  int64_t ComputeElements(const TensorBox& out_box) const {
    const int64_t outputs = kernels::NumElements(out_box.extent);
    const Node& anchor = Anchor();
    if (const auto* resize = std::get_if<ResizeAttrs>(&anchor.attrs)) {
      return outputs * (resize->params.method == kernels::ResizeMethod::kLinear ? 4 : 1);
    }
    if (const auto* pool = std::get_if<AdaptivePoolAttrs>(&anchor.attrs)) {
      int64_t taps[2] = {0, 0};
      for (int s = 0; s < 2; ++s) {
        for (int64_t k = 0; k < out_box.extent[h_axis_ + s]; ++k) {
          const kernels::Range window = kernels::AdaptiveWindow(
              out_box.begin[h_axis_ + s] + k, pool->params.in_size[s], pool->params.out_size[s]);
          taps[s] += window.end - window.begin;
        }
      }
      return outputs / (out_box.extent[h_axis_] * out_box.extent[h_axis_ + 1]) * taps[0] * taps[1];
    }
    return outputs;
  }

  size_t h_axis_ = 2;
};

}  // namespace

std::unique_ptr<TilingRule> MakeResampleRule(const Graph& graph, const FusedGroup& group,
                                             const LayoutPlan& layout, const NPUConfig& config) {
  return std::make_unique<ResampleRule>(graph, group, layout, config);
}

}  // namespace tiling
}  // namespace example_npu
