/*!
 * \file compiler/tiling_planner.cc
 * \brief Tiling rules for elementwise, softmax, pooling and copy groups, and the rule factory.
 * Matmul and convolution live in tiling_planner_gemm.cc.
 */
#include "compiler/tiling_planner.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "compiler/tiling_planner_details.h"
#include "kernels/topk.h"
#include "kernels/window.h"
#include "support/checked_math.h"

namespace example_npu {
namespace tiling {

void ForEachTile(
    const Shape& full, const std::vector<int64_t>& order, const std::vector<int64_t>& tile,
    const std::function<void(const std::vector<int64_t>&, const std::vector<int64_t>&)>& fn) {
  const size_t rank = full.size();
  std::vector<int64_t> begin(rank, 0);
  std::vector<int64_t> extent(rank, 0);
  for (int64_t dim : full) {
    if (dim == 0) return;
  }
  while (true) {
    for (size_t d = 0; d < rank; ++d) extent[d] = std::min(tile[d], full[d] - begin[d]);
    fn(begin, extent);
    // Advance the innermost dim of `order` first.
    int64_t k = static_cast<int64_t>(order.size()) - 1;
    for (; k >= 0; --k) {
      const int64_t d = order[k];
      begin[d] += tile[d];
      if (begin[d] < full[d]) break;
      begin[d] = 0;
    }
    if (k < 0) return;
  }
}

int64_t CountTiles(const Shape& full, const std::vector<int64_t>& tile) {
  int64_t count = 1;
  for (size_t d = 0; d < full.size(); ++d) {
    TVM_FFI_ICHECK_GT(tile[d], 0) << "tile extents are positive (empty tensors never reach tiling)";
    count = checked::Mul(count, (full[d] + tile[d] - 1) / tile[d], "tile count");
  }
  return count;
}

ClippedWindow ClipWindow(int64_t first, int64_t last, int64_t size) {
  const int64_t lo = std::max<int64_t>(first, 0);
  const int64_t hi = std::min(last, size);
  if (hi <= lo) return ClippedWindow{std::clamp<int64_t>(first, 0, size), 0, last - first, 0};
  return ClippedWindow{lo, hi - lo, lo - first, last - hi};
}

std::vector<int64_t> Permuted(const std::vector<int64_t>& values,
                              const std::vector<int64_t>& order) {
  std::vector<int64_t> result;
  for (int64_t axis : order) result.push_back(values[axis]);
  return result;
}

GroupTiler::GroupTiler(const Graph& graph, const FusedGroup& group, const LayoutPlan& layout,
                       const NPUConfig& config)
    : graph_(graph), group_(group), layout_(layout), config_(config) {
  member_position_.emplace(group_.anchor, 0);
  for (size_t c = 0; c < group_.chain.size(); ++c) member_position_.emplace(group_.chain[c], c + 1);
  // Chain member k's value is kept when a later member other than its successor reads it.
  kept_members_.assign(group_.chain.size() + 1, false);
  for (size_t later = 1; later <= group_.chain.size(); ++later) {
    for (int64_t input : graph_.nodes[group_.chain[later - 1]].inputs) {
      auto found = member_position_.find(input);
      if (found != member_position_.end() && found->second + 2 <= later) {
        kept_members_[found->second] = true;
      }
    }
  }
  step_attrs_ = Anchor().attrs;
  if (auto* qnn = std::get_if<QnnAttrs>(&step_attrs_)) {
    qnn->weight_scales = {};
    qnn->bias = {};
    qnn->requant.multipliers = {};
    qnn->requant.bias = {};
    qnn->requant.float32.weight_scales = {};
    qnn->requant.float32.bias = {};
  }
}

int64_t GroupTiler::StagedBytes(size_t k) const {
  const Node& stored = graph_.nodes[layout_.ViewOf(Anchor().inputs[k]).tensor];
  return kernels::NumElements(stored.shape) * DTypeBytes(stored.dtype);
}

TensorView GroupTiler::OperandView(const Node& node, size_t input, size_t rank) const {
  TensorView view = layout_.ViewOf(node.inputs[input]);
  if (node.op == OpKind::kBatchNorm && input > 0) {
    // A per-channel parameter: unit everywhere except the normalised axis.
    const int64_t axis = std::get<BatchNormAttrs>(node.attrs).axis;
    TensorView placed{view.tensor, Shape(rank, 1), std::vector<int64_t>(rank, 0), view.offset};
    placed.shape[axis] = view.shape[0];
    placed.strides[axis] = view.strides[0];
    return Lift(placed);
  }
  const size_t pad = rank - view.shape.size();
  view.shape.insert(view.shape.begin(), pad, 1);
  view.strides.insert(view.strides.begin(), pad, 0);
  return Lift(view);
}

OpAttrs GroupTiler::TileAttrsOf(const Node& node, const std::vector<TileRef>& inputs) {
  OpAttrs attrs = node.attrs;
  if (auto* bn = std::get_if<BatchNormAttrs>(&attrs)) {
    // The parameters were loaded as tiles of the data tile's rank, unit everywhere except the
    // channel dim (OperandView). That dim, in the tile's own order, is the axis to normalise
    // along: the rule's lifting (conv1d's unit H, a matmul's batch merged into rows) and the
    // tile order may have moved or merged the node's axis. With one channel (every parameter
    // dim unit) the parameters are scalars (axis -1).
    const Shape& param = inputs[1].shape;
    bn->axis = -1;
    for (size_t d = 0; d < param.size(); ++d) {
      if (param[d] == 1) continue;
      TVM_FFI_ICHECK_EQ(bn->axis, -1) << "batch_norm parameters vary along two tile dims";
      bn->axis = static_cast<int64_t>(d);
    }
  }
  return attrs;
}

TensorBox GroupTiler::ProjectBox(const TensorView& view, const TensorBox& out_box) {
  TensorBox box{view.tensor, out_box.begin, out_box.extent, out_box.tile_order};
  for (size_t d = 0; d < view.shape.size(); ++d) {
    if (view.shape[d] == 1) {
      box.begin[d] = 0;
      box.extent[d] = 1;
    }
  }
  return box;
}

std::vector<BufferClass> GroupTiler::EpilogueBuffers(const std::vector<int64_t>& out_extent) const {
  const size_t rank = OutputNode().shape.size();
  TensorBox out_box{-1, std::vector<int64_t>(out_extent.size(), 0), out_extent, {}};
  std::vector<BufferClass> buffers;
  int64_t tail = group_.anchor;
  for (int64_t id : group_.chain) {
    const Node& node = graph_.nodes[id];
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      if (node.inputs[k] == tail || IsMember(node.inputs[k])) continue;
      TensorBox side = ProjectBox(OperandView(node, k, rank), out_box);
      buffers.push_back(
          BufferClass{AlignUp(kernels::NumElements(side.extent) * DTypeBytes(node.dtype)), 2});
    }
    tail = id;
  }
  // A kept value's successor computes into a tile of its own, so the kept one stays intact.
  const int64_t result_bytes =
      AlignUp(kernels::NumElements(out_extent) * DTypeBytes(ResultDType()));
  for (bool kept : KeptMembers()) {
    if (kept) buffers.push_back(BufferClass{result_bytes, 2});
  }
  buffers.push_back(BufferClass{result_bytes, 2});
  return buffers;
}

int64_t GroupTiler::EpilogueBytes(const std::vector<int64_t>& out_extent) const {
  int64_t bytes = 0;
  for (const BufferClass& buffer : EpilogueBuffers(out_extent))
    bytes += buffer.bytes * buffer.slots;
  return bytes;
}

void GroupTiler::AddEpilogueBuffers(const std::vector<int64_t>& out_extent,
                                    std::vector<BufferClass>* out) {
  const std::vector<BufferClass> buffers = EpilogueBuffers(out_extent);
  chain_class_base_ = static_cast<int64_t>(out->size());
  out->insert(out->end(), buffers.begin(), buffers.end());
  result_class_ = static_cast<int64_t>(out->size()) - 1;  // the result slot comes last
}

TileRef GroupTiler::NewResult(TileScheduler* scheduler, const TensorBox& out_box) const {
  return scheduler->NewResult(result_class_, Permuted(out_box.extent, out_box.tile_order),
                              ResultDType());
}

namespace {

/*!
 * \brief The entries of output channels [first, first + count) of a per-channel table (a
 * per-tensor one, of one entry or none, as it is): each tile's command carries only its own
 * channels, so the command stream grows linearly with the channel count.
 */
template <typename Values>
Values ChannelSlice(const Values& values, int64_t first, int64_t count) {
  if (values.size() <= 1) return values;
  return Values(values.begin() + first, values.begin() + first + count);
}

}  // namespace

TileRef GroupTiler::Requantized(TileScheduler* scheduler, const TileRef& result,
                                int64_t channel_offset) const {
  if (!IsQuantized()) return result;
  TileRef out = result;
  out.dtype = DType::kFloat32;
  const int64_t channels = result.shape.empty() ? 1 : result.shape.back();  // innermost
  // StepAttrs() holds every requantization setting but the tables: copying the anchor's whole
  // requantization per tile made compile time quadratic in the channels.
  ComputeCommand compute = MakeCompute(Anchor(), group_.anchor, {result}, out, StepAttrs());
  kernels::Requantization& requant = std::get<QnnAttrs>(compute.attrs).requant;
  const kernels::Requantization& full = std::get<QnnAttrs>(Anchor().attrs).requant;
  requant.multipliers = ChannelSlice(full.multipliers, channel_offset, channels);
  requant.bias = ChannelSlice(full.bias, channel_offset, channels);
  requant.float32.weight_scales =
      ChannelSlice(full.float32.weight_scales, channel_offset, channels);
  requant.float32.bias = ChannelSlice(full.float32.bias, channel_offset, channels);
  compute.engine = Engine::kVector;
  compute.step = ComputeStep::kRequantize;
  scheduler->Compute(std::move(compute));
  return out;
}

ComputeCommand GroupTiler::MakeCompute(const Node& node, int64_t node_id,
                                       std::vector<TileRef> inputs, const TileRef& output,
                                       OpAttrs attrs) const {
  ComputeCommand compute;
  switch (node.op) {
    case OpKind::kMatmul:
    case OpKind::kConv1d:
    case OpKind::kConv2d:
    case OpKind::kQnnMatmul:
    case OpKind::kQnnConv2d:
    case OpKind::kQnnConv2dTranspose:
      compute.engine = Engine::kMatrix;
      break;
    case OpKind::kMaxPool2d:
    case OpKind::kAvgPool2d:
    case OpKind::kMean:
    case OpKind::kSum:
    case OpKind::kMax:
    case OpKind::kMin:
    case OpKind::kVariance:
    case OpKind::kArgmax:
    case OpKind::kArgmin:
    case OpKind::kAdaptiveAvgPool2d:
    case OpKind::kQnnMaxPool2d:
    case OpKind::kQnnAvgPool2d:
      compute.engine = Engine::kPooling;
      break;
    case OpKind::kConv2dTranspose:
      compute.engine = Engine::kMatrix;
      break;
    case OpKind::kQnnLut:
    case OpKind::kQnnSoftmax:
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax:
    case OpKind::kSigmoid:
    case OpKind::kTanh:
    case OpKind::kGelu:
    case OpKind::kGeluTanh:
    case OpKind::kSqrt:
    case OpKind::kRsqrt:
    case OpKind::kExp:
    case OpKind::kLog:
    case OpKind::kErf:
    case OpKind::kPower:
      compute.engine = Engine::kActivation;
      break;
    default:
      compute.engine = Engine::kVector;
  }
  compute.node = node_id;
  compute.attrs = std::move(attrs);
  compute.inputs = std::move(inputs);
  compute.output = output;
  compute.elements = kernels::NumElements(output.shape);
  compute.round_to_half = node.dtype == DType::kFloat16;
  return compute;
}

void GroupTiler::EmitEpilogue(TileScheduler* scheduler, const TileRef& result,
                              const TensorBox& out_box) const {
  const size_t rank = OutputNode().shape.size();
  const std::vector<bool>& kept = KeptMembers();
  const int64_t kept_classes = std::count(kept.begin(), kept.end(), true);
  int64_t side_class = chain_class_base_;
  int64_t kept_class = result_class_ - kept_classes;
  std::unordered_map<int64_t, TileRef> on_chip = {{group_.anchor, result}};
  TileRef current = result;
  for (size_t c = 0; c < group_.chain.size(); ++c) {
    const int64_t id = group_.chain[c];
    const Node& node = graph_.nodes[id];
    std::vector<TileRef> inputs;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      auto member = on_chip.find(node.inputs[k]);
      if (member != on_chip.end()) {
        inputs.push_back(member->second);
        continue;
      }
      TensorView view = OperandView(node, k, rank);
      inputs.push_back(scheduler->Load(side_class++, view, ProjectBox(view, out_box)));
    }
    OpAttrs attrs = TileAttrsOf(node, inputs);
    // In place, unless the value being replaced is still read by a later member.
    TileRef output =
        kept[c] ? scheduler->NewResult(kept_class++, current.shape, current.dtype) : current;
    scheduler->Compute(MakeCompute(node, id, std::move(inputs), output, std::move(attrs)));
    current = output;
    on_chip.emplace(id, current);
  }
  scheduler->Store(current, Lift(layout_.ViewOf(group_.output())), out_box);
}

