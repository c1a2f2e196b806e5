/*!
 * \file compiler/tiling_planner_gemm.cc
 * \brief Tiling rules of the matrix engine: matmul (batched, broadcast) and convolution.
 *
 * Both search tile sizes aligned to the engine (multiples of matrix_engine_dim) for the least
 * estimated time max(compute, DRAM traffic / bandwidth), where traffic accounts for which operand
 * a loop order keeps resident: matmul iterates (batch, m, n, k) so an lhs strip is reused across
 * n when K is not split; convolution iterates (n, oh, ow, oc, ic) so an input tile is reused
 * across output-channel blocks and the whole weight stays resident when it fits. Re-read weights
 * that fit L2 are staged there once.
 */
#include <tvm/ffi/error.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "compiler/tiling_planner_details.h"
#include "config/matrix_engine.h"

namespace example_npu {
namespace tiling {

std::vector<int64_t> Candidates(int64_t extent, int64_t granule) {
  std::set<int64_t> values = {extent};
  for (int64_t v = granule; v < extent; v *= 2) values.insert(v);
  for (int64_t v = 1; v < std::min(extent, granule); v *= 2) values.insert(v);
  return std::vector<int64_t>(values.rbegin(), values.rend());
}

std::vector<std::pair<int64_t, int64_t>> TileExtents(int64_t extent, int64_t tile) {
  std::vector<std::pair<int64_t, int64_t>> extents;
  if (extent / tile > 0) extents.emplace_back(tile, extent / tile);
  if (extent % tile > 0) extents.emplace_back(extent % tile, 1);
  return extents;
}

// Fixed cycles per tile: issuing its load, compute and store commands and filling the engine.
constexpr double kTileOverheadCycles = 32;

/*!
 * \brief Estimated cycles of a tiling: with double buffering the steady state is bound by the
 * slowest of compute, DRAM and CMX traffic. What the bottleneck cannot hide is the pipeline's
 * fill and drain: the first tile's loads and the last tile's compute and store, about one output
 * tile's share of the other resources. Plus a fixed cost per step (an output tile times its
 * reduction chunks). Small DRAM and compute terms break ties in favour of less traffic and of
 * tiles that fill whole matrix-engine folds.
 */
double EstimatedCycles(double compute, double dram, double l2, int64_t output_tiles,
                       int64_t steps) {
  const double steady = std::max({compute, dram, l2});
  return steady + (compute + dram + l2 - steady) / output_tiles + kTileOverheadCycles * steps +
         0.001 * (dram + compute);
}

namespace {

/*! \brief Inserts a unit dim (stride 0) at `position`. */
TensorView InsertUnitDim(TensorView view, size_t position) {
  view.shape.insert(view.shape.begin() + position, 1);
  view.strides.insert(view.strides.begin() + position, 0);
  return view;
}

/*!
 * \brief `view` (in the output's dims `full`) with its first `count` dims read as one dim at
 * position count - 1, unit dims before it; nullopt unless they index memory as one run (or are
 * all unit) and each non-unit one spans the whole of `full` there.
 */
std::optional<TensorView> MergeLeadingDims(const TensorView& view, const Shape& full,
                                           size_t count) {
  TensorView merged = view;
  int64_t extent = 1, stride = 0;
  std::optional<size_t> previous;
  for (size_t d = 0; d < count; ++d) {
    if (view.shape[d] == 1) continue;
    if (view.shape[d] != full[d]) return std::nullopt;  // broadcast along part of the run
    if (previous && view.strides[*previous] != view.strides[d] * view.shape[d]) {
      return std::nullopt;
    }
    previous = d;
    extent *= view.shape[d];
    stride = view.strides[d];
  }
  if (previous && extent != kernels::NumElements(Shape(full.begin(), full.begin() + count))) {
    return std::nullopt;  // unit in some dim where the output is not: a broadcast, not a run
  }
  for (size_t d = 0; d < count; ++d) {
    merged.shape[d] = d + 1 == count ? extent : 1;
    merged.strides[d] = d + 1 == count ? stride : 0;
  }
  return merged;
}

class MatmulRule : public GroupTiler {
 public:
  MatmulRule(const Graph& graph, const FusedGroup& group, const LayoutPlan& layout,
             const NPUConfig& config)
      : GroupTiler(graph, group, layout, config) {
    const Shape& a = graph_.nodes[Anchor().inputs[0]].shape;
    const Shape& b = graph_.nodes[Anchor().inputs[1]].shape;
    lhs_vector_ = a.size() == 1;
    rhs_vector_ = b.size() == 1;
    out_ =
        Lift(TensorView{-1, Anchor().shape, std::vector<int64_t>(Anchor().shape.size(), 0)}).shape;
    rank_ = out_.size();
    merge_rows_ = CanMergeBatchIntoRows();
    if (merge_rows_) {
      out_ = MergeLeadingDims(TensorView{-1, out_, Shape(rank_, 0)}, out_, rank_ - 1)->shape;
    }
    m_ = out_[rank_ - 2];
    n_ = out_[rank_ - 1];
    k_ = lhs_vector_ ? a[0] : a.back();
  }

