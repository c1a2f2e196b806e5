/*!
 * \file compiler/tiling_planner_conv_transpose.cc
 * \brief Tiling of conv2d_transpose (float, or qnn.conv2d_transpose's int8 x int8 -> int64
 * accumulators requantized per output tile) on the matrix engine: NHWC output tiles of (n, oh, ow,
 * oc) with the input box their phases read, the weight as (kh, kw, ic, oc) tiles, and (ungrouped)
 * the input channels split into accumulated chunks. Each tile's compute runs its
 * stride_h x stride_w phases as separate GEMMs (kernels/conv_transpose.h), so the cost is that
 * of the real multiplies, not of the zero-dilated convolution TVM's CPU build runs.
 */
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "compiler/tiling_planner_details.h"
#include "config/matrix_engine.h"
#include "kernels/conv_transpose.h"

namespace example_npu {
namespace tiling {
namespace {

class ConvTransposeRule : public GroupTiler {
 public:
  ConvTransposeRule(const Graph& graph, const FusedGroup& group, const LayoutPlan& layout,
                    const NPUConfig& config)
      : GroupTiler(graph, group, layout, config), attrs_(TransposedConvAttrsOf(Anchor().attrs)) {
    const kernels::ConvTransposeParams& p = attrs_.params;
    nchw_ = p.data_layout == kernels::DataLayout::kNCHW;
    order_ = nchw_ ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 1, 2, 3};
    h_axis_ = nchw_ ? 2 : 1;
    c_axis_ = nchw_ ? 1 : 3;
    in_ = graph_.nodes[Anchor().inputs[0]].shape;
    weight_ = graph_.nodes[Anchor().inputs[1]].shape;  // IOHW
    out_ = Anchor().shape;
    group_in_ = weight_[0] / p.groups;
    group_out_ = weight_[1];
  }

  TilePlan Plan() override {
    const int64_t item = OperandBytes(0), w_item = OperandBytes(1);
    const DType dtype = graph_.nodes[Anchor().inputs[0]].dtype;
    const int64_t dim = config_.matrix_engine_dim;
    const kernels::ConvTransposeParams& p = attrs_.params;
    const int64_t oh = out_[h_axis_], ow = out_[h_axis_ + 1], out_channels = out_[c_axis_];
    const bool grouped = p.groups > 1;
    std::vector<int64_t> oc_candidates;
    for (int64_t oc : Candidates(out_channels, grouped ? group_out_ : dim)) {
      if (!grouped || oc % group_out_ == 0) oc_candidates.push_back(oc);
    }
    const std::vector<int64_t> ic_candidates =
        grouped ? std::vector<int64_t>{group_in_} : Candidates(weight_[0], dim);
    const int64_t weight_bytes = kernels::NumElements(weight_) * w_item;
    const double dram_bw = config_.BandwidthBytesPerCycle(Tier::kDram);
    double best = std::numeric_limits<double>::infinity();
    TilePlan plan;
    plan.engine = Engine::kMatrix;
    for (int64_t oht : Candidates(oh, 1)) {
      for (int64_t owt : Candidates(ow, dim)) {
        for (int64_t oct : oc_candidates) {
          for (int64_t ict : ic_candidates) {
            const Sizes t{oht, owt, oct, ict};
            const int64_t in_box = LargestInputElements(t);
            const int64_t bytes = 2 * AlignUp(in_box * item) +
                                  2 * AlignUp(WeightTileElements(t) * w_item) +
                                  EpilogueBytes(OutTile(t));
            if (bytes > L1Budget()) continue;
            const int64_t spatial = out_[0] * CeilDiv(oh, oht) * CeilDiv(ow, owt);
            const int64_t oc_tiles = CeilDiv(out_channels, oct);
            const int64_t ic_tiles = grouped ? 1 : CeilDiv(weight_[0], ict);
            const double compute =
                static_cast<double>(spatial) * oc_tiles * ic_tiles * TileCycles(dtype, t);
            const bool resident = oct == out_channels && ic_tiles == 1;
            const double dram =
                static_cast<double>(spatial) * ic_tiles * (ic_tiles == 1 ? 1 : oc_tiles) * in_box *
                    item +
                (resident ? weight_bytes : static_cast<double>(weight_bytes) * spatial) +
                static_cast<double>(kernels::NumElements(out_)) * DTypeBytes(Anchor().dtype);
            const double time = EstimatedCycles(compute, dram / dram_bw, 0.0, spatial * oc_tiles,
                                                spatial * oc_tiles * ic_tiles);
            if (time < best) {
              best = time;
              tile_ = t;
            }
          }
        }
      }
    }
    if (!std::isfinite(best)) {
      plan.reason = "nn.conv2d_transpose: the smallest tile does not fit L1";
      return plan;
    }
    plan.buffers.push_back(BufferClass{AlignUp(LargestInputElements(tile_) * item), 2});
    plan.buffers.push_back(BufferClass{AlignUp(WeightTileElements(tile_) * w_item), 2});
    AddEpilogueBuffers(OutTile(tile_), &plan.buffers);
    plan.ok = true;
    plan.tile_shape = {tile_.oh, tile_.ow, tile_.oc, tile_.ic};
    plan.tiles = CountTiles(out_, OutTile(tile_)) * (grouped ? 1 : CeilDiv(weight_[0], tile_.ic));
    return plan;
  }