/*!
 * \brief Largest output tile (inner dims of `order` grown first, outer dims then 1) whose
 * working set fits `budget`; `fixed` dims are never split. nullopt if even the smallest tile does
 * not fit (a rank-0 output has the empty tile).
 */
std::optional<std::vector<int64_t>> ChooseOutputTile(
    const Shape& full, const std::vector<int64_t>& order, const std::vector<bool>& fixed,
    int64_t budget, const std::function<int64_t(const std::vector<int64_t>&)>& cost,
    int64_t granule) {
  std::vector<int64_t> tile(full.size(), 1);
  for (size_t d = 0; d < full.size(); ++d) {
    if (fixed[d]) tile[d] = full[d];
  }
  if (cost(tile) > budget) return std::nullopt;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int64_t d = *it;
    if (fixed[d]) continue;
    tile[d] = full[d];
    if (cost(tile) <= budget) continue;
    int64_t lo = 1, hi = full[d] - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      tile[d] = mid;
      if (cost(tile) <= budget) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    tile[d] = lo >= granule ? lo / granule * granule : lo;
    break;
  }
  return tile;
}

namespace {

/*! \brief Unary / binary / batch_norm anchors and softmax: tiles of the output, inputs projected.
 */
class ElementwiseRule : public OutputTiler {
 public:
  using OutputTiler::OutputTiler;