  TensorView Lift(const TensorView& view) const override {
    TensorView lifted = view;
    if (lhs_vector_) lifted = InsertUnitDim(lifted, lifted.shape.size() - (rhs_vector_ ? 0 : 1));
    if (rhs_vector_) lifted = InsertUnitDim(lifted, lifted.shape.size());
    if (merge_rows_) lifted = *MergeLeadingDims(lifted, full_out_, rank_ - 1);
    return lifted;
  }

  TilePlan Plan() override {
    const int64_t item = OperandBytes(0), w_item = OperandBytes(1);
    const int64_t out_item = DTypeBytes(Anchor().dtype);
    const DType compute_type = graph_.nodes[Anchor().inputs[0]].dtype;
    const int64_t dim = config_.matrix_engine_dim;
    const int64_t batches = kernels::NumElements(Shape(out_.begin(), out_.end() - 2));
    const int64_t rhs_bytes = StagedBytes(1);
    const double dram_bw = config_.BandwidthBytesPerCycle(Tier::kDram);
    const double l2_bw = config_.BandwidthBytesPerCycle(Tier::kL2);
    double best = std::numeric_limits<double>::infinity();
    TilePlan plan;
    plan.engine = Engine::kMatrix;
    for (int64_t mt : Candidates(m_, dim)) {
      for (int64_t nt : Candidates(n_, dim)) {
        for (int64_t kt : Candidates(k_, dim)) {
          std::vector<int64_t> out_tile = OutTile(mt, nt);
          const int64_t bytes =
              2 * AlignUp(mt * kt * item) + 2 * AlignUp(kt * nt * w_item) + EpilogueBytes(out_tile);
          if (bytes > L1Budget()) continue;
          const int64_t m_tiles = CeilDiv(m_, mt), n_tiles = CeilDiv(n_, nt);
          const double compute = batches * EngineCycles(compute_type, mt, nt, kt);
          const double lhs =
              static_cast<double>(batches) * m_ * k_ * item * (kt == k_ ? 1 : n_tiles);
          const double rhs = static_cast<double>(batches) * k_ * n_ * w_item * m_tiles;
          const bool stage = StageInL2(1, m_tiles > 1, rhs_bytes);
          const double dram = lhs + (stage ? rhs_bytes : rhs) + batches * m_ * n_ * out_item;
          const int64_t output_tiles = batches * m_tiles * n_tiles;
          const double time = EstimatedCycles(compute, dram / dram_bw, stage ? rhs / l2_bw : 0.0,
                                              output_tiles, output_tiles * CeilDiv(k_, kt));
          if (time < best) {
            best = time;
            mt_ = mt, nt_ = nt, kt_ = kt, stage_rhs_ = stage;
          }
        }
      }
    }
    if (!std::isfinite(best)) {
      plan.reason = "matmul: the smallest tile does not fit L1";
      return plan;
    }
    plan.buffers.push_back(BufferClass{AlignUp(mt_ * kt_ * item), 2});
    plan.buffers.push_back(BufferClass{AlignUp(kt_ * nt_ * w_item), 2, stage_rhs_, rhs_bytes});
    AddEpilogueBuffers(OutTile(mt_, nt_), &plan.buffers);
    plan.ok = true;
    plan.tile_shape = {mt_, nt_, kt_};
    plan.tiles = batches * CeilDiv(m_, mt_) * CeilDiv(n_, nt_) * CeilDiv(k_, kt_);
    return plan;
  }

