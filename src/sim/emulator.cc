#include "sim/emulator.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/direct_gemm.h"
#include "kernels/half.h"
#include "kernels/near_ties.h"
#include "kernels/parallel.h"
#include "kernels/quantize.h"
#include "sim/dma.h"
#include "sim/engines.h"

namespace example_npu {
namespace {

/*! \brief A tier's byte buffer, on a cache line so tiles are addressed in place. */
class TierBuffer {
 public:
  explicit TierBuffer(int64_t bytes) : bytes_(static_cast<size_t>(bytes)) {}
  uint8_t* at(int64_t offset) { return bytes_.data() + offset; }
  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }

 private:
  kernels::CacheLineVector<uint8_t> bytes_;
};

}  // namespace

/*! \brief The on-chip tiers and the DRAM scratch of one run. */
class Memories {
 public:
  Memories(int64_t l1, int64_t l2, int64_t scratch, int64_t arranged, int64_t commands)
      : l1(l1), l2(l2), scratch(scratch), arranged(arranged), tie_breaks(commands) {}
  TierBuffer l1;
  TierBuffer l2;
  TierBuffer scratch;
  TierBuffer arranged;  // the running group's arranged input tiles (TransferPlan::arranged)
  /*! \brief Per requantization step of its own: (output index, TVM's integer) of its near-tie
   * outputs, written by the op step before it (StashTieBreaks), which alone has the operands. */
  std::vector<std::vector<std::pair<int64_t, int64_t>>> tie_breaks;
};

namespace {

/*! \brief What one run executes against: the program, its transfer plan and the memories. */
struct RunContext {
  const Program& program;
  const TransferPlan& plan;
  const DramBindings& dram;
  Memories* mem;
  const uint8_t* const_arena;
  kernels::WeightPackCache* packed_weights;
  const FusedRequantization& fused;
  const MergedColumnTiles& merged;

  uint8_t* Dram(int64_t tensor) const {
    const TensorPlacement& p = program.placements[tensor];
    switch (p.kind) {
      case TensorPlacement::Kind::kInput:
        return static_cast<uint8_t*>(const_cast<void*>(dram.inputs[p.index]));
      case TensorPlacement::Kind::kOutput:
        return static_cast<uint8_t*>(dram.outputs[p.index]);
      case TensorPlacement::Kind::kConst:
        return static_cast<uint8_t*>(const_cast<void*>(dram.constants[p.index]));
      case TensorPlacement::Kind::kScratch:
        return mem->scratch.at(p.index);
      case TensorPlacement::Kind::kNone:
        break;
    }
    TVM_FFI_THROW(InternalError) << "tensor " << program.graph.nodes[tensor].name
                                 << " has no DRAM placement";
    TVM_FFI_UNREACHABLE();
  }

  uint8_t* Dram(const DramRef& ref) const {
    if (ref.arranged >= 0) return Arranged(ref.arranged);
    return Dram(ref.tensor) + ref.offset * DTypeBytes(program.graph.nodes[ref.tensor].dtype);
  }

  /*! \brief An arranged tile: read only (its loads and forwarded compute inputs read it). */
  uint8_t* Arranged(int64_t index) const {
    const ArrangedTile& tile = plan.arranged[index];
    return tile.constant ? const_cast<uint8_t*>(const_arena) + tile.arena_offset
                         : mem->arranged.at(tile.arena_offset);
  }