  TilePlan Plan() override {
    const Node& anchor = Anchor();
    UseIdentityOrder(anchor.shape.size());
    std::vector<bool> fixed(anchor.shape.size(), false);
    if (anchor.op == OpKind::kSoftmax || anchor.op == OpKind::kLogSoftmax) {
      fixed[std::get<SoftmaxAttrs>(anchor.attrs).axis] = true;
    }
    if (anchor.op == OpKind::kQnnSoftmax) {
      fixed[std::get<QnnSoftmaxAttrs>(anchor.attrs).axis] = true;
    }
    if (anchor.op == OpKind::kLayerNorm) {
      const int64_t first = std::get<LayerNormAttrs>(anchor.attrs).first_axis;
      std::fill(fixed.begin() + first, fixed.end(), true);
    }
    TilePlan plan;
    plan.engine = MakeCompute(anchor, group_.anchor, {}, TileRef{}, {}).engine;
    auto cost = [&](const std::vector<int64_t>& extent) {
      return TotalBytes(InputBuffers(extent)) + EpilogueBytes(extent);
    };
    if (!ChooseTile(fixed, cost, &plan)) return plan;
    plan.buffers = InputBuffers(tile_);
    AddEpilogueBuffers(tile_, &plan.buffers);
    return plan;
  }