  void Emit(TileScheduler* scheduler) const override {
    const Node& anchor = Anchor();
    TensorView lhs = OperandMatrix(0);
    TensorView rhs = OperandMatrix(1);
    std::vector<int64_t> order(rank_);
    std::iota(order.begin(), order.end(), 0);
    ForEachTile(
        out_, order, OutTile(mt_, nt_),
        [&](const std::vector<int64_t>& begin, const std::vector<int64_t>& extent) {
          TensorBox out_box{-1, begin, extent, order};
          TileRef result = NewResult(scheduler, out_box);
          const int64_t mt = extent[rank_ - 2], nt = extent[rank_ - 1];
          for (int64_t k0 = 0; k0 < k_; k0 += kt_) {
            const int64_t kt = std::min(kt_, k_ - k0);
            TensorBox a = BatchBox(lhs, out_box, order);
            a.begin[rank_ - 1] = k0, a.extent[rank_ - 1] = kt;
            TensorBox b = BatchBox(rhs, out_box, order);
            b.begin[rank_ - 2] = k0, b.extent[rank_ - 2] = kt;
            b.begin[rank_ - 1] = begin[rank_ - 1], b.extent[rank_ - 1] = nt;
            ComputeCommand compute = MakeCompute(
                anchor, group_.anchor, {scheduler->Load(0, lhs, a), scheduler->Load(1, rhs, b)},
                result, StepAttrs());
            compute.accumulate = k0 > 0;
            compute.round_to_half &= k0 + kt == k_;
            compute.macs = mt * nt * kt;
            scheduler->Compute(std::move(compute));
          }
          EmitEpilogue(scheduler, Requantized(scheduler, result, begin[rank_ - 1]), out_box);
        });
  }

 private:
  /*! \brief Matrix-engine cycles of one batch's tiles (edge tiles included). */
  double EngineCycles(DType dtype, int64_t mt, int64_t nt, int64_t kt) const {
    double cycles = 0.0;
    for (auto [m, m_count] : TileExtents(m_, mt)) {
      for (auto [n, n_count] : TileExtents(n_, nt)) {
        for (auto [k, k_count] : TileExtents(k_, kt)) {
          cycles += static_cast<double>(m_count * n_count * k_count) *
                    MatrixEngineCycles(config_, dtype, MatrixWork{m, n, k, 1});
        }
      }
    }
    return cycles;
  }

  std::vector<int64_t> OutTile(int64_t mt, int64_t nt) const {
    std::vector<int64_t> tile(rank_, 1);
    tile[rank_ - 2] = mt;
    tile[rank_ - 1] = nt;
    return tile;
  }

  /*! \brief Operand `index` as a rank_-dim [batch..., rows, cols] view (1-D operands lifted). */
  TensorView OperandMatrix(size_t index) const {
    TensorView view = layout_.ViewOf(Anchor().inputs[index]);
    if (view.shape.size() == 1) view = InsertUnitDim(view, index == 0 ? 0 : 1);
    const size_t pad = rank_ - view.shape.size();
    view.shape.insert(view.shape.begin(), pad, 1);
    view.strides.insert(view.strides.begin(), pad, 0);
    if (merge_rows_ && index == 0) {
      Shape rows = full_out_;
      rows[rank_ - 1] = view.shape[rank_ - 1];  // the lhs has K columns where the output has N
      view = *MergeLeadingDims(view, rows, rank_ - 1);
    }
    return view;
  }