  uint8_t* Tile(const TileRef& tile) const {
    return tile.tier == Tier::kL2 ? mem->l2.at(tile.offset) : mem->l1.at(tile.offset);
  }
};

#ifndef NDEBUG
/*!
 * \brief Debug builds: the bytes a DMA copy touches lie inside the buffers it was given (the
 * tile inside its tier, the remote side inside its tensor, staged copy or arranged tile). The
 * compiler sizes every buffer; this is the emulator's own guard against a planning defect.
 */
void CheckDmaBounds(const RunContext& ctx, int64_t command, const uint8_t* remote,
                    const uint8_t* tile) {
  const DmaCommand& dma = ctx.program.commands[command].dma();
  const BoxCopy& copy = ctx.plan.copies[command];
  const int64_t tile_item = DTypeBytes(dma.tile.dtype);
  const int64_t arranged = ctx.plan.arranged_of[command];
  const int64_t remote_item =
      DTypeBytes(arranged >= 0 ? ctx.program.graph.nodes[ctx.plan.arranged[arranged].tensor].dtype
                               : ctx.program.graph.nodes[dma.view.tensor].dtype);
  const int64_t tile_bytes = (dma.store ? copy.SourceSpan() : copy.DestinationSpan()) * tile_item;
  const int64_t remote_bytes =
      (dma.store ? copy.DestinationSpan() : copy.SourceSpan()) * remote_item;
  TierBuffer& tier = dma.tile.tier == Tier::kL2 ? ctx.mem->l2 : ctx.mem->l1;
  TVM_FFI_ICHECK(tile >= tier.at(0) && tile + tile_bytes <= tier.at(0) + tier.size())
      << "DMA command " << command << " reaches outside its on-chip tier";
  const uint8_t* begin = nullptr;
  int64_t size = 0;
  if (arranged >= 0) {
    begin = ctx.Arranged(arranged);
    const ArrangedTile& tile_info = ctx.plan.arranged[arranged];
    size = tile_info.arrange.DestinationSpan() * remote_item;
  } else if (dma.remote_tier == Tier::kL2) {
    begin = ctx.mem->l2.at(0);
    size = ctx.mem->l2.size();
  } else {
    const Node& node = ctx.program.graph.nodes[dma.view.tensor];
    begin = ctx.Dram(dma.view.tensor);
    size = kernels::NumElements(node.shape) * DTypeBytes(node.dtype);
  }
  TVM_FFI_ICHECK(remote_bytes == 0 || (remote >= begin && remote + remote_bytes <= begin + size))
      << "DMA command " << command << " reaches outside "
      << ctx.program.graph.nodes[dma.view.tensor].name;
}
#endif

/*! \brief The id at `index` of an int32 / int64 ids tile. */
int64_t IdAt(const uint8_t* ids, DType dtype, int64_t index) {
  if (dtype == DType::kInt32) return reinterpret_cast<const int32_t*>(ids)[index];
  return reinterpret_cast<const int64_t*>(ids)[index];
}

/*!
 * \brief A row gather: tile row r = table row ids[r]. An id outside the table is the caller's
 * error (TVM's take reads out of bounds there), so it is reported, never followed.
 */
void RunGather(const RunContext& ctx, int64_t command) {
  const DmaCommand& dma = ctx.program.commands[command].dma();
  const Node& table = ctx.program.graph.nodes[dma.view.tensor];
  const int64_t item = DTypeBytes(table.dtype);
  const int64_t table_rows = dma.view.shape[0];
  const int64_t rows = dma.tile.shape[0];
  const int64_t row_bytes = rows == 0 ? 0 : kernels::NumElements(dma.tile.shape) / rows * item;
  const uint8_t* source = ctx.Dram(dma.view.tensor) + dma.view.offset * item;
  const uint8_t* ids = ctx.Tile(dma.gather_ids);
  uint8_t* tile = ctx.Tile(dma.tile);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t given = IdAt(ids, dma.gather_ids.dtype, r);
    // No overflow: table_rows > 0 is added to a negative id only.
    const int64_t id = given < 0 && dma.gather_negative_from_end ? given + table_rows : given;
    if (id < 0 || id >= table_rows) {
      TVM_FFI_THROW(ValueError) << "take: id " << given << " is outside the " << table_rows
                                << " rows of " << table.name
                                << " (an embedding lookup's ids must lie in [0, " << table_rows
                                << "))";
    }
    std::memcpy(tile + r * row_bytes, source + id * dma.view.strides[0] * item, row_bytes);
  }
}

void RunDma(const RunContext& ctx, int64_t command) {
  const DmaCommand& dma = ctx.program.commands[command].dma();
  if (dma.gather) {
    RunGather(ctx, command);
    return;
  }
  const int64_t offset_bytes =
      ctx.plan.remote_offset[command] * DTypeBytes(ctx.program.graph.nodes[dma.view.tensor].dtype);
  const int64_t arranged = ctx.plan.arranged_of[command];
  uint8_t* remote = arranged >= 0                  ? ctx.Arranged(arranged)
                    : dma.remote_tier == Tier::kL2 ? ctx.mem->l2.at(dma.remote_offset)
                                                   : ctx.Dram(dma.view.tensor);
  remote += offset_bytes;
  uint8_t* tile = ctx.Tile(dma.tile);
#ifndef NDEBUG
  CheckDmaBounds(ctx, command, remote, tile);
#endif
  if (dma.store) {
    ctx.plan.copies[command].Run(tile, remote);
  } else {
    ctx.plan.copies[command].Run(remote, tile);
  }
}