  void Emit(TileScheduler* scheduler) const override {
    const Node& anchor = Anchor();
    ForEachTile(anchor.shape, order_, tile_,
                [&](const std::vector<int64_t>& begin, const std::vector<int64_t>& extent) {
                  TensorBox out_box{-1, begin, extent, order_};
                  std::vector<TileRef> inputs;
                  for (size_t k = 0; k < anchor.inputs.size(); ++k) {
                    TensorView view = OperandView(anchor, k, anchor.shape.size());
                    inputs.push_back(
                        scheduler->Load(static_cast<int64_t>(k), view, ProjectBox(view, out_box)));
                  }
                  TileRef result = NewResult(scheduler, out_box);
                  OpAttrs attrs = TileAttrsOf(anchor, inputs);
                  scheduler->Compute(MakeCompute(anchor, group_.anchor, std::move(inputs), result,
                                                 std::move(attrs)));
                  EmitEpilogue(scheduler, result, out_box);
                });
  }

 private:
  /*! \brief One double-buffered class per anchor input, sized by its projected box. */
  std::vector<BufferClass> InputBuffers(const std::vector<int64_t>& extent) const {
    const Node& anchor = Anchor();
    TensorBox out_box{-1, std::vector<int64_t>(extent.size(), 0), extent, order_};
    std::vector<BufferClass> buffers;
    for (size_t k = 0; k < anchor.inputs.size(); ++k) {
      TensorBox box = ProjectBox(OperandView(anchor, k, extent.size()), out_box);
      buffers.push_back(
          BufferClass{AlignUp(kernels::NumElements(box.extent) * OperandBytes(k)), 2});
    }
    return buffers;
  }
};

/*!
 * \brief A materialised permute_dims / reshape / strided_slice / broadcast_to: DMA-only, load a
 * box of the source view and store it. A reshape of a non-contiguous view (a transposed tensor)
 * copies in the source's shape into the result's storage seen in that shape (a reshape keeps
 * the row-major order), which is a DMA transpose.
 */
class CopyRule : public OutputTiler {
 public:
  using OutputTiler::OutputTiler;

  TilePlan Plan() override {
    const Shape& shape = Views().source.shape;
    UseIdentityOrder(shape.size());
    auto cost = [&](const std::vector<int64_t>& extent) { return CopyCost(extent); };
    TilePlan plan;
    plan.engine = Engine::kDma;
    auto tile = ChooseOutputTile(shape, order_, std::vector<bool>(shape.size(), false), L1Budget(),
                                 cost, config_.vector_elements);
    if (!tile.has_value()) {
      plan.reason = std::string(OpKindName(Anchor().op)) + ": the smallest tile does not fit L1";
      return plan;
    }
    tile_ = *tile;
    plan.ok = true;
    plan.tile_shape = tile_;
    plan.tiles = CountTiles(shape, tile_);
    plan.buffers.push_back(BufferClass{CopyTileBytes(tile_), 2});
    return plan;
  }