  /*!
   * \brief A batched matmul whose rhs is the same for every batch ([B, M, K] x [K, N], as ONNX
   * exports a Linear over a sequence) is one [B*M, K] x [K, N] matmul when the lhs rows, the
   * output and every fused side operand step through their batch and row dims as one run: the
   * weight then streams once per row tile, not once per batch.
   */
  bool CanMergeBatchIntoRows() {
    if (lhs_vector_ || rhs_vector_ || rank_ < 3) return false;
    full_out_ = out_;
    if (kernels::NumElements(Shape(out_.begin(), out_.end() - 2)) == 1) return false;
    const TensorView rhs = OperandMatrix(1);
    for (size_t d = 0; d + 2 < rank_; ++d) {
      if (rhs.shape[d] != 1) return false;
    }
    const TensorView lhs = OperandMatrix(0);
    Shape lhs_rows = out_;
    lhs_rows[rank_ - 1] = lhs.shape[rank_ - 1];  // K columns where the output has N
    if (!MergeLeadingDims(lhs, lhs_rows, rank_ - 1)) return false;
    std::vector<TensorView> views;
    views.push_back(Lift(layout_.ViewOf(group_.output())));
    for (int64_t id : group_.chain) {
      const Node& node = graph_.nodes[id];
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        if (!IsMember(node.inputs[k])) views.push_back(OperandView(node, k, rank_));
      }
    }
    return std::all_of(views.begin(), views.end(), [&](const TensorView& view) {
      return MergeLeadingDims(view, out_, rank_ - 1).has_value();
    });
  }

  /*!
   * \brief The operand box at the output tile's batch index (broadcast dims read index 0) and
   * rows; the caller narrows the reduction dim (and the rhs columns).
   */
  TensorBox BatchBox(const TensorView& view, const TensorBox& out_box,
                     const std::vector<int64_t>& order) const {
    TensorBox box{view.tensor, out_box.begin, out_box.extent, order};
    for (size_t d = 0; d + 2 < rank_; ++d) {
      if (view.shape[d] == 1) box.begin[d] = 0;
    }
    return box;
  }

  bool lhs_vector_ = false;
  bool rhs_vector_ = false;
  bool merge_rows_ = false;  // batch dims read as more rows (CanMergeBatchIntoRows)
  Shape full_out_;           // the output's lifted shape before merging
  Shape out_;
  size_t rank_ = 2;
  int64_t m_ = 1, n_ = 1, k_ = 1;
  int64_t mt_ = 1, nt_ = 1, kt_ = 1;
  bool stage_rhs_ = false;
};

/*!
 * \brief conv1d / conv2d on NHWC tiles: output tiles of (n, oh, ow, oc) with the input halo, and
 * (for ungrouped convolution) the input channels split into accumulated chunks. A grouped
 * convolution's tiles hold whole groups; when not even one group fits L1 (wav2vec2's positional
 * conv: 16 groups of 48 channels, 128 taps), they hold part of one group's output channels and
 * split its input channels like an ungrouped convolution's.
 */
class ConvRule : public GroupTiler {
 public:
  ConvRule(const Graph& graph, const FusedGroup& group, const LayoutPlan& layout,
           const NPUConfig& config)
      : GroupTiler(graph, group, layout, config),
        p_(IsQuantized() ? std::get<QnnAttrs>(Anchor().attrs).conv
                         : std::get<ConvAttrs>(Anchor().attrs).params),
        conv1d_(Anchor().op == OpKind::kConv1d) {
    nchw_ = p_.data_layout == kernels::DataLayout::kNCHW;
    oihw_ = p_.kernel_layout == kernels::KernelLayout::kOIHW;
    out_ = LiftConv1dData(Anchor().shape, p_.data_layout);
    in_ = LiftConv1dData(graph_.nodes[Anchor().inputs[0]].shape, p_.data_layout);
    weight_ = LiftConv1dWeight(graph_.nodes[Anchor().inputs[1]].shape, p_.kernel_layout);
    order_ = nchw_ ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 1, 2, 3};
    c_axis_ = nchw_ ? 1 : 3;
    kh_ = oihw_ ? weight_[2] : weight_[0];
    kw_ = oihw_ ? weight_[3] : weight_[1];
    channels_ = in_[c_axis_];
    out_channels_ = out_[c_axis_];
    group_in_ = channels_ / p_.groups;
    group_out_ = out_channels_ / p_.groups;
  }

