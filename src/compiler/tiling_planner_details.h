/*!
 * \file compiler/tiling_planner_details.h
 * \brief Shared machinery of the tiling rules: fused-chain epilogues and output-tile iteration.
 */
#ifndef EXAMPLE_NPU_COMPILER_TILING_PLANNER_DETAILS_H_
#define EXAMPLE_NPU_COMPILER_TILING_PLANNER_DETAILS_H_

#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compiler/tiling_planner.h"

namespace example_npu {
namespace tiling {

constexpr int64_t kAlignBytes = 64;

inline int64_t AlignUp(int64_t bytes) {
  return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
}

/*! \brief Calls fn(begin, extent) for every tile of `full`, nesting dims in `order` (outer first).
 */
void ForEachTile(
    const Shape& full, const std::vector<int64_t>& order, const std::vector<int64_t>& tile,
    const std::function<void(const std::vector<int64_t>&, const std::vector<int64_t>&)>& fn);

int64_t CountTiles(const Shape& full, const std::vector<int64_t>& tile);

/*!
 * \brief A tile's window range [first, last) along one input axis of extent `size`, split into
 * the input rows it reads, [begin, begin + extent), and the padding its kernel adds before and
 * after them. pad_before + extent + pad_after == last - first always, also when the range lies
 * wholly in the padding (extent 0, e.g. padding wider than a 1x1 kernel): the tile's kernel then
 * computes exactly the tile's outputs.
 */
struct ClippedWindow {
  int64_t begin;
  int64_t extent;
  int64_t pad_before;
  int64_t pad_after;
};
ClippedWindow ClipWindow(int64_t first, int64_t last, int64_t size);

/*! \brief `values` permuted into `order`. */
std::vector<int64_t> Permuted(const std::vector<int64_t>& values,
                              const std::vector<int64_t>& order);

/*!
 * \brief Base of every rule: owns the group's fused elementwise chain (its side operands become
 * buffer classes appended after the rule's own) and the final store of the result tile.
 */
/*! \brief L1 bytes of buffer classes: every slot of every class. */
inline int64_t TotalBytes(const std::vector<BufferClass>& buffers) {
  int64_t bytes = 0;
  for (const BufferClass& buffer : buffers) bytes += buffer.bytes * buffer.slots;
  return bytes;
}

class GroupTiler : public TilingRule {
 public:
  GroupTiler(const Graph& graph, const FusedGroup& group, const LayoutPlan& layout,
             const NPUConfig& config);

 protected:
  /*!
   * \brief Maps a view in the output's logical rank to the rule's tile space (conv1d and 1-D
   * matmul operands insert unit dims there); identity for most rules.
   */
  virtual TensorView Lift(const TensorView& view) const { return view; }

  const Node& Anchor() const { return graph_.nodes[group_.anchor]; }
  /*! \brief Bytes per element of operand `k` of the anchor as loaded (its own dtype). */
  int64_t OperandBytes(size_t k) const {
    return DTypeBytes(graph_.nodes[Anchor().inputs[k]].dtype);
  }
  /*!
   * \brief Bytes of the stored tensor behind operand `k` (a view's whole base tensor): what an
   * L2 staging copy of that operand holds, since later loads address it as the base tensor.
   */
  int64_t StagedBytes(size_t k) const;
  bool IsQuantized() const {
    const OpKind op = Anchor().op;
    return op == OpKind::kQnnConv2d || op == OpKind::kQnnConv2dTranspose ||
           op == OpKind::kQnnMatmul;
  }
  /*! \brief Result tiles hold float32, or int64 accumulators for quantized ops. */
  DType ResultDType() const { return IsQuantized() ? DType::kInt64 : DType::kFloat32; }
  const Node& OutputNode() const { return graph_.nodes[group_.output()]; }
  int64_t L1Budget() const { return config_.TierBytes(Tier::kL1); }
  /*! \brief Whether operand `k` (`bytes` when staged) is staged in L2: when later tiles read it
   * again (`reused`) or, NPUConfig.weight_staging "always", whenever it is a constant weight;
   * and only when it fits. */
  bool StageInL2(size_t k, bool reused, int64_t bytes) const {
    const bool weight = graph_.nodes[Anchor().inputs[k]].kind == NodeKind::kConst &&
                        config_.weight_staging_kind() == WeightStaging::kAlways;
    return (reused || weight) && bytes <= config_.TierBytes(Tier::kL2);
  }