/*!
 * \brief Widens a float16 / integer tile to float32: exact for float16, int8, uint8, int16;
 * int32 / int64 (astype's inputs) rounded to nearest even, as LLVM's sitofp in TVM's build.
 */
void Widen(const uint8_t* base, DType dtype, int64_t size, std::vector<float>* out) {
  // Grown, never shrunk: a buffer kept between tiles is neither reallocated nor zero-filled.
  if (out->size() < static_cast<size_t>(size)) out->resize(static_cast<size_t>(size));
  switch (dtype) {
    case DType::kFloat16:
      kernels::HalfToFloat(reinterpret_cast<const uint16_t*>(base), out->data(), size);
      return;
    case DType::kInt8:
      std::copy_n(reinterpret_cast<const int8_t*>(base), size, out->begin());
      return;
    case DType::kUInt8:
      std::copy_n(base, size, out->begin());
      return;
    case DType::kInt16:
      std::copy_n(reinterpret_cast<const int16_t*>(base), size, out->begin());
      return;
    case DType::kInt32:
      std::copy_n(reinterpret_cast<const int32_t*>(base), size, out->begin());
      return;
    case DType::kInt64:
      // One conversion int64 -> float (never through double, which would round twice).
      std::copy_n(reinterpret_cast<const int64_t*>(base), size, out->begin());
      return;
    default:
      TVM_FFI_THROW(InternalError) << "cannot widen a " << DTypeName(dtype) << " tile";
  }
}

/*! \brief fn(data as the activation dtype's elements): int8, uint8 or int16 (the quantized
 * steps' activations; validation admits no other). */
template <typename Fn>
void WithActivation(DType dtype, const uint8_t* data, const Fn& fn) {
  switch (dtype) {
    case DType::kInt8:
      fn(reinterpret_cast<const int8_t*>(data));
      return;
    case DType::kUInt8:
      fn(data);
      return;
    default:
      fn(reinterpret_cast<const int16_t*>(data));
  }
}

/*! \brief A quantized op's activation zero point: its attribute, or the one element of the input
 * that holds it at run time (a float32 qnn.matmul's, from DynamicQuantizeLinear). */
int64_t InputZeroPoint(const RunContext& ctx, const QnnAttrs& attrs) {
  if (attrs.input_zero_point_node < 0) return attrs.input_zero_point;
  const uint8_t* value = ctx.Dram(attrs.input_zero_point_node);
  return ctx.program.graph.nodes[attrs.input_zero_point_node].dtype == DType::kInt8
             ? int64_t{static_cast<int8_t>(*value)}
             : int64_t{*value};
}

/*!
 * \brief A quantized op's step on its integer tiles as they lie (int8 / int16 activations, int8
 * weights): the exact int64 accumulators of the op, or their requantization into the output
 * integers (stored as float, narrowed by the store). With `fused` (a requantization step fused
 * into this one, see FusedRequantization), the op's sums go where it says instead. `zero_point`:
 * the activation's (InputZeroPoint).
 */