  void Emit(TileScheduler* scheduler) const override {
    const CopyViews views = Views();
    ForEachTile(views.source.shape, order_, tile_,
                [&](const std::vector<int64_t>& begin, const std::vector<int64_t>& extent) {
                  TensorBox box{-1, begin, extent, order_};
                  TileRef tile = scheduler->Load(0, views.source, box);
                  scheduler->Store(tile, views.target, box);
                });
  }

 private:
  struct CopyViews {
    TensorView source;
    TensorView target;
  };

  CopyViews Views() const {
    const Node& anchor = Anchor();
    const TensorView own = layout_.ViewOf(group_.anchor);
    if (anchor.op == OpKind::kReshape) {
      const TensorView source = layout_.ViewOf(anchor.inputs[0]);
      return {source, TensorView{own.tensor, source.shape, ContiguousStrides(source.shape)}};
    }
    return {layout_.SourceView(graph_, group_.anchor), own};
  }
};

/*!
 * \brief Reductions (mean, sum, max, min, variance, argmax, argmin) on the pooling unit and topk
 * on the vector unit: tiles of the output with the reduced dims kept (as 1; topk's axis as its
 * k, never split), each reading its whole extent of the reduced dims (topk: whole rows). Dropped
 * dims are unit dims of the tile space.
 */
class ReduceRule : public OutputTiler {
 public:
  using OutputTiler::OutputTiler;

  TilePlan Plan() override {
    const Node& anchor = Anchor();
    const Shape& in_shape = graph_.nodes[anchor.inputs[0]].shape;
    UseIdentityOrder(in_shape.size());
    if (Topk()) topk_axis_ = {std::get<TopkAttrs>(anchor.attrs).params.axis};
    kept_shape_ = in_shape;
    std::vector<bool> fixed(order_.size(), false);
    for (int64_t axis : Axes()) {
      kept_shape_[axis] = Selected();
      fixed[axis] = true;
    }
    auto input_bytes = [&](const std::vector<int64_t>& extent) {
      return AlignUp(kernels::NumElements(InputBox(extent).extent) * OperandBytes(0));
    };
    auto cost = [&](const std::vector<int64_t>& extent) {
      return 2 * input_bytes(extent) + SelectionBytes(extent) + EpilogueBytes(extent);
    };
    TilePlan plan;
    plan.engine = Topk() ? Engine::kVector : Engine::kPooling;
    auto tile =
        ChooseOutputTile(kept_shape_, order_, fixed, L1Budget(), cost, config_.vector_elements);
    if (!tile.has_value()) {
      if (Topk()) return PlanStreamedRows();
      plan.reason = std::string(OpKindName(Anchor().op)) +
                    ": the reduced extent of one output element does not fit L1";
      return plan;
    }
    tile_ = *tile;
    plan.ok = true;
    plan.tile_shape = tile_;
    plan.tiles = CountTiles(kept_shape_, tile_);
    plan.buffers.push_back(BufferClass{input_bytes(tile_), 2});
    AddSelectionBuffers(tile_, &plan.buffers);
    AddEpilogueBuffers(tile_, &plan.buffers);
    return plan;
  }

  void Emit(TileScheduler* scheduler) const override {
    const TensorView input = layout_.ViewOf(Anchor().inputs[0]);
    if (chunk_ > 0) return EmitSelections(scheduler, input, chunk_);
    if (Paired()) return EmitSelections(scheduler, input, InputBox(tile_).extent[topk_axis_[0]]);
    ForEachTile(kept_shape_, order_, tile_,
                [&](const std::vector<int64_t>& begin, const std::vector<int64_t>& extent) {
                  TensorBox out_box{-1, begin, extent, order_};
                  TensorBox in_box = InputBox(extent);
                  in_box.begin = begin;
                  for (int64_t axis : Axes()) in_box.begin[axis] = 0;
                  TileRef in = scheduler->Load(0, input, in_box);
                  TileRef result = NewResult(scheduler, out_box);
                  ComputeCommand compute =
                      MakeCompute(Anchor(), group_.anchor, {in}, result, Anchor().attrs);
                  // Variance reads its elements twice: the mean, then the squared deviations.
                  compute.elements = kernels::NumElements(in_box.extent) *
                                     (Anchor().op == OpKind::kVariance ? 2 : 1);
                  if (Topk()) compute.elements = SelectionWork(in_box.extent, 0);
                  scheduler->Compute(std::move(compute));
                  EmitEpilogue(scheduler, result, out_box);
                });
  }