  void Emit(TileScheduler* scheduler) const override {
    const Node& anchor = Anchor();
    const kernels::ConvTransposeParams& p = attrs_.params;
    const TensorView input = layout_.ViewOf(anchor.inputs[0]);
    const TensorView weight = layout_.ViewOf(anchor.inputs[1]);
    const bool grouped = p.groups > 1;
    const int64_t ic_total = grouped ? group_in_ : weight_[0];
    ForEachTile(
        out_, order_, OutTile(tile_),
        [&](const std::vector<int64_t>& begin, const std::vector<int64_t>& extent) {
          TensorBox out_box{-1, begin, extent, order_};
          TileRef result = NewResult(scheduler, out_box);
          const int64_t oc0 = begin[c_axis_], oct = extent[c_axis_];
          const int64_t groups = grouped ? oct / group_out_ : 1;
          for (int64_t ic0 = 0; ic0 < ic_total; ic0 += tile_.ic) {
            const int64_t ict = std::min(tile_.ic, ic_total - ic0);
            TensorBox in_box{input.tensor, begin, extent, order_};
            kernels::ConvTransposeParams params = p;
            for (int s = 0; s < 2; ++s) {
              const int64_t axis = h_axis_ + s;
              const kernels::Range rows = InputRows(s, begin[axis], extent[axis]);
              in_box.begin[axis] = rows.begin;
              in_box.extent[axis] = rows.end - rows.begin;
              params.origin[s] = begin[axis] + p.origin[s] - rows.begin * p.strides[s];
            }
            in_box.begin[c_axis_] = grouped ? oc0 / group_out_ * group_in_ : ic0;
            in_box.extent[c_axis_] = grouped ? groups * group_in_ : ict;
            TensorBox w_box{
                weight.tensor,
                {in_box.begin[c_axis_], grouped ? 0 : oc0, 0, 0},
                {in_box.extent[c_axis_], grouped ? group_out_ : oct, weight_[2], weight_[3]},
                {2, 3, 0, 1}};
            params.groups = groups;
            params.data_layout = kernels::DataLayout::kNHWC;
            params.kernel_layout = kernels::TransposedKernelLayout::kHWIO;
            ComputeCommand compute =
                MakeCompute(anchor, group_.anchor,
                            {scheduler->Load(0, input, in_box), scheduler->Load(1, weight, w_box)},
                            result, TileAttrs(params));
            compute.accumulate = ic0 > 0;
            compute.round_to_half &= ic0 + ict == ic_total;
            int64_t macs = 0;
            for (const kernels::TransposedPhase& phase : kernels::TransposedPhases(
                     params, extent[h_axis_], extent[h_axis_ + 1], weight_[2], weight_[3])) {
              macs += phase.pixels * phase.taps;
            }
            compute.macs = macs * oct * (grouped ? group_in_ : ict);
            scheduler->Compute(std::move(compute));
          }
          EmitEpilogue(scheduler, Requantized(scheduler, result, oc0), out_box);
        });
  }