void RunQuantizedStep(const Node& node, const ComputeCommand& compute, int64_t zero_point,
                      const std::vector<const uint8_t*>& inputs, uint8_t* output,
                      kernels::WeightPackCache* packs, const kernels::SumsOut* fused,
                      const kernels::PixelStrides* in_strides) {
  const QnnAttrs& attrs = std::get<QnnAttrs>(compute.attrs);
  const Shape& out_shape = compute.output.shape;
  const int64_t size = kernels::NumElements(out_shape);
  const int64_t channels = out_shape.empty() ? 1 : out_shape.back();  // innermost in every tile
  int64_t* acc = reinterpret_cast<int64_t*>(output);
  const TileRef& x = compute.inputs[0];
  const TileRef& w = compute.inputs[1];
  TVM_FFI_ICHECK(w.dtype == DType::kInt8 && IsQuantizedDType(x.dtype))
      << "quantized " << OpKindName(node.op)
      << " takes int8 / uint8 / int16 activations, int8 weights";
  const int8_t* weight = reinterpret_cast<const int8_t*>(inputs[1]);
  kernels::SumsOut sums = fused != nullptr ? *fused : kernels::SumsOut{acc, compute.accumulate};
  // A fused requantization with float32 operands (a QDQ matmul's) finds its near-tie outputs,
  // recomputed here in TVM's steps.
  thread_local std::vector<int64_t> ties, results;
  ties.clear();
  if (fused != nullptr && !fused->requant->requantization().float32.empty()) {
    sums.near_ties = &ties;
  }
  auto run = [&](const auto* data) {
    if (node.op == OpKind::kQnnConv2d) {
      kernels::QuantizedConv2d(data, x.shape, zero_point, weight, w.shape, sums, out_shape,
                               attrs.conv, packs, in_strides);
    } else if (node.op == OpKind::kQnnConv2dTranspose) {
      kernels::QuantizedConv2dTranspose(data, x.shape, zero_point, weight, w.shape, acc, out_shape,
                                        attrs.transposed.params, compute.accumulate);
    } else {
      const int64_t rows = size / std::max<int64_t>(1, channels), depth = x.shape.back();
      kernels::QuantizedMatmul(data, zero_point, weight, rows, depth, channels, sums, packs);
      if (!ties.empty()) {
        kernels::Float32MatmulResults(ties, data, zero_point, weight, channels, 0, depth, channels,
                                      fused->requant->requantization(), &results, packs);
        kernels::StoreResults(ties, results, channels, sums.out, sums.out_type,
                              sums.PixelStride(channels));
      }
      if (attrs.weight_zero_point != 0) {
        kernels::SubtractRhsZeroPoint(data, zero_point, attrs.weight_zero_point, rows,
                                      x.shape.back(), channels, acc);
      }
    }
  };
  WithActivation(x.dtype, inputs[0], run);
}

/*! \brief A run of column tiles (MergedColumnTiles) as one matmul over all their columns, their
 * requantization writing the integers into DRAM as the first member's would, on to the last's. */
void RunMergedColumns(const RunContext& ctx, const MergedColumnTiles::Merge& merge,
                      const uint8_t* activation) {
  const ComputeCommand& last = ctx.program.commands[merge.members.back()].compute();
  const FusedRequantization::Step& first = ctx.fused.steps[ctx.fused.with[merge.members.front()]];
  kernels::SumsOut to{nullptr,
                      false,
                      merge.prepared.get(),
                      ctx.Dram(first.dram),
                      first.type,
                      first.dram_pixel_stride};
  const int64_t zero_point = std::get<QnnAttrs>(last.attrs).input_zero_point;
  const int8_t* weight = reinterpret_cast<const int8_t*>(ctx.Dram(merge.weight));
  const int64_t rows = last.output.shape[0], depth = last.inputs[0].shape.back();
  thread_local std::vector<int64_t> ties, results;
  ties.clear();
  if (!merge.requant->float32.empty()) to.near_ties = &ties;
  auto run = [&](const auto* data) {
    kernels::QuantizedMatmul(data, zero_point, weight, rows, depth, merge.columns, to,
                             ctx.packed_weights, merge.weight_stride);
    if (!ties.empty()) {
      kernels::Float32MatmulResults(ties, data, zero_point, weight,
                                    merge.weight_stride > 0 ? merge.weight_stride : merge.columns,
                                    0, depth, merge.columns, *merge.requant, &results,
                                    ctx.packed_weights);
      kernels::StoreResults(ties, results, merge.columns, to.out, to.out_type,
                            to.PixelStride(merge.columns));
    }
  };
  WithActivation(last.inputs[0].dtype, activation, run);
}

/*! \brief One chain of float32 matmul steps (MergedMatmulTiles): each product written (or
 * added) into its stored rows, its addend added as they are stored (in the add's operand order). */