  /*! \brief Whether `id` is the anchor or a chain member. */
  bool IsMember(int64_t id) const { return member_position_.count(id) > 0; }
  /*! \brief Per member (anchor first): a member after its successor still reads its value. */
  const std::vector<bool>& KeptMembers() const { return kept_members_; }
  /*!
   * \brief The chain's side-operand buffer classes, one result class per kept member, then the
   * result's (every class double-buffered).
   */
  std::vector<BufferClass> EpilogueBuffers(const std::vector<int64_t>& out_extent) const;
  /*! \brief Bytes of all chain side-operand slots plus the two result slots. */
  int64_t EpilogueBytes(const std::vector<int64_t>& out_extent) const;
  /*! \brief Appends the chain and result buffer classes (call last in Plan()). */
  void AddEpilogueBuffers(const std::vector<int64_t>& out_extent, std::vector<BufferClass>* out);

  /*! \brief The view of operand `input` of `node`, padded with leading unit dims to `rank` (and
   * for batch_norm parameters, placed on the normalised axis). */
  TensorView OperandView(const Node& node, size_t input, size_t rank) const;
  /*! \brief `node`'s attributes for a compute on the tiles `inputs` (batch_norm: the axis in
   * the tile, from its parameter tiles). */
  static OpAttrs TileAttrsOf(const Node& node, const std::vector<TileRef>& inputs);
  /*! \brief The box of `view` that broadcasts onto the output box (unit dims stay unit). */
  static TensorBox ProjectBox(const TensorView& view, const TensorBox& out_box);

  /*! \brief A new result tile for the output box (float32, in out_box.tile_order). */
  TileRef NewResult(TileScheduler* scheduler, const TensorBox& out_box) const;
  /*!
   * \brief For quantized ops: requantizes the accumulators of `result` into output integers (as
   * float32 in the same slot) and returns that tile; others return `result` unchanged.
   */
  TileRef Requantized(TileScheduler* scheduler, const TileRef& result,
                      int64_t channel_offset) const;

  /*! \brief Applies the chain to `result` in place, then stores it to out_box of the output. */
  void EmitEpilogue(TileScheduler* scheduler, const TileRef& result,
                    const TensorBox& out_box) const;
  /*!
   * \brief The anchor's attributes for one of its steps: for a quantized conv / matmul without
   * the per-channel tables (the accumulating steps need none; Requantized() adds the tile's own
   * channels), so no tile copies a table of every output channel.
   */
  const OpAttrs& StepAttrs() const { return step_attrs_; }
  /*! \brief Computes `node` on the given tiles (engine chosen by op). */
  ComputeCommand MakeCompute(const Node& node, int64_t node_id, std::vector<TileRef> inputs,
                             const TileRef& output, OpAttrs attrs) const;

  const Graph& graph_;
  FusedGroup group_;
  const LayoutPlan& layout_;
  const NPUConfig& config_;
  int64_t chain_class_base_ = 0;
  int64_t result_class_ = 0;

 private:
  // Found once per group, so that a fused chain of thousands of ops costs linear time.
  std::unordered_map<int64_t, size_t> member_position_;  // anchor 0, chain[c] c + 1
  std::vector<bool> kept_members_;
  OpAttrs step_attrs_;
};

/*!
 * \brief Largest output tile (inner dims of `order` grown first, outer dims then 1) whose
 * working set fits `budget`; `fixed` dims are never split. nullopt if even the smallest tile does
 * not fit (a rank-0 output has the empty tile).
 */
std::optional<std::vector<int64_t>> ChooseOutputTile(
    const Shape& full, const std::vector<int64_t>& order, const std::vector<bool>& fixed,
    int64_t budget, const std::function<int64_t(const std::vector<int64_t>&)>& cost,
    int64_t granule);

/*!
 * \brief Rules that tile the output only (no reduction split): the tile is chosen by
 * ChooseOutputTile over the dims in order_, inner dims first.
 */
class OutputTiler : public GroupTiler {
 public:
  using GroupTiler::GroupTiler;