  TensorView Lift(const TensorView& view) const override {
    if (!conv1d_) return view;
    return InsertUnitDim(view, nchw_ ? 2 : 1);
  }

  TilePlan Plan() override {
    const int64_t dim = config_.matrix_engine_dim;
    // Output-channel tiles hold whole groups; only ungrouped convolutions split input channels.
    const int64_t oc_granule = p_.groups == 1 ? dim : group_out_;
    std::vector<int64_t> oc_candidates;
    for (int64_t oc : Candidates(out_channels_, oc_granule)) {
      if (p_.groups == 1 || oc % group_out_ == 0) oc_candidates.push_back(oc);
    }
    std::vector<int64_t> ic_candidates =
        p_.groups == 1 ? Candidates(channels_, dim) : std::vector<int64_t>{group_in_};
    TilePlan plan = Search(oc_candidates, ic_candidates);
    if (!plan.ok && p_.groups > 1) {
      // Not one whole group fits: tiles of a divisor of a group's output channels (never
      // straddling two groups), its input channels in accumulated chunks.
      partial_groups_ = true;
      oc_candidates.clear();
      for (int64_t oc : Candidates(group_out_, dim)) {
        if (oc < group_out_ && group_out_ % oc == 0) oc_candidates.push_back(oc);
      }
      plan = Search(oc_candidates, Candidates(group_in_, dim));
    }
    return plan;
  }