 protected:
  /*! \brief Output views (in the output's rank) seen in the kept-dims tile space. */
  TensorView Lift(const TensorView& view) const override {
    if (Topk() || std::get<ReduceAttrs>(Anchor().attrs).keepdims) return view;
    TensorView lifted = view;
    for (int64_t axis : Axes()) {
      lifted.shape.insert(lifted.shape.begin() + axis, 1);
      lifted.strides.insert(lifted.strides.begin() + axis, 0);
    }
    return lifted;
  }

 private:
  bool Topk() const { return Anchor().op == OpKind::kTopk; }
  const std::vector<int64_t>& Axes() const {
    if (Topk()) return topk_axis_;
    return std::get<ReduceAttrs>(Anchor().attrs).axes;
  }
  /*! \brief Elements each row leaves in the output: 1, or topk's k. */
  int64_t Selected() const { return Topk() ? std::get<TopkAttrs>(Anchor().attrs).params.k : 1; }

  /*! \brief topk's vector work on the rows of `extent`, elements numbered from `first`. */
  int64_t SelectionWork(const std::vector<int64_t>& extent, int64_t first) const {
    const int64_t axis = topk_axis_[0];
    return kernels::NumElements(extent) / extent[axis] *
           kernels::TopkSelectionWork(first, extent[axis], Selected());
  }

  /*! \brief Whether the group also stores the indices of its topk values (a side output). */
  bool Paired() const { return group_.side_output >= 0; }

  /*! \brief L1 of a selection made in steps (streamed or paired): the running lists of k values
   * and k indices per row, and the side output's tiles; both double-buffered. */
  int64_t SelectionBytes(const std::vector<int64_t>& extent) const {
    if (!Paired()) return 0;
    return 2 * AlignUp(kernels::NumElements(extent) * 2 * 4) +
           2 * AlignUp(kernels::NumElements(extent) * 4);
  }
  void AddSelectionBuffers(const std::vector<int64_t>& extent,
                           std::vector<BufferClass>* out) const {
    if (chunk_ == 0 && !Paired()) return;
    out->push_back(BufferClass{AlignUp(kernels::NumElements(extent) * 2 * 4), 2});
    if (Paired()) out->push_back(BufferClass{AlignUp(kernels::NumElements(extent) * 4), 2});
  }

  /*!
   * \brief topk of rows longer than L1: one row at a time, streamed in chunks of chunk_ (>= k)
   * elements into its running list of k values and k indices, then its result written.
   */
  TilePlan PlanStreamedRows() {
    const int64_t axis = topk_axis_[0], k = Selected();
    tile_.assign(kept_shape_.size(), 1);
    tile_[axis] = k;
    const int64_t running = AlignUp(2 * k * 4);
    const int64_t side = Paired() ? 2 * AlignUp(k * 4) : 0;
    const int64_t chunk_budget = (L1Budget() - 2 * running - side - EpilogueBytes(tile_)) / 2;
    const int64_t granule = config_.vector_elements;
    chunk_ = std::max<int64_t>(0, chunk_budget - kAlignBytes) / OperandBytes(0) / granule * granule;
    TilePlan plan;
    plan.engine = Engine::kVector;
    if (chunk_ < k) {
      chunk_ = 0;
      plan.reason = "topk: a chunk of k elements and the k results of a row do not fit L1";
      return plan;
    }
    const int64_t n = graph_.nodes[Anchor().inputs[0]].shape[axis];
    plan.ok = true;
    plan.tile_shape = tile_;
    plan.tiles = CountTiles(kept_shape_, tile_) * ((n + chunk_ - 1) / chunk_ + 1);
    plan.buffers.push_back(BufferClass{AlignUp(chunk_ * OperandBytes(0)), 2});
    AddSelectionBuffers(tile_, &plan.buffers);
    AddEpilogueBuffers(tile_, &plan.buffers);
    return plan;
  }