void RunMergedMatmulChain(const RunContext& ctx,
                          const std::vector<MergedMatmulTiles::Step>& chain) {
  for (const MergedMatmulTiles::Step& step : chain) {
    float* out = reinterpret_cast<float*>(ctx.Dram(step.out));
    const float* a = reinterpret_cast<const float*>(ctx.Dram(step.a));
    const float* b = reinterpret_cast<const float*>(ctx.Dram(step.b));
    kernels::DirectRows rows;
    rows.row_stride = step.lda;
    rows.depth = step.k;
    kernels::DirectAddend addend;
    if (step.addend.valid()) {
      addend = {reinterpret_cast<const float*>(ctx.Dram(step.addend)), step.addend_row_stride,
                step.addend_first};
    }
    if (step.panel_width > 0) {
      kernels::DirectGemmPanels(step.m, step.n, a, rows, b, step.ldb, step.panel_width,
                                step.panel_stride, out, step.out_row_stride, step.accumulate,
                                addend);
    } else {
      kernels::DirectGemm(step.m, step.n, a, rows, b, step.ldb, out, step.out_row_stride,
                          step.accumulate, addend);
    }
    if (step.activation >= 0) {
      // The tile's own op on each row (through a row of scratch: kernels never alias).
      const ComputeCommand& activation = ctx.program.commands[step.activation].compute();
      const OpKind op = ctx.program.graph.nodes[activation.node].op;
      const kernels::Shape row_shape{step.n};
      // Rows shared out like the GEMM's (a hand-off only for 64 Ki elements or more).
      const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(step.n, 1));
      kernels::ParallelFor(step.m, grain, [&](int64_t begin, int64_t end) {
        thread_local std::vector<float> scratch;
        if (scratch.size() < static_cast<size_t>(step.n)) scratch.resize(step.n);
        for (int64_t i = begin; i < end; ++i) {
          float* row = out + i * step.out_row_stride;
          RunOp(op, activation.attrs, {OperandF32{row, &row_shape}}, scratch.data(), row_shape);
          std::copy_n(scratch.data(), step.n, row);
        }
      });
    }
  }
}

/*! \brief The chains a group computes when it starts: several are shared out whole among the
 * threads, one alone shares its GEMM's rows or column panels (kernels::DirectGemm). */
void RunMergedMatmuls(const RunContext& ctx, const MergedMatmulTiles::Chains& chains) {
  const int64_t count = static_cast<int64_t>(chains.size());
  kernels::ParallelFor(count, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) RunMergedMatmulChain(ctx, chains[c]);
  });
}

/*! \brief Where quantized step `command` reads its inputs (dense tiles, or DRAM in place). */
void QuantizedOperands(const RunContext& ctx, int64_t command, std::vector<const uint8_t*>* tiles) {
  const ComputeCommand& compute = ctx.program.commands[command].compute();
  const std::vector<DramRef>& input_from = ctx.plan.input_from[command];
  tiles->clear();
  for (size_t i = 0; i < compute.inputs.size(); ++i) {
    // (a depthwise qnn.conv2d's activation may be a view: TakesViews in the transfer plan)
    TVM_FFI_ICHECK(input_from[i].view < 0 ||
                   (i == 0 && ctx.program.graph.nodes[compute.node].op == OpKind::kQnnConv2d))
        << "quantized ops read dense tiles";
    tiles->push_back(input_from[i].valid() ? ctx.Dram(input_from[i]) : ctx.Tile(compute.inputs[i]));
  }
}

/*!
 * \brief After an op step whose requantization runs as its own step (the next command): where
 * the op is a whole-depth matmul with float32 operands, its outputs near a tie and TVM's integers
 * for them, for that step to apply. Found here because the step may run after a later load has
 * reused the op's input tiles (it depends only on the op step); a reduction split over several
 * steps keeps the exact rounding.
 */