  /*! \brief The cheapest tiling among the candidate channel tiles (plan.ok false if none fits). */
  TilePlan Search(const std::vector<int64_t>& oc_candidates,
                  const std::vector<int64_t>& ic_candidates) {
    const int64_t item = OperandBytes(0), w_item = OperandBytes(1);
    const DType compute_type = graph_.nodes[Anchor().inputs[0]].dtype;
    const int64_t dim = config_.matrix_engine_dim;
    const bool depthwise = group_in_ == 1 && p_.groups > 1;
    // Depthwise convolution runs on the vector unit (MACs at its lane rate per type).
    const double depthwise_macs_per_cycle = static_cast<double>(config_.vector_unit_width) *
                                            config_.MatrixMacsPerCycle(compute_type) / (dim * dim);
    const int64_t weight_bytes = kernels::NumElements(weight_) * w_item;
    const int64_t staged_bytes = StagedBytes(1);  // weight_bytes unless the weight is a view
    const double dram_bw = config_.BandwidthBytesPerCycle(Tier::kDram);
    const double l2_bw = config_.BandwidthBytesPerCycle(Tier::kL2);
    // Where the remote bytes come from (sim/memory_placement.h): weights from flash and feature
    // maps from the SRAM arena on NPUs that keep them there, so a tile that re-reads slow flash
    // weights per spatial tile costs what it will (Ethos-U reads a layer's weights once).
    const double weight_bw = config_.weight_memory_kind() == WeightMemory::kFlash
                                 ? config_.FlashBytesPerCycle()
                                 : dram_bw;
    const double feature_map_bw = config_.feature_map_memory_kind() == FeatureMapMemory::kSram
                                      ? config_.sram_bandwidth_bytes_per_cycle
                                      : dram_bw;
    const int64_t oh = out_[nchw_ ? 2 : 1], ow = out_[nchw_ ? 3 : 2];
    const TensorView input = Lift(layout_.ViewOf(Anchor().inputs[0]));
    const TensorView output = Lift(layout_.ViewOf(group_.output()));
    double best = std::numeric_limits<double>::infinity();
    TilePlan plan;
    plan.engine = depthwise ? Engine::kVector : Engine::kMatrix;
    for (int64_t oht : Candidates(oh, 1)) {
      for (int64_t owt : Candidates(ow, dim)) {
        for (int64_t oct : oc_candidates) {
          for (int64_t ict : ic_candidates) {
            Sizes t{oht, owt, oct, ict};
            TensorBox in_tile = LargestInputBox(t);
            const int64_t in_box = kernels::NumElements(in_tile.extent);
            const int64_t w_box = kh_ * kw_ * ict * oct;
            const int64_t bytes = 2 * AlignUp(in_box * item) + 2 * AlignUp(w_box * w_item) +
                                  EpilogueBytes(OutTile(t));
            if (bytes > L1Budget()) continue;
            const int64_t spatial = out_[0] * CeilDiv(oh, oht) * CeilDiv(ow, owt);
            const int64_t oc_tiles = CeilDiv(out_channels_, oct);
            const int64_t ic_tiles = SplitsInputChannels() ? CeilDiv(InputChannels(), ict) : 1;
            const double compute =
                depthwise ? static_cast<double>(spatial) * oc_tiles * CeilDiv(oht * owt, dim) *
                                dim * CeilDiv(oct, dim) * dim * kh_ * kw_ / depthwise_macs_per_cycle
                          : out_[0] * EngineCycles(compute_type, t);
            const bool resident = oct == out_channels_ && ic_tiles == 1;
            const double weight_reads = resident ? weight_bytes : weight_bytes * spatial;
            const bool stage = StageInL2(1, !resident, staged_bytes);
            // Each input-channel chunk is read once per spatial tile, and again for every
            // output-channel block when the channels are split (the chunk cannot stay resident)
            // or the NPU re-reads a narrow input per block of output channels.
            const double input_reads =
                static_cast<double>(spatial) * ic_tiles * BusBytes(input, in_tile, Anchor().dtype) *
                (ic_tiles == 1 && !partial_groups_
                     ? config_.NarrowInputReads(channels_ * item, out_channels_)
                     : oc_tiles);
            const double output_writes = static_cast<double>(spatial) * oc_tiles *
                                         BusBytes(output, BoxAt(t, 0, 0, 0), Anchor().dtype);
            const double weight_dram = stage ? staged_bytes : weight_reads;
            const double dram = input_reads + weight_dram + output_writes;
            const double memory_cycles =
                weight_bw == dram_bw && feature_map_bw == dram_bw
                    ? dram / dram_bw
                    : (input_reads + output_writes) / feature_map_bw + weight_dram / weight_bw;
            const double time =
                EstimatedCycles(compute, memory_cycles, stage ? weight_reads / l2_bw : 0.0,
                                spatial * oc_tiles, spatial * oc_tiles * ic_tiles);
            // On a tie, the wider tile: longer rows for the DMA and the vector unit.
            if (time < best || (time == best && owt > tile_.ow)) {
              best = time;
              tile_ = t;
              stage_weights_ = stage;
            }
          }
        }
      }
    }
    if (!std::isfinite(best)) {
      plan.reason = std::string(OpKindName(Anchor().op)) + ": the smallest tile does not fit L1";
      return plan;
    }
    const int64_t in_box = kernels::NumElements(LargestInputBox(tile_).extent);
    plan.buffers.push_back(BufferClass{AlignUp(in_box * item), 2});
    plan.buffers.push_back(BufferClass{AlignUp(kh_ * kw_ * tile_.ic * tile_.oc * w_item), 2,
                                       stage_weights_, staged_bytes});
    AddEpilogueBuffers(OutTile(tile_), &plan.buffers);
    plan.ok = true;
    plan.tile_shape = {tile_.oh, tile_.ow, tile_.oc, tile_.ic};
    plan.tiles = tiling::CountTiles(out_, OutTile(tile_)) *
                 (SplitsInputChannels() ? CeilDiv(InputChannels(), tile_.ic) : 1);
    return plan;
  }

