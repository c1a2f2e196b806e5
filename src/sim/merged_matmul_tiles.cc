#include "sim/merged_matmul_tiles.h"

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/direct_gemm.h"
#include "kernels/kernels.h"
#include "sim/engines.h"

namespace example_npu {
namespace {

/*! \brief Per command of one group (from its first): how many performed commands read the L1
 * tile it wrote. */
std::vector<int64_t> TileReaders(const Program& program, const TransferPlan& plan, int64_t begin,
                                 int64_t end) {
  std::map<std::pair<Tier, int64_t>, int64_t> writer_of;
  std::vector<int64_t> readers(end - begin);
  auto read = [&](const TileRef& tile) {
    const auto writer = writer_of.find({tile.tier, tile.offset});
    if (writer != writer_of.end()) ++readers[writer->second - begin];
  };
  for (int64_t c = begin; c < end; ++c) {
    if (plan.skipped[c]) continue;
    const Command& command = program.commands[c];
    if (command.is_dma()) {
      const DmaCommand& dma = command.dma();
      if (dma.gather) read(dma.gather_ids);
      if (dma.store) {
        read(dma.tile);
      } else {
        writer_of[{dma.tile.tier, dma.tile.offset}] = c;
      }
      continue;
    }
    const ComputeCommand& compute = command.compute();
    for (size_t k = 0; k < compute.inputs.size(); ++k) {
      if (!plan.input_from[c][k].valid()) read(compute.inputs[k]);
    }
    if (compute.accumulate) read(compute.output);
    if (!plan.output_to[c].valid()) writer_of[{compute.output.tier, compute.output.offset}] = c;
  }
  return readers;
}

/*! \brief Finds the chains of one group (see the file comment) and merges them. */
class GroupChains {
 public:
  GroupChains(const Program& program, const TransferPlan& plan, const FusedRequantization& fused,
              int64_t begin, int64_t end, MergedMatmulTiles* merged)
      : program_(program), plan_(plan), fused_(fused), begin_(begin), end_(end), merged_(merged) {}

  void Plan() {
    // Chains stacked over the rows, by where the rows below the last chain of each are stored.
    MergedMatmulTiles::Chains stacks;
    std::map<std::pair<int64_t, int64_t>, size_t> stack_above;
    for (int64_t c = begin_; c < end_; ++c) {
      if (!Performed(c)) continue;
      std::vector<MergedMatmulTiles::Step> steps;
      std::vector<int64_t> chain;
      if (!AsChain(c, &steps, &chain)) continue;
      for (int64_t command : chain) merged_->merged_away[command] = true;
      c = chain.back();  // only forwarded or folded commands lie between its members
      const DramRef& out = steps.front().out;
      const auto above = stack_above.find({out.tensor, out.offset});
      size_t stack = stacks.size();
      if (above != stack_above.end() && Stack(&stacks[above->second], steps)) {
        stack = above->second;
        stack_above.erase(above);
      } else {
        stacks.push_back(std::move(steps));
      }
      const MergedMatmulTiles::Step& top = stacks[stack].front();
      stack_above[{top.out.tensor, top.out.offset + top.m * top.out_row_stride}] = stack;
    }
    // Stacks of the same rows, in the order their first tiles came, side by side.
    MergedMatmulTiles::Chains& merged = merged_->at_group_start[program_.commands[begin_].group];
    for (std::vector<MergedMatmulTiles::Step>& stack : stacks) {
      if (merged.empty() || !Beside(&merged.back(), stack)) merged.push_back(std::move(stack));
    }
  }

 private:
  bool Performed(int64_t c) const { return !plan_.skipped[c] && !fused_.folded[c]; }

  /*! \brief The next command of the group the emulator performs after `c`, or -1. */
  int64_t NextPerformed(int64_t c) const {
    for (++c; c < end_; ++c) {
      if (Performed(c)) return c;
    }
    return -1;
  }

  int64_t Readers(int64_t c) {
    if (readers_.empty()) readers_ = TileReaders(program_, plan_, begin_, end_);
    return readers_[c - begin_];
  }

  /*! \brief Whether `c` is a float32 `op` step on two inputs, accumulating or not. */
  bool FloatCompute(int64_t c, OpKind op, bool accumulate) const {
    if (c < 0 || program_.commands[c].is_dma()) return false;
    const ComputeCommand& compute = program_.commands[c].compute();
    if (compute.step != ComputeStep::kOp || compute.accumulate != accumulate ||
        compute.round_to_half || program_.graph.nodes[compute.node].op != op ||
        compute.inputs.size() != 2 || compute.output.dtype != DType::kFloat32) {
      return false;
    }
    return compute.inputs[0].dtype == DType::kFloat32 && compute.inputs[1].dtype == DType::kFloat32;
  }