void StashTieBreaks(const RunContext& ctx, int64_t command,
                    const std::vector<const uint8_t*>& operands, const uint8_t* accumulators,
                    kernels::WeightPackCache* packs) {
  const ComputeCommand& op = ctx.program.commands[command].compute();
  if (op.accumulate || command + 1 >= static_cast<int64_t>(ctx.program.commands.size())) return;
  const Command& next = ctx.program.commands[command + 1];
  if (next.is_dma() || next.compute().step != ComputeStep::kRequantize ||
      next.compute().node != op.node) {
    return;
  }
  const kernels::Requantization& requant = std::get<QnnAttrs>(next.compute().attrs).requant;
  std::vector<std::pair<int64_t, int64_t>>& results = ctx.mem->tie_breaks[command + 1];
  results.clear();
  if (requant.float32.empty()) return;  // a QDQ matmul's only
  const QnnAttrs& attrs = std::get<QnnAttrs>(op.attrs);
  const int64_t channels = op.output.shape.empty() ? 1 : op.output.shape.back();
  const int64_t rows = kernels::NumElements(op.output.shape) / std::max<int64_t>(channels, 1);
  thread_local std::vector<int64_t> ties;
  ties.clear();
  kernels::FindNearTies(reinterpret_cast<const int64_t*>(accumulators), rows, channels, requant,
                        &ties);
  const TileRef &x = op.inputs[0], &w = op.inputs[1];
  const int8_t* weight = reinterpret_cast<const int8_t*>(operands[1]);
  thread_local std::vector<int64_t> values;
  WithActivation(x.dtype, operands[0], [&](const auto* data) {
    kernels::Float32MatmulResults(ties, data, attrs.input_zero_point, weight, w.shape.back(),
                                  attrs.weight_zero_point, x.shape.back(), channels, requant,
                                  &values, packs);
  });
  for (size_t t = 0; t < ties.size(); ++t) results.emplace_back(ties[t], values[t]);
}

/*! \brief A requantization step of its own (the compiler gave it its tile's channels), with the
 * TVM integers its op step stashed for the outputs near a tie. */
void RunRequantizeStep(const RunContext& ctx, int64_t command, const uint8_t* accumulators,
                       float* out) {
  const ComputeCommand& step = ctx.program.commands[command].compute();
  const int64_t channels = step.output.shape.empty() ? 1 : step.output.shape.back();
  kernels::Requantize(reinterpret_cast<const int64_t*>(accumulators),
                      kernels::NumElements(step.output.shape), channels, 0,
                      std::get<QnnAttrs>(step.attrs).requant, out);
  for (const auto& [index, value] : ctx.mem->tie_breaks[command]) {
    out[index] = static_cast<float>(value);
  }
}