  void Emit(TileScheduler* scheduler) const override {
    const Node& anchor = Anchor();
    TensorView input = Lift(layout_.ViewOf(anchor.inputs[0]));
    TensorView weight = LiftWeight(layout_.ViewOf(anchor.inputs[1]));
    const std::vector<int64_t> weight_order =
        oihw_ ? std::vector<int64_t>{2, 3, 1, 0} : std::vector<int64_t>{0, 1, 2, 3};
    ForEachTile(out_, order_, OutTile(tile_),
                [&](const std::vector<int64_t>& begin, const std::vector<int64_t>& extent) {
                  TensorBox out_box{-1, begin, extent, order_};
                  TileRef result = NewResult(scheduler, out_box);
                  const int64_t oc0 = begin[c_axis_], oct = extent[c_axis_];
                  const int64_t ic_total = InputChannels();
                  for (int64_t ic0 = 0; ic0 < ic_total; ic0 += tile_.ic) {
                    const int64_t ict = std::min(tile_.ic, ic_total - ic0);
                    Halo halo = InputBox(tile_, out_box, ic0);
                    halo.box.extent[c_axis_] =
                        SplitsInputChannels() ? ict : TileGroups(oct) * group_in_;
                    TensorBox w_box{weight.tensor, {0, 0, 0, 0}, weight_, weight_order};
                    const int o_axis = oihw_ ? 0 : 3, i_axis = oihw_ ? 1 : 2;
                    w_box.begin[o_axis] = oc0, w_box.extent[o_axis] = oct;
                    w_box.begin[i_axis] = ic0, w_box.extent[i_axis] = ict;
                    kernels::Conv2dParams params = p_;
                    params.padding = halo.padding;
                    params.groups = TileGroups(oct);
                    params.data_layout = kernels::DataLayout::kNHWC;
                    params.kernel_layout = kernels::KernelLayout::kHWIO;
                    ComputeCommand compute = MakeCompute(
                        anchor, group_.anchor,
                        {scheduler->Load(0, input, halo.box), scheduler->Load(1, weight, w_box)},
                        result, TileAttrs(params));
                    if (group_in_ == 1 && p_.groups > 1) compute.engine = Engine::kVector;
                    compute.accumulate = ic0 > 0;
                    compute.round_to_half &= ic0 + ict == ic_total;
                    compute.macs = kernels::NumElements(result.shape) * ict * kh_ * kw_;
                    scheduler->Compute(std::move(compute));
                  }
                  EmitEpilogue(scheduler, Requantized(scheduler, result, oc0), out_box);
                });
  }

 private:
  struct Sizes {
    int64_t oh, ow, oc, ic;
  };
  struct Halo {
    TensorBox box;
    std::array<int64_t, 4> padding;
  };

  /*! \brief Matrix-engine cycles of one image's tiles of size `t` (edge tiles included). */
  double EngineCycles(DType dtype, const Sizes& t) const {
    const int64_t oh = out_[nchw_ ? 2 : 1], ow = out_[nchw_ ? 3 : 2];
    const int64_t ic_total = InputChannels();
    double cycles = 0.0;
    for (auto [h, h_count] : TileExtents(oh, t.oh)) {
      for (auto [w, w_count] : TileExtents(ow, t.ow)) {
        for (auto [c, c_count] : TileExtents(out_channels_, t.oc)) {
          for (auto [i, i_count] : TileExtents(ic_total, t.ic)) {
            const MatrixWork work{h * w, c, kh_ * kw_ * i, TileGroups(c)};
            cycles += static_cast<double>(h_count * w_count * c_count * i_count) *
                      MatrixEngineCycles(config_, dtype, work);
          }
        }
      }
    }
    return cycles;
  }

  /*! \brief The anchor's attributes with the convolution parameters of one tile. */
  OpAttrs TileAttrs(const kernels::Conv2dParams& params) const {
    if (IsQuantized()) {
      QnnAttrs attrs = std::get<QnnAttrs>(StepAttrs());
      attrs.conv = params;
      return attrs;
    }
    return ConvAttrs{params};
  }

  std::vector<int64_t> OutTile(const Sizes& t) const {
    return nchw_ ? std::vector<int64_t>{1, t.oc, t.oh, t.ow}
                 : std::vector<int64_t>{1, t.oh, t.ow, t.oc};
  }

  TensorBox BoxAt(const Sizes& t, int64_t oh0, int64_t ow0, int64_t oc0) const {
    std::vector<int64_t> begin =
        nchw_ ? std::vector<int64_t>{0, oc0, oh0, ow0} : std::vector<int64_t>{0, oh0, ow0, oc0};
    return TensorBox{-1, begin, OutTile(t), order_};
  }

  TensorView LiftWeight(const TensorView& view) const {
    if (!conv1d_) return view;
    return InsertUnitDim(view, oihw_ ? 2 : 0);
  }