  /*! \brief Input `input` of compute `c` read in place from DRAM (or an arranged tile), and the
   * elements between its rows: dense, or rows seen through a view. */
  std::optional<std::pair<DramRef, int64_t>> InPlace(int64_t c, size_t input) const {
    const DramRef& from = plan_.input_from[c][input];
    const Shape& shape = program_.commands[c].compute().inputs[input].shape;
    if (!from.valid()) return std::nullopt;
    if (from.view < 0) return std::make_pair(from, shape.empty() ? int64_t{1} : shape.back());
    const std::vector<int64_t>& strides = plan_.remote_strides[from.view];
    const size_t rank = strides.size();
    if (rank < 2 || strides[rank - 1] != 1) return std::nullopt;
    return std::make_pair(DramRef{from.tensor, from.offset}, strides[rank - 2]);
  }

  /*! \brief Matmul `c` as a step on operands in place (accumulating or not), else nullopt. */
  std::optional<MergedMatmulTiles::Step> MatmulStep(int64_t c, bool accumulate) const {
    if (!FloatCompute(c, OpKind::kMatmul, accumulate)) return std::nullopt;
    const ComputeCommand& matmul = program_.commands[c].compute();
    const Shape &a = matmul.inputs[0].shape, &b = matmul.inputs[1].shape;
    const std::optional<MatrixDims> dims = SingleMatrixProduct(a, b);
    if (!dims || !kernels::MatmulRowsApply(dims->m, dims->k, dims->n)) return std::nullopt;
    Shape product = a;
    product.back() = dims->n;
    const auto lhs = InPlace(c, 0), rhs = InPlace(c, 1);
    if (!lhs || !rhs || matmul.output.shape != product) return std::nullopt;
    MergedMatmulTiles::Step step;
    step.a = lhs->first;
    step.lda = lhs->second;
    step.b = rhs->first;
    step.ldb = rhs->second;
    step.m = dims->m;
    step.k = dims->k;
    step.n = dims->n;
    step.accumulate = accumulate;
    return step;
  }

  /*! \brief Where the [m, n] result of compute `c` goes when written into DRAM (forwarded). */
  bool ForwardedOut(int64_t c, int64_t n, MergedMatmulTiles::Step* step) const {
    const DramRef& to = plan_.output_to[c];
    step->out = DramRef{to.tensor, to.offset};
    if (to.view < 0) {
      step->out_row_stride = n;
      return true;
    }
    step->out_row_stride = PixelStrideInDram(plan_, program_.commands[to.view].dma(), to.view);
    return step->out_row_stride > 0;
  }

  /*! \brief Whether `store` writes the tile `result` as rows into a DRAM tensor nothing else of
   * the group reads, and where. */
  bool StoredOut(int64_t store, const TileRef& result, MergedMatmulTiles::Step* step) const {
    if (store < 0 || !program_.commands[store].is_dma()) return false;
    const DmaCommand& dma = program_.commands[store].dma();
    const int64_t row_stride = PixelStrideInDram(plan_, dma, store);
    if (!dma.store || dma.gather || dma.remote_tier != Tier::kDram || !SameTile(dma.tile, result) ||
        dma.tile.dtype != result.dtype ||
        program_.graph.nodes[dma.view.tensor].dtype != DType::kFloat32 ||
        !plan_.copies[store].unchanged() || row_stride <= 0) {
      return false;
    }
    if (plan_.conflicted[program_.commands[store].group].count(DramKeyOf(program_, dma))) {
      return false;
    }
    step->out = DramRef{dma.view.tensor, plan_.remote_offset[store]};
    step->out_row_stride = row_stride;
    return true;
  }