void RunCompute(const RunContext& ctx, int64_t command) {
  const ComputeCommand& compute = ctx.program.commands[command].compute();
  const Node& node = ctx.program.graph.nodes[compute.node];
  const std::vector<DramRef>& input_from = ctx.plan.input_from[command];
  const DramRef& output_to = ctx.plan.output_to[command];
  uint8_t* output = output_to.valid() ? ctx.Dram(output_to) : ctx.Tile(compute.output);
  if (std::holds_alternative<QnnAttrs>(compute.attrs)) {
    thread_local std::vector<const uint8_t*> tiles;  // reused: a tile's step allocates nothing
    QuantizedOperands(ctx, command, &tiles);
    if (compute.step == ComputeStep::kRequantize) {
      RunRequantizeStep(ctx, command, tiles[0], reinterpret_cast<float*>(output));
      return;
    }
    // A weight read in place from a bound constant (or its arranged tile) stays as it is
    // while the constants do: its packing is kept (ConstArena clears it when they change).
    const DramRef& weight = input_from.size() > 1 ? input_from[1] : DramRef{};
    const bool constant_weight =
        weight.valid() && (weight.arranged >= 0 ? ctx.plan.arranged[weight.arranged].constant
                                                : ctx.program.placements[weight.tensor].kind ==
                                                      TensorPlacement::Kind::kConst);
    kernels::WeightPackCache* packs = constant_weight ? ctx.packed_weights : nullptr;
    if (const int64_t merge = ctx.merged.computes[command]; merge >= 0) {
      RunMergedColumns(ctx, ctx.merged.merges[merge], tiles[0]);
      return;
    }
    const int64_t zero_point = InputZeroPoint(ctx, std::get<QnnAttrs>(compute.attrs));
    const kernels::PixelStrides in_strides =
        input_from[0].view >= 0 ? PixelStridesOf(ctx.plan.remote_strides[input_from[0].view])
                                : kernels::PixelStrides{};
    const kernels::PixelStrides* in_view = input_from[0].view >= 0 ? &in_strides : nullptr;
    const int64_t fused = ctx.fused.with[command];
    if (fused < 0) {
      RunQuantizedStep(node, compute, zero_point, tiles, output, packs, nullptr, in_view);
      StashTieBreaks(ctx, command, tiles, output, packs);
      return;
    }
    const FusedRequantization::Step& step = ctx.fused.steps[fused];
    const kernels::SumsOut to{nullptr,
                              false,
                              &step.prepared,
                              step.dram.valid()
                                  ? ctx.Dram(step.dram)
                                  : ctx.Tile(ctx.program.commands[step.command].compute().output),
                              step.type,
                              step.dram.valid() ? step.dram_pixel_stride : 0};
    RunQuantizedStep(node, compute, zero_point, tiles, output, packs, &to, in_view);
    return;
  }
  // Per-thread and reused: a tile's compute allocates nothing on the common paths (widened: the
  // float16 / integer tiles as float32, one buffer per operand).
  thread_local std::vector<std::vector<float>> widened;
  thread_local std::vector<OperandF32> inputs;
  inputs.clear();
  bool aliased = false;
  for (size_t i = 0; i < compute.inputs.size(); ++i) {
    const TileRef& tile = compute.inputs[i];
    const uint8_t* base = input_from[i].valid() ? ctx.Dram(input_from[i]) : ctx.Tile(tile);
    aliased |= base == output;
    if (input_from[i].view >= 0) {
      inputs.push_back(OperandF32{reinterpret_cast<const float*>(base), &tile.shape,
                                  &ctx.plan.remote_strides[input_from[i].view]});
    } else if (tile.dtype == DType::kFloat32 ||
               (tile.dtype == DType::kInt64 && node.op != OpKind::kCast)) {
      inputs.push_back(OperandF32{reinterpret_cast<const float*>(base), &tile.shape});
    } else {
      if (widened.size() < compute.inputs.size()) widened.resize(compute.inputs.size());
      Widen(base, tile.dtype, kernels::NumElements(tile.shape), &widened[i]);
      inputs.push_back(OperandF32{widened[i].data(), &tile.shape});
    }
  }
  float* out = reinterpret_cast<float*>(output);
  const int64_t size = kernels::NumElements(compute.output.shape);
  if (output_to.view >= 0) {
    TVM_FFI_ICHECK(!compute.accumulate && !compute.round_to_half && !aliased)
        << "only a plain float32 result is computed into a strided DRAM view";
    RunOp(node.op, compute.attrs, inputs, out, compute.output.shape,
          &ctx.plan.remote_strides[output_to.view]);
    return;
  }
  if (!compute.accumulate && !aliased) {
    RunOp(node.op, compute.attrs, inputs, out, compute.output.shape);
  } else {
    // Partial sums and in-place epilogues go through a temporary: kernels never alias.
    thread_local std::vector<float> temp_buffer;
    if (temp_buffer.size() < static_cast<size_t>(size)) temp_buffer.resize(size);
    float* temp = temp_buffer.data();
    RunOp(node.op, compute.attrs, inputs, temp, compute.output.shape);
    if (compute.accumulate) {
      for (int64_t i = 0; i < size; ++i) out[i] += temp[i];
    } else {
      std::memcpy(out, temp, size * sizeof(float));
    }
  }
  if (compute.round_to_half) kernels::RoundToHalf(out, size);
}

}  // namespace

EmulatorOptions EmulatorOptions::FromEnvironment() {
  EmulatorOptions options;
  if (const char* env = std::getenv("EXAMPLE_NPU_FORWARD_DMA")) {
    options.forward_dma = std::string(env) != "0";
  }
  if (const char* env = std::getenv("EXAMPLE_NPU_FUSE_REQUANTIZE")) {
    options.fuse_requantize = std::string(env) != "0";
  }
  return options;
}

