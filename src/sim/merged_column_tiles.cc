#include "sim/merged_column_tiles.h"

#include <utility>
#include <variant>

namespace example_npu {
namespace {

// Up to this many multiply-adds a run is one call; larger layers keep their tiles, which the
// emulator's threads share.
constexpr int64_t kMaxMergedMacs = int64_t{1} << 20;

/*! \brief One member of a run: an op step whose requantization writes integers into DRAM. */
struct ColumnTile {
  int64_t command = -1;
  const FusedRequantization::Step* step = nullptr;
  int64_t weight_tensor = -1;
  int64_t first_column = 0;  // in the weight, and so in the output row
  int64_t columns = 0;
  int64_t rows = 0;
  int64_t depth = 0;
};

/*!
 * \brief `command` as a column tile: a whole-depth quantized matmul step with its requantization
 * fused into it, writing integers into DRAM, its weight an arranged box of whole columns of a
 * constant [depth, N] matrix. False otherwise.
 */
bool AsColumnTile(const Program& program, const TransferPlan& plan,
                  const FusedRequantization& fused, int64_t command, ColumnTile* tile) {
  const Command& c = program.commands[command];
  if (c.is_dma() || fused.with[command] < 0) return false;
  const ComputeCommand& compute = c.compute();
  const FusedRequantization::Step& step = fused.steps[fused.with[command]];
  if (program.graph.nodes[compute.node].op != OpKind::kQnnMatmul || compute.accumulate ||
      !step.dram.valid() || step.type == kernels::SumsType::kFloat32 ||
      compute.inputs.size() != 2 || compute.inputs[1].shape.size() != 2 ||
      compute.output.shape.size() != 2) {
    return false;
  }
  const DramRef& weight = plan.input_from[command][1];
  if (weight.arranged < 0 || !plan.arranged[weight.arranged].constant) return false;
  const ArrangedTile& arranged = plan.arranged[weight.arranged];
  const Shape& matrix = program.graph.nodes[arranged.tensor].shape;
  const Shape& box = compute.inputs[1].shape;
  // Row 0 of whole columns: the box starts in the first row, spans every row, and was arranged
  // as it lies (rows N apart in the weight, dense in the tile; no transpose).
  if (matrix.size() != 2 || box[0] != matrix[0] || arranged.storage_offset >= matrix[1] ||
      arranged.storage_offset + box[1] > matrix[1] || !arranged.arrange.unchanged() ||
      arranged.arrange.SourceSpan() != (box[0] - 1) * matrix[1] + box[1] ||
      arranged.arrange.DestinationSpan() != box[0] * box[1]) {
    return false;
  }
  *tile = ColumnTile{
      command, &step, arranged.tensor, arranged.storage_offset, box[1], compute.output.shape[0],
      box[0]};
  return true;
}

bool SameRequantizationButChannels(const kernels::Requantization& a,
                                   const kernels::Requantization& b) {
  return a.output_zero_point == b.output_zero_point && a.min == b.min && a.max == b.max &&
         a.rounding == b.rounding && a.single_rounding == b.single_rounding &&
         a.bias.empty() == b.bias.empty() && a.float32.empty() == b.float32.empty() &&
         a.float32.bias.empty() == b.float32.bias.empty() &&
         a.float32.input_scale == b.float32.input_scale &&
         a.float32.output_scale == b.float32.output_scale;
}

/*! \brief Whether `next` continues the run ending in `last`: the same activation, the next
 * columns of the same weight and of the same output rows, the same requantization but for its
 * channels. */
bool Continues(const Program& program, const TransferPlan& plan, const ColumnTile& last,
               const ColumnTile& next) {
  const ComputeCommand& a = program.commands[last.command].compute();
  const ComputeCommand& b = program.commands[next.command].compute();
  const TileRef &x = a.inputs[0], &y = b.inputs[0];
  const DramRef &from_x = plan.input_from[last.command][0],
                &from_y = plan.input_from[next.command][0];
  const QnnAttrs& qa = std::get<QnnAttrs>(a.attrs);
  const QnnAttrs& qb = std::get<QnnAttrs>(b.attrs);
  return a.node == b.node && x.tier == y.tier && x.offset == y.offset && x.shape == y.shape &&
         x.dtype == y.dtype && from_x.tensor == from_y.tensor && from_x.offset == from_y.offset &&
         from_x.view == from_y.view && from_x.arranged == from_y.arranged &&
         last.weight_tensor == next.weight_tensor &&
         next.first_column == last.first_column + last.columns && last.rows == next.rows &&
         last.depth == next.depth && last.step->type == next.step->type &&
         last.step->dram.tensor == next.step->dram.tensor &&
         next.step->dram.offset == last.step->dram.offset + last.columns &&
         last.step->dram_pixel_stride == next.step->dram_pixel_stride &&
         qa.input_zero_point == qb.input_zero_point &&
         SameRequantizationButChannels(last.step->prepared.requantization(),
                                       next.step->prepared.requantization());
}

/*! \brief The members' requantizations (each its tile's channels) as one over all of them. */
std::unique_ptr<kernels::Requantization> Concatenated(const std::vector<ColumnTile>& run) {
  auto merged = std::make_unique<kernels::Requantization>(run[0].step->prepared.requantization());
  merged->multipliers.clear();
  merged->bias.clear();
  merged->float32.weight_scales.clear();
  merged->float32.bias.clear();
  for (const ColumnTile& tile : run) {
    const kernels::Requantization& r = tile.step->prepared.requantization();
    for (int64_t c = 0; c < tile.columns; ++c) {
      merged->multipliers.push_back(r.Multiplier(c));
      if (!r.bias.empty()) merged->bias.push_back(r.bias[c]);
      if (!r.float32.empty()) merged->float32.weight_scales.push_back(r.float32.WeightScale(c));
      if (!r.float32.bias.empty()) merged->float32.bias.push_back(r.float32.bias[c]);
    }
  }
  return merged;
}

}  // namespace

MergedColumnTiles PlanMergedColumnTiles(const Program& program, const TransferPlan& plan,
                                        const FusedRequantization& fused) {
  const int64_t commands = static_cast<int64_t>(program.commands.size());
  MergedColumnTiles merged{std::vector<int64_t>(commands, -1), std::vector<bool>(commands), {}};
  std::vector<ColumnTile> run;
  auto finish = [&] {
    int64_t columns = 0;
    for (const ColumnTile& tile : run) columns += tile.columns;
    if (run.size() >= 2 && run[0].rows * run[0].depth * columns <= kMaxMergedMacs) {
      MergedColumnTiles::Merge merge;
      for (const ColumnTile& tile : run) {
        merge.members.push_back(tile.command);
        merged.merged_away[tile.command] = tile.command != run.back().command;
      }
      merge.weight = DramRef{run[0].weight_tensor, run[0].first_column};
      merge.weight_stride = program.graph.nodes[run[0].weight_tensor].shape[1];
      merge.columns = columns;
      merge.requant = Concatenated(run);
      merge.prepared = std::make_unique<kernels::PreparedRequantization>(*merge.requant, columns);
      merged.computes[run.back().command] = static_cast<int64_t>(merged.merges.size());
      merged.merges.push_back(std::move(merge));
    }
    run.clear();
  };
  for (int64_t c = 0; c < commands; ++c) {
    if (!run.empty() && program.commands[c].group != program.commands[run.back().command].group) {
      finish();
    }
    ColumnTile tile;
    if (AsColumnTile(program, plan, fused, c, &tile)) {
      if (!run.empty() && !Continues(program, plan, run.back(), tile)) finish();
      run.push_back(tile);
    } else if (!plan.skipped[c] && !fused.folded[c]) {
      // Only commands that do nothing (forwarded transfers, fused requantizations) may lie
      // between members: the run's activation tile then holds the same data for all of them.
      finish();
    }
  }
  finish();
  return merged;
}

}  // namespace example_npu