  /*!
   * \brief Whether a chain starts at matmul `c`: its operands in place, its [m, n] result
   * accumulated into by the matmuls of the rest of its reduction, if split, and then written
   * into DRAM, read by one store, or read by one add of an operand in place whose result goes
   * the same ways. `steps` gets the chain's matmul steps, `chain` all its commands.
   */
  bool AsChain(int64_t c, std::vector<MergedMatmulTiles::Step>* steps,
               std::vector<int64_t>* chain) {
    const std::optional<MergedMatmulTiles::Step> first = MatmulStep(c, false);
    if (!first) return false;
    const TileRef& result = program_.commands[c].compute().output;
    *chain = {c};
    steps->push_back(*first);
    int64_t next = c;
    for (;;) {
      if (plan_.output_to[next].valid()) {
        return ForwardedOut(next, first->n, &steps->back()) && SameRows(steps);
      }
      if (result.tier != Tier::kL1 || Readers(next) != 1) return false;
      next = NextPerformed(next);
      chain->push_back(next);
      const std::optional<MergedMatmulTiles::Step> part = MatmulStep(next, true);
      if (!part || !SameTile(program_.commands[next].compute().output, result)) break;
      steps->push_back(*part);
    }
    MergedMatmulTiles::Step& last = steps->back();
    if (StoredOut(next, result, &last)) return SameRows(steps);
    if (!FloatCompute(next, OpKind::kAdd, false)) return false;
    const ComputeCommand& add = program_.commands[next].compute();
    const int64_t product = SameTile(add.inputs[0], result) ? 0 : 1;
    const auto addend = InPlace(next, 1 - product);
    const Shape& addend_shape = add.inputs[1 - product].shape;
    if (plan_.input_from[next][product].valid() || !SameTile(add.inputs[product], result) ||
        !addend || plan_.input_from[next][1 - product].view >= 0 ||
        add.output.shape != result.shape) {
      return false;
    }
    last.addend = addend->first;
    last.addend_first = product == 1;
    if (addend_shape == result.shape) {
      last.addend_row_stride = last.n;
    } else if (addend_shape != Shape{last.n} && addend_shape != Shape{1, last.n}) {
      return false;
    }
    // The sum is stored, or first goes through an activation on chip.
    int64_t producer = next;
    TileRef produced = add.output;
    if (!plan_.output_to[producer].valid()) {
      if (produced.tier != Tier::kL1 || Readers(producer) != 1) return false;
      const int64_t following = NextPerformed(producer);
      if (Activation(following, produced)) {
        chain->push_back(following);
        last.activation = following;
        producer = following;
        produced = program_.commands[following].compute().output;
      }
    }
    if (plan_.output_to[producer].valid()) {
      return ForwardedOut(producer, last.n, &last) && SameRows(steps);
    }
    if (produced.tier != Tier::kL1 || Readers(producer) != 1) return false;
    chain->push_back(NextPerformed(producer));
    return StoredOut(chain->back(), produced, &last) && SameRows(steps);
  }

  /*! \brief Whether `c` is a float32 relu or clip of exactly the on-chip tile `tile`. */
  bool Activation(int64_t c, const TileRef& tile) const {
    if (c < 0 || program_.commands[c].is_dma()) return false;
    const ComputeCommand& compute = program_.commands[c].compute();
    const OpKind op = program_.graph.nodes[compute.node].op;
    return (op == OpKind::kRelu || op == OpKind::kClip) && compute.step == ComputeStep::kOp &&
           !compute.accumulate && !compute.round_to_half && compute.inputs.size() == 1 &&
           !plan_.input_from[c][0].valid() && SameTile(compute.inputs[0], tile) &&
           compute.inputs[0].dtype == DType::kFloat32 && compute.output.dtype == DType::kFloat32 &&
           compute.output.shape == tile.shape;
  }

  /*! \brief Whether the activations of `a` and `b` (commands, or -1) are the same op. */
  bool SameActivation(int64_t a, int64_t b) const {
    if (a < 0 || b < 0) return a == b;
    return program_.commands[a].compute().node == program_.commands[b].compute().node;
  }

  /*! \brief Gives every step of a chain the stored rows of its last. */
  static bool SameRows(std::vector<MergedMatmulTiles::Step>* steps) {
    for (MergedMatmulTiles::Step& step : *steps) {
      step.out = steps->back().out;
      step.out_row_stride = steps->back().out_row_stride;
    }
    return true;
  }

  /*! \brief Elements from `from` to `to` where both lie in one buffer: one DRAM tensor, or one
   * arena of arranged float32 tiles. */
  std::optional<int64_t> Distance(const DramRef& from, const DramRef& to) const {
    if (!from.valid() || !to.valid() || from.view >= 0 || to.view >= 0) return std::nullopt;
    if (from.arranged < 0 && to.arranged < 0) {
      if (from.tensor != to.tensor) return std::nullopt;
      return to.offset - from.offset;
    }
    if (from.arranged < 0 || to.arranged < 0) return std::nullopt;
    const ArrangedTile &x = plan_.arranged[from.arranged], &y = plan_.arranged[to.arranged];
    const int64_t bytes = y.arena_offset - x.arena_offset;
    if (x.constant != y.constant || bytes % static_cast<int64_t>(sizeof(float)) != 0) {
      return std::nullopt;
    }
    return bytes / static_cast<int64_t>(sizeof(float));
  }