 protected:
  /*! \brief Picks tile_ for `cost`; on success fills the plan's tile fields and returns true. */
  bool ChooseTile(const std::vector<bool>& fixed,
                  const std::function<int64_t(const std::vector<int64_t>&)>& cost, TilePlan* plan) {
    const Shape& full = Anchor().shape;
    auto tile = ChooseOutputTile(full, order_, fixed, L1Budget(), cost, config_.vector_elements);
    if (!tile.has_value()) {
      plan->reason = std::string(OpKindName(Anchor().op)) + ": the smallest tile does not fit L1";
      return false;
    }
    tile_ = *tile;
    plan->ok = true;
    plan->tile_shape = tile_;
    plan->tiles = CountTiles(full, tile_);
    return true;
  }

  /*! \brief Tiles walk the dims in their logical order (no layout change). */
  void UseIdentityOrder(size_t rank) {
    order_.resize(rank);
    std::iota(order_.begin(), order_.end(), 0);
  }

  /*! \brief A DMA-only tile of the anchor's dtype, and its double-buffered L1 cost. */
  int64_t CopyTileBytes(const std::vector<int64_t>& extent) const {
    return AlignUp(kernels::NumElements(extent) * DTypeBytes(Anchor().dtype));
  }
  int64_t CopyCost(const std::vector<int64_t>& extent) const { return 2 * CopyTileBytes(extent); }

  std::vector<int64_t> order_;
  std::vector<int64_t> tile_;
};

std::unique_ptr<TilingRule> MakeMatmulRule(const Graph& graph, const FusedGroup& group,
                                           const LayoutPlan& layout, const NPUConfig& config);
std::unique_ptr<TilingRule> MakeConvRule(const Graph& graph, const FusedGroup& group,
                                         const LayoutPlan& layout, const NPUConfig& config);
std::unique_ptr<TilingRule> MakeConcatRule(const Graph& graph, const FusedGroup& group,
                                           const LayoutPlan& layout, const NPUConfig& config);
/*! \brief resize2d, pad, adaptive_avg_pool2d: output tiles reading the input box they map to. */
std::unique_ptr<TilingRule> MakeResampleRule(const Graph& graph, const FusedGroup& group,
                                             const LayoutPlan& layout, const NPUConfig& config);
std::unique_ptr<TilingRule> MakeConvTransposeRule(const Graph& graph, const FusedGroup& group,
                                                  const LayoutPlan& layout,
                                                  const NPUConfig& config);
/*! \brief take with run-time ids: row gathers by DMA (tiling_planner_take.cc). */
std::unique_ptr<TilingRule> MakeTakeRule(const Graph& graph, const FusedGroup& group,
                                         const LayoutPlan& layout, const NPUConfig& config);
/*! \brief group_norm / instance_norm: statistics, then normalisation, per block of groups. */
std::unique_ptr<TilingRule> MakeNormRule(const Graph& graph, const FusedGroup& group,
                                         const LayoutPlan& layout, const NPUConfig& config);

// Tile-size search helpers of the matrix-engine rules (tiling_planner_gemm.cc).
/*! \brief Tile-size candidates for an extent: the extent, engine multiples, and small sizes. */
std::vector<int64_t> Candidates(int64_t extent, int64_t granule);
inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
/*! \brief The distinct extents of the tiles along one dim, with how many tiles have each. */
std::vector<std::pair<int64_t, int64_t>> TileExtents(int64_t extent, int64_t tile);
/*! \brief Estimated cycles of a tiling from its compute, DRAM and CMX cycles (see the gemm rules).
 */
double EstimatedCycles(double compute, double dram, double l2, int64_t output_tiles, int64_t steps);

}  // namespace tiling
}  // namespace example_npu

#endif  // EXAMPLE_NPU_COMPILER_TILING_PLANNER_DETAILS_H_