  /*!
   * \brief topk in steps: the rows of each output tile enter their running lists `chunk`
   * elements at a time, then the values (with the fused chain) and, paired, the indices are
   * written from the lists.
   */
  void EmitSelections(TileScheduler* scheduler, const TensorView& input, int64_t chunk) const {
    const int64_t axis = topk_axis_[0];
    const int64_t n = graph_.nodes[Anchor().inputs[0]].shape[axis];
    TopkAttrs step = std::get<TopkAttrs>(Anchor().attrs);
    const int64_t k = step.params.k;
    ForEachTile(kept_shape_, order_, tile_,
                [&](const std::vector<int64_t>& begin, const std::vector<int64_t>& extent) {
                  std::vector<int64_t> list_shape = extent;
                  list_shape[axis] = 2 * k;
                  const TileRef list = scheduler->NewResult(1, list_shape, DType::kFloat32);
                  for (int64_t first = 0; first < n; first += chunk) {
                    TensorBox box{-1, begin, extent, order_};
                    box.begin[axis] = first;
                    box.extent[axis] = std::min(chunk, n - first);
                    std::vector<TileRef> inputs = {scheduler->Load(0, input, box)};
                    if (first > 0) inputs.push_back(list);
                    step.step = TopkAttrs::Step::kSelect;
                    step.index_offset = first;
                    step.continuing = first > 0;
                    ComputeCommand select =
                        MakeCompute(Anchor(), group_.anchor, std::move(inputs), list, step);
                    select.elements = SelectionWork(box.extent, first);
                    scheduler->Compute(std::move(select));
                  }
                  const TensorBox out_box{-1, begin, extent, order_};
                  const TileRef result = NewResult(scheduler, out_box);
                  step.step = TopkAttrs::Step::kEmit;
                  scheduler->Compute(MakeCompute(Anchor(), group_.anchor, {list}, result, step));
                  EmitEpilogue(scheduler, result, out_box);
                  if (!Paired()) return;
                  const TileRef indices = scheduler->NewResult(2, extent, DType::kFloat32);
                  step.params.indices = true;
                  scheduler->Compute(MakeCompute(graph_.nodes[group_.side_output],
                                                 group_.side_output, {list}, indices, step));
                  step.params.indices = false;
                  scheduler->Store(indices, layout_.ViewOf(group_.side_output), out_box);
                });
  }

  /*! \brief The input box (at origin) an output tile of `extent` reads. */
  TensorBox InputBox(const std::vector<int64_t>& extent) const {
    TensorBox box{-1, std::vector<int64_t>(extent.size(), 0), extent, order_};
    const Shape& in_shape = graph_.nodes[Anchor().inputs[0]].shape;
    for (int64_t axis : Axes()) box.extent[axis] = in_shape[axis];
    return box;
  }

  Shape kept_shape_;
  std::vector<int64_t> topk_axis_;  // Axes() of a topk
  int64_t chunk_ = 0;               // topk streaming its rows: elements per chunk
};

/*! \brief Pooling on NHWC tiles: tiles of (n, oh, ow, c) with the input window halo. */
class PoolRule : public OutputTiler {
 public:
  using OutputTiler::OutputTiler;

  TilePlan Plan() override {
    const kernels::Pool2dParams& p = Params();
    nchw_ = p.layout == kernels::DataLayout::kNCHW;
    order_ = nchw_ ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 1, 2, 3};
    auto input_bytes = [&](const std::vector<int64_t>& extent) {
      return AlignUp(LargestInputElements(extent) * OperandBytes(0));
    };
    auto cost = [&](const std::vector<int64_t>& extent) {
      return 2 * input_bytes(extent) + EpilogueBytes(extent);
    };
    TilePlan plan;
    plan.engine = Engine::kPooling;
    if (!ChooseTile(std::vector<bool>(4, false), cost, &plan)) return plan;
    plan.buffers.push_back(BufferClass{input_bytes(tile_), 2});
    AddEpilogueBuffers(tile_, &plan.buffers);
    return plan;
  }

  void Emit(TileScheduler* scheduler) const override {
    TensorView input = layout_.ViewOf(Anchor().inputs[0]);
    ForEachTile(Anchor().shape, order_, tile_,
                [&](const std::vector<int64_t>& begin, const std::vector<int64_t>& extent) {
                  TensorBox out_box{-1, begin, extent, order_};
                  Halo halo = InputBox(out_box);
                  TileRef in = scheduler->Load(0, input, halo.box);
                  TileRef result = NewResult(scheduler, out_box);
                  kernels::Pool2dParams tile_params = Params();
                  tile_params.layout = kernels::DataLayout::kNHWC;
                  tile_params.padding = halo.padding;
                  tile_params.drop_trailing_window = false;
                  ComputeCommand compute =
                      MakeCompute(Anchor(), group_.anchor, {in}, result, TileAttrs(tile_params));
                  compute.elements = kernels::NumElements(result.shape) * tile_params.pool_size[0] *
                                     tile_params.pool_size[1];
                  scheduler->Compute(std::move(compute));
                  EmitEpilogue(scheduler, result, out_box);
                });
  }

 private:
  struct Halo {
    TensorBox box;
    std::array<int64_t, 4> padding;
  };

  const kernels::Pool2dParams& Params() const {
    if (const auto* qnn = std::get_if<QnnPoolAttrs>(&Anchor().attrs)) return qnn->params.pool;
    return std::get<PoolAttrs>(Anchor().attrs).params;
  }