  /*! \brief Whether `next` is the next tile of `group` along the output columns: the same lhs
   * rows, its result and bias the next columns, and its weight tile the next columns of the
   * same matrix or (dense weight tiles) the next panel. */
  bool NextColumns(const MergedMatmulTiles::Step& group,
                   const MergedMatmulTiles::Step& next) const {
    if (next.m != group.m || next.k != group.k || next.lda != group.lda ||
        next.accumulate != group.accumulate || Distance(group.a, next.a) != 0 ||
        (group.addend.valid() && group.addend_row_stride != 0) ||
        !SameEpilogue(group, next, group.n, group.n)) {
      return false;
    }
    const std::optional<int64_t> stride = Distance(group.b, next.b);
    if (!stride) return false;
    if (group.panel_width == 0 && next.ldb == group.ldb && *stride == group.n) return true;
    // Panels: whole vectors wide, each weight tile dense, one stride apart.
    const int64_t width = group.panel_width > 0 ? group.panel_width : group.n;
    const int64_t index = group.n / width;
    return next.n == width && width % kernels::kPanelColumns == 0 && group.n % width == 0 &&
           group.ldb == width && next.ldb == width && *stride % index == 0 &&
           (group.panel_width == 0 || *stride / index == group.panel_stride);
  }

  /*! \brief Widens `left` by `right` (the next columns of the same rows, step by step) where it
   * is that. */
  bool Beside(std::vector<MergedMatmulTiles::Step>* left,
              const std::vector<MergedMatmulTiles::Step>& right) const {
    if (left->size() != right.size()) return false;
    for (size_t s = 0; s < right.size(); ++s) {
      if (!NextColumns((*left)[s], right[s])) return false;
    }
    for (size_t s = 0; s < right.size(); ++s) {
      MergedMatmulTiles::Step& step = (*left)[s];
      if (step.panel_width == 0 && Distance(step.b, right[s].b) != step.n) {
        step.panel_width = step.n;
        step.panel_stride = *Distance(step.b, right[s].b);
      }
      step.n += right[s].n;
    }
    return true;
  }

  /*! \brief Whether `below` is `upper`'s next rows: the same weight tiles, accumulation and
   * columns, its lhs rows, result rows and addend rows (a bias row: the same one) right below. */
  bool Below(const MergedMatmulTiles::Step& upper, const MergedMatmulTiles::Step& below) const {
    return below.n == upper.n && below.k == upper.k && below.lda == upper.lda &&
           below.ldb == upper.ldb && below.accumulate == upper.accumulate &&
           Distance(upper.b, below.b) == 0 && Distance(upper.a, below.a) == upper.m * upper.lda &&
           SameEpilogue(upper, below, upper.m * upper.out_row_stride,
                        upper.m * upper.addend_row_stride);
  }

  /*! \brief Whether `next` stores and ends like `first` (the same row strides, addend form and
   * activation), its result `out_distance` and its addend `addend_distance` elements on. */
  bool SameEpilogue(const MergedMatmulTiles::Step& first, const MergedMatmulTiles::Step& next,
                    int64_t out_distance, int64_t addend_distance) const {
    return next.out_row_stride == first.out_row_stride &&
           Distance(first.out, next.out) == out_distance &&
           next.addend.valid() == first.addend.valid() &&
           SameActivation(first.activation, next.activation) &&
           (!first.addend.valid() || (next.addend_first == first.addend_first &&
                                      next.addend_row_stride == first.addend_row_stride &&
                                      Distance(first.addend, next.addend) == addend_distance));
  }

  /*! \brief Extends `stack` by `chain` (its next rows, step by step) where it is that. */
  bool Stack(std::vector<MergedMatmulTiles::Step>* stack,
             const std::vector<MergedMatmulTiles::Step>& chain) const {
    if (stack->size() != chain.size()) return false;
    for (size_t s = 0; s < chain.size(); ++s) {
      if (!Below((*stack)[s], chain[s])) return false;
    }
    for (size_t s = 0; s < chain.size(); ++s) (*stack)[s].m += chain[s].m;
    return true;
  }

  const Program& program_;
  const TransferPlan& plan_;
  const FusedRequantization& fused_;
  const int64_t begin_, end_;
  MergedMatmulTiles* merged_;
  std::vector<int64_t> readers_;  // computed when first needed
};

}  // namespace

MergedMatmulTiles PlanMergedMatmulTiles(const Program& program, const TransferPlan& plan,
                                        const FusedRequantization& fused) {
  const int64_t count = static_cast<int64_t>(program.commands.size());
  MergedMatmulTiles merged{std::vector<bool>(count),
                           std::vector<MergedMatmulTiles::Chains>(program.groups.size())};
  ForEachGroup(program, [&](int64_t begin, int64_t end) {
    GroupChains(program, plan, fused, begin, end, &merged).Plan();
  });
  return merged;
}

}  // namespace example_npu