  /*!
   * \brief The input box of an interior tile: the full window span, which edge tiles (clipped by
   * padding) never exceed. Buffers are sized by it.
   */
  TensorBox LargestInputBox(const Sizes& t) const {
    TensorBox box = InputBox(t, BoxAt(t, 0, 0, 0), 0).box;
    const int64_t h_axis = nchw_ ? 2 : 1;
    const int64_t out_extent[2] = {t.oh, t.ow};
    const int64_t kernel[2] = {kh_, kw_};
    for (int s = 0; s < 2; ++s) {
      const int64_t span =
          (out_extent[s] - 1) * p_.strides[s] + (kernel[s] - 1) * p_.dilation[s] + 1;
      box.extent[h_axis + s] = std::min(in_[h_axis + s], span);
    }
    return box;
  }

  /*! \brief Input rows/cols/channels an output box reads, and the padding left at its edges. */
  Halo InputBox(const Sizes& t, const TensorBox& out_box, int64_t ic0) const {
    Halo halo{TensorBox{-1, out_box.begin, out_box.extent, order_}, {0, 0, 0, 0}};
    const int64_t h_axis = nchw_ ? 2 : 1;
    for (int64_t s = 0; s < 2; ++s) {
      const int64_t axis = h_axis + s;
      const int64_t kernel = s == 0 ? kh_ : kw_;
      const int64_t first = out_box.begin[axis] * p_.strides[s] - p_.padding[s];
      const int64_t last = (out_box.begin[axis] + out_box.extent[axis] - 1) * p_.strides[s] -
                           p_.padding[s] + (kernel - 1) * p_.dilation[s] + 1;
      const ClippedWindow window = ClipWindow(first, last, in_[axis]);
      halo.box.begin[axis] = window.begin;
      halo.box.extent[axis] = window.extent;
      halo.padding[s] = window.pad_before;
      halo.padding[s + 2] = window.pad_after;
    }
    const int64_t oc0 = out_box.begin[c_axis_];
    const int64_t group_begin = p_.groups == 1 ? 0 : oc0 / group_out_ * group_in_;
    halo.box.begin[c_axis_] = group_begin + (SplitsInputChannels() ? ic0 : 0);
    halo.box.extent[c_axis_] =
        SplitsInputChannels() ? std::min(t.ic, InputChannels()) : TileGroups(t.oc) * group_in_;
    return halo;
  }

  /*! \brief Whether tiles split the input channels they reduce over into accumulated chunks. */
  bool SplitsInputChannels() const { return p_.groups == 1 || partial_groups_; }
  /*! \brief The input channels one output channel reduces over. */
  int64_t InputChannels() const { return p_.groups == 1 ? channels_ : group_in_; }
  /*! \brief The groups of a tile of `oc` output channels (1 for a part of one group). */
  int64_t TileGroups(int64_t oc) const {
    return p_.groups == 1 || partial_groups_ ? 1 : oc / group_out_;
  }

  kernels::Conv2dParams p_;
  bool conv1d_ = false;
  bool nchw_ = true;
  bool oihw_ = true;
  Shape out_, in_, weight_;
  std::vector<int64_t> order_;
  int64_t c_axis_ = 1;
  int64_t kh_ = 1, kw_ = 1;
  int64_t channels_ = 1, out_channels_ = 1, group_in_ = 1, group_out_ = 1;
  bool partial_groups_ = false;  // tiles hold part of one group (see the class comment)
  Sizes tile_{1, 1, 1, 1};
  bool stage_weights_ = false;
};

}  // namespace

std::unique_ptr<TilingRule> MakeConvRule(const Graph& graph, const FusedGroup& group,
                                         const LayoutPlan& layout, const NPUConfig& config) {
  return std::make_unique<ConvRule>(graph, group, layout, config);
}

std::unique_ptr<TilingRule> MakeMatmulRule(const Graph& graph, const FusedGroup& group,
                                           const LayoutPlan& layout, const NPUConfig& config) {
  return std::make_unique<MatmulRule>(graph, group, layout, config);
}

}  // namespace tiling
}  // namespace example_npu