  /*! \brief The anchor's attributes with the pooling parameters of one tile. */
  OpAttrs TileAttrs(const kernels::Pool2dParams& params) const {
    if (const auto* qnn = std::get_if<QnnPoolAttrs>(&Anchor().attrs)) {
      QnnPoolAttrs attrs = *qnn;
      attrs.params.pool = params;
      return attrs;
    }
    return PoolAttrs{params};
  }

  /*! \brief Input elements of an interior tile (the full window span; edge tiles read less). */
  int64_t LargestInputElements(const std::vector<int64_t>& out_extent) const {
    const kernels::Pool2dParams& p = Params();
    const Shape& in_shape = graph_.nodes[Anchor().inputs[0]].shape;
    std::vector<int64_t> extent = out_extent;
    const int64_t h_axis = nchw_ ? 2 : 1;
    for (int64_t s = 0; s < 2; ++s) {
      const int64_t span =
          (out_extent[h_axis + s] - 1) * p.strides[s] + (p.pool_size[s] - 1) * p.dilation[s] + 1;
      extent[h_axis + s] = std::min(in_shape[h_axis + s], span);
    }
    return kernels::NumElements(extent);
  }

  /*! \brief The input rows/cols an output box reads, and the padding left at the tile edges. */
  Halo InputBox(const TensorBox& out_box) const {
    const kernels::Pool2dParams& p = Params();
    const Shape& in_shape = graph_.nodes[Anchor().inputs[0]].shape;
    Halo halo{TensorBox{-1, out_box.begin, out_box.extent, order_}, {0, 0, 0, 0}};
    const int64_t h_axis = nchw_ ? 2 : 1;
    for (int64_t s = 0; s < 2; ++s) {
      const int64_t axis = h_axis + s;
      const int64_t first = out_box.begin[axis] * p.strides[s] - p.padding[s];
      const int64_t last = (out_box.begin[axis] + out_box.extent[axis] - 1) * p.strides[s] -
                           p.padding[s] + (p.pool_size[s] - 1) * p.dilation[s] + 1;
      const ClippedWindow window = ClipWindow(first, last, in_shape[axis]);
      halo.box.begin[axis] = window.begin;
      halo.box.extent[axis] = window.extent;
      halo.padding[s] = window.pad_before;
      // ceil_mode windows may run past the user's padding; the kernel adds that part itself.
      halo.padding[s + 2] = std::min(p.padding[s + 2], window.pad_after);
    }
    return halo;
  }

  bool nchw_ = true;
};

}  // namespace
}  // namespace tiling

std::unique_ptr<TilingRule> MakeTilingRule(const Graph& graph, const FusedGroup& group,
                                           const LayoutPlan& layout, const NPUConfig& config) {
  switch (graph.nodes[group.anchor].op) {
    case OpKind::kMatmul:
    case OpKind::kQnnMatmul:
      return tiling::MakeMatmulRule(graph, group, layout, config);
    case OpKind::kConv1d:
    case OpKind::kConv2d:
    case OpKind::kQnnConv2d:
      return tiling::MakeConvRule(graph, group, layout, config);
    case OpKind::kMaxPool2d:
    case OpKind::kAvgPool2d:
    case OpKind::kQnnMaxPool2d:
    case OpKind::kQnnAvgPool2d:
      return std::make_unique<tiling::PoolRule>(graph, group, layout, config);
    case OpKind::kPermuteDims:
    case OpKind::kReshape:
    case OpKind::kStridedSlice:
    case OpKind::kBroadcastTo:
      return std::make_unique<tiling::CopyRule>(graph, group, layout, config);
    case OpKind::kConcat:
    case OpKind::kQnnConcat:
      return tiling::MakeConcatRule(graph, group, layout, config);
    case OpKind::kTake:
      return tiling::MakeTakeRule(graph, group, layout, config);
    case OpKind::kMean:
    case OpKind::kSum:
    case OpKind::kMax:
    case OpKind::kMin:
    case OpKind::kVariance:
    case OpKind::kArgmax:
    case OpKind::kArgmin:
    case OpKind::kTopk:
      return std::make_unique<tiling::ReduceRule>(graph, group, layout, config);
    case OpKind::kResize2d:
    case OpKind::kPad:
    case OpKind::kAdaptiveAvgPool2d:
      return tiling::MakeResampleRule(graph, group, layout, config);
    case OpKind::kConv2dTranspose:
    case OpKind::kQnnConv2dTranspose:
      return tiling::MakeConvTransposeRule(graph, group, layout, config);
    case OpKind::kGroupNorm:
    case OpKind::kInstanceNorm:
      return tiling::MakeNormRule(graph, group, layout, config);
    default:
      return std::make_unique<tiling::ElementwiseRule>(graph, group, layout, config);
  }
}

}  // namespace example_npu