 private:
  struct Sizes {
    int64_t oh, ow, oc, ic;
  };

  /*! \brief The anchor's attributes with the kernel parameters of one tile (a quantized anchor's
   * without its per-channel tables, see StepAttrs). */
  OpAttrs TileAttrs(const kernels::ConvTransposeParams& params) const {
    ConvTransposeAttrs tile = attrs_;
    tile.params = params;
    if (!IsQuantized()) return tile;
    QnnAttrs qnn = std::get<QnnAttrs>(StepAttrs());
    qnn.transposed = tile;
    return qnn;
  }

  std::vector<int64_t> OutTile(const Sizes& t) const {
    return nchw_ ? std::vector<int64_t>{1, t.oc, t.oh, t.ow}
                 : std::vector<int64_t>{1, t.oh, t.ow, t.oc};
  }

  int64_t WeightTileElements(const Sizes& t) const {
    const bool grouped = attrs_.params.groups > 1;
    const int64_t in_channels = grouped ? t.oc / group_out_ * group_in_ : t.ic;
    return weight_[2] * weight_[3] * in_channels * (grouped ? group_out_ : t.oc);
  }

  /*! \brief Input rows (s = 0) or columns (s = 1) that outputs [first, first + count) read,
   * clipped to the input (at least one, so that every compute has its input tile). */
  kernels::Range InputRows(int s, int64_t first, int64_t count) const {
    const kernels::ConvTransposeParams& p = attrs_.params;
    const kernels::IndexSpan span = kernels::TransposedSourceSpan(
        first, first + count, p.origin[s], p.strides[s], p.dilation[s], weight_[2 + s]);
    const int64_t extent = in_[h_axis_ + s];
    const int64_t begin = std::clamp<int64_t>(span.begin, 0, extent - 1);
    return kernels::Range{begin, std::max(begin + 1, std::min(span.end, extent))};
  }

  /*! \brief Input elements of the largest input box: t outputs along an axis reach the
   * multiples of the stride in a window of t - 1 + (k - 1) * dilation, at most
   * floor(that / stride) + 1 input rows. */
  int64_t LargestInputElements(const Sizes& t) const {
    const kernels::ConvTransposeParams& p = attrs_.params;
    const int64_t tile[2] = {t.oh, t.ow};
    int64_t elements = attrs_.params.groups > 1 ? t.oc / group_out_ * group_in_ : t.ic;
    for (int s = 0; s < 2; ++s) {
      const int64_t window = tile[s] - 1 + (weight_[2 + s] - 1) * p.dilation[s];
      elements *= std::min(in_[h_axis_ + s], window / p.strides[s] + 1);
    }
    return elements;
  }

  /*! \brief Matrix-engine cycles of one interior tile: its phases, one GEMM each. */
  double TileCycles(DType dtype, const Sizes& t) const {
    const kernels::ConvTransposeParams& p = attrs_.params;
    const int64_t groups = p.groups > 1 ? t.oc / group_out_ : 1;
    const int64_t depth = p.groups > 1 ? group_in_ : t.ic;
    double cycles = 0.0;
    for (const kernels::TransposedPhase& phase :
         kernels::TransposedPhases(p, t.oh, t.ow, weight_[2], weight_[3])) {
      if (phase.taps == 0) continue;
      cycles += MatrixEngineCycles(config_, dtype,
                                   MatrixWork{phase.pixels, t.oc, phase.taps * depth, groups});
    }
    return cycles;
  }

  ConvTransposeAttrs attrs_;
  bool nchw_ = true;
  std::vector<int64_t> order_;
  size_t h_axis_ = 2, c_axis_ = 1;
  Shape in_, weight_, out_;
  int64_t group_in_ = 1, group_out_ = 1;
  Sizes tile_{1, 1, 1, 1};
};

}  // namespace

std::unique_ptr<TilingRule> MakeConvTransposeRule(const Graph& graph, const FusedGroup& group,
                                                  const LayoutPlan& layout,
                                                  const NPUConfig& config) {
  return std::make_unique<ConvTransposeRule>(graph, group, layout, config);
}

}  // namespace tiling
}  // namespace example_npu