Emulator::Emulator(const Program& program, EmulatorOptions options)
    : program_(program),
      transfers_(PlanTransfers(program, options.forward_dma)),
      dataflow_(AnalyzeDataflow(program, transfers_)),
      fused_(PlanFusedRequantization(program, &transfers_, options.fuse_requantize,
                                     options.forward_dma)),
      merged_(PlanMergedColumnTiles(program, transfers_, fused_)),
      matmuls_(PlanMergedMatmulTiles(program, transfers_, fused_)) {
  performed_.resize(program.commands.size());
  for (size_t i = 0; i < program.commands.size(); ++i) {
    performed_[i] = !transfers_.skipped[i] && !fused_.folded[i] && !merged_.merged_away[i] &&
                    !matmuls_.merged_away[i];
  }
  // A group left with one computing command (its column tiles merged into one call, the rest
  // fused, forwarded or computed when it starts) gains nothing from a second thread but the
  // hand-off: it runs in order.
  for (GroupSchedule& group : dataflow_.groups) {
    int64_t computing = 0;
    for (int64_t i = group.begin; i < group.end && computing < 2; ++i) {
      computing += !program.commands[i].is_dma() && performed_[i];
    }
    group.concurrent &= computing >= 2;
  }
  ListPerformed(performed_, &dataflow_);
  // Only the bytes the plan uses are backed (at most the tier's capacity, checked at compile
  // time).
  for (const GroupInfo& group : program.groups) {
    l1_bytes_ = std::max(l1_bytes_, group.l1_base + group.l1_bytes);
    l2_bytes_ = std::max(l2_bytes_, group.l2_base + group.l2_bytes);
  }
}

Emulator::~Emulator() = default;

std::unique_ptr<Memories> Emulator::Acquire() const {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!pool_.empty()) {
      std::unique_ptr<Memories> memories = std::move(pool_.back());
      pool_.pop_back();
      return memories;
    }
  }
  return std::make_unique<Memories>(l1_bytes_, l2_bytes_, program_.dram_scratch_bytes,
                                    transfers_.run_arena_bytes,
                                    static_cast<int64_t>(program_.commands.size()));
}

void Emulator::Release(std::unique_ptr<Memories> memories) const {
  std::lock_guard<std::mutex> lock(pool_mu_);
  pool_.push_back(std::move(memories));
}

const uint8_t* Emulator::ConstArena(const DramBindings& dram) const {
  std::lock_guard<std::mutex> lock(arena_mu_);
  if (arena_sources_ == dram.constants && arena_version_ == dram.constants_version) {
    return arena_.data();
  }
  packed_weights_.Clear();  // packed from the constants bound before
  arena_.assign(static_cast<size_t>(transfers_.const_arena_bytes), 0);
  uint8_t* arena = arena_.data();
  for (const ArrangedTile& tile : transfers_.arranged) {
    if (!tile.constant) continue;
    const uint8_t* constant =
        static_cast<const uint8_t*>(dram.constants[program_.placements[tile.tensor].index]);
    const int64_t item = DTypeBytes(program_.graph.nodes[tile.tensor].dtype);
    tile.arrange.Run(constant + tile.storage_offset * item, arena + tile.arena_offset);
  }
  arena_sources_ = dram.constants;
  arena_version_ = dram.constants_version;
  return arena;
}

void Emulator::Run(const DramBindings& dram) const {
  std::unique_ptr<Memories> memories = Acquire();
  const RunContext ctx{program_,         transfers_,       dram,   memories.get(),
                       ConstArena(dram), &packed_weights_, fused_, merged_};
  auto execute = [&](int64_t i) {
    if (!performed_[i]) return;
    if (program_.commands[i].is_dma()) {
      RunDma(ctx, i);
    } else {
      RunCompute(ctx, i);
    }
  };
  // On an exception the memories are dropped, not pooled: a failed run leaves them half-written,
  // which is harmless, but there is nothing to gain from keeping them either.
  for (const GroupSchedule& group : dataflow_.groups) {
    // The group's repeatedly loaded input boxes, arranged before any of its commands runs.
    const std::vector<int64_t>& arranged =
        transfers_.arranged_at_group[program_.commands[group.begin].group];
    kernels::ParallelFor(static_cast<int64_t>(arranged.size()), 4, [&](int64_t begin, int64_t end) {
      for (int64_t a = begin; a < end; ++a) {
        const ArrangedTile& tile = transfers_.arranged[arranged[a]];
        const int64_t item = DTypeBytes(program_.graph.nodes[tile.tensor].dtype);
        tile.arrange.Run(ctx.Dram(tile.tensor) + tile.storage_offset * item,
                         memories->arranged.at(tile.arena_offset));
      }
    });
    RunMergedMatmuls(ctx, matmuls_.at_group_start[program_.commands[group.begin].group]);
    RunGroup(dataflow_, group, execute);
  }
  Release(std::move(memories));
}

}  // namespace example_npu
