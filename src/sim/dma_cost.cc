#include "sim/dma_cost.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "support/checked_math.h"

namespace example_npu {
namespace command_cost {
namespace {

/*! \brief Bus bytes of a feature-map load on an NPU that fetches a feature map one position's
 * channels at a time (NPUConfig.fm_read_granule_bytes): when the innermost run is shorter than
 * the granule (a 1- or 3-channel image), every element is its own access and costs the memory's
 * burst over the granule (Vela charges a 3-channel int8 input 16 bytes per element from a
 * 128-byte-burst DRAM, 4 from a 32-byte-burst SRAM). 0 when the rule does not apply. */
int64_t NarrowRunBusBytes(const Program& program, const DmaCommand& dma, Remote remote) {
  const NPUConfig& config = program.config;
  if (config.fm_read_granule_bytes == 0 || dma.store || dma.gather) return 0;
  if (remote != Remote::kDram && remote != Remote::kSram) return 0;
  if (program.placements[dma.view.tensor].kind == TensorPlacement::Kind::kConst) return 0;
  if (dma.view.strides.empty() || dma.view.strides.back() != 1) return 0;
  const int64_t element_bytes = DTypeBytes(dma.tile.dtype);
  if (dma.box.extent.back() * element_bytes >= config.fm_read_granule_bytes) return 0;
  const int64_t burst = remote == Remote::kDram ? config.dram_burst_bytes : config.sram_burst_bytes;
  const int64_t elements = TileBytes(dma.tile) / element_bytes;
  return elements * std::max<int64_t>(element_bytes, burst / config.fm_read_granule_bytes);
}

/*! \brief Whether `dma` loads a feature map of at most NPUConfig.fm_read_granule_bytes per
 * position (the whole tensor's channels, not the tile's) from DRAM or the SRAM arena. */
bool LoadsNarrowFeatureMap(const Program& program, const DmaCommand& dma, Remote remote) {
  const NPUConfig& config = program.config;
  if (dma.store || dma.gather || (remote != Remote::kDram && remote != Remote::kSram)) return false;
  if (program.placements[dma.view.tensor].kind == TensorPlacement::Kind::kConst) return false;
  if (dma.view.shape.empty() || dma.view.strides.empty() || dma.view.strides.back() != 1) {
    return false;
  }
  return dma.view.shape.back() * DTypeBytes(dma.tile.dtype) <= config.fm_read_granule_bytes;
}

/*! \brief Whether `compute` is a (non-transposed) convolution or matmul on the MAC array. */
bool IsArrayConvolution(const Program& program, const ComputeCommand& compute) {
  if (compute.engine != Engine::kMatrix || compute.inputs.empty()) return false;
  const OpKind op = program.graph.nodes[compute.node].op;
  return op != OpKind::kConv2dTranspose && op != OpKind::kQnnConv2dTranspose;
}

}  // namespace

std::vector<RecordAxis> RecordAxes(const Program& program) {
  std::vector<RecordAxis> axes(program.graph.nodes.size(), RecordAxis::kNone);
  if (program.config.weight_record_bytes == 0) return axes;
  for (const Node& node : program.graph.nodes) {
    const auto* qnn = std::get_if<QnnAttrs>(&node.attrs);
    if (node.kind != NodeKind::kOp || qnn == nullptr || node.inputs.size() < 2) continue;
    const int64_t weight = node.inputs[1];
    if (program.placements[weight].kind != TensorPlacement::Kind::kConst) continue;
    const bool oihw =
        node.op == OpKind::kQnnConv2d && qnn->conv.kernel_layout == kernels::KernelLayout::kOIHW;
    axes[weight] = oihw ? RecordAxis::kFirst : RecordAxis::kLast;
  }
  return axes;
}

int64_t RecordBytes(const Program& program, const std::vector<RecordAxis>& record_axes,
                    const DmaCommand& dma, Remote remote) {
  if (dma.store || (remote != Remote::kDram && remote != Remote::kFlash)) return 0;
  const RecordAxis axis = record_axes[dma.view.tensor];
  if (axis == RecordAxis::kNone || dma.box.extent.empty()) return 0;
  const int64_t channels =
      axis == RecordAxis::kFirst ? dma.box.extent.front() : dma.box.extent.back();
  return program.config.weight_record_bytes * channels;
}

std::vector<int64_t> LoadReads(const Program& program, const ArenaPlacement& arena) {
  std::vector<int64_t> reads(program.commands.size(), 1);
  if (program.config.narrow_input_reread_channels == 0) return reads;
  std::map<std::pair<Tier, int64_t>, int64_t> narrow_load;  // on-chip tile -> the load filling it
  std::vector<int64_t> channels(program.commands.size(), 0);
  for (const Command& command : program.commands) {
    if (command.is_dma()) {
      const DmaCommand& dma = command.dma();
      if (dma.store) continue;
      const std::pair<Tier, int64_t> tile{dma.tile.tier, dma.tile.offset};
      if (LoadsNarrowFeatureMap(program, dma, RemoteOf(program, arena, dma))) {
        narrow_load[tile] = command.id;
      } else {
        narrow_load.erase(tile);
      }
      continue;
    }
    const ComputeCommand& compute = command.compute();
    if (IsArrayConvolution(program, compute) && !compute.output.shape.empty()) {
      const auto it = narrow_load.find({compute.inputs[0].tier, compute.inputs[0].offset});
      if (it != narrow_load.end()) channels[it->second] += compute.output.shape.back();
    }
    narrow_load.erase({compute.output.tier, compute.output.offset});
  }
  for (size_t id = 0; id < reads.size(); ++id) {
    if (channels[id] > 0) {
      const DmaCommand& dma = program.commands[id].dma();
      reads[id] = program.config.NarrowInputReads(
          dma.view.shape.back() * DTypeBytes(dma.tile.dtype), channels[id]);
    }
  }
  return reads;
}

Cost DmaCost(const Program& program, const DmaCommand& dma, Remote remote, int64_t record_bytes,
             int64_t reads) {
  const NPUConfig& config = program.config;
  Cost cost;
  double remote_bandwidth = 0;
  switch (remote) {
    case Remote::kDram:
      remote_bandwidth = config.BandwidthBytesPerCycle(Tier::kDram);
      cost.latency = config.LatencyCycles(Tier::kDram);
      break;
    case Remote::kFlash:
      remote_bandwidth = config.FlashBytesPerCycle();
      cost.latency = config.FlashLatencyCycles();
      break;
    case Remote::kSram:
      remote_bandwidth = config.sram_bandwidth_bytes_per_cycle;
      cost.latency = config.sram_latency_cycles;
      break;
    case Remote::kL2:
      remote_bandwidth = config.BandwidthBytesPerCycle(Tier::kL2);
      cost.latency = config.LatencyCycles(Tier::kL2);
      break;
  }
  const double bandwidth = std::min(remote_bandwidth, config.BandwidthBytesPerCycle(dma.tile.tier));
  // Encoded weights are stored in the order tiles read them: one contiguous run, no burst waste.
  const bool encoded_weights =
      program.placements[dma.view.tensor].kind == TensorPlacement::Kind::kConst &&
      config.weight_layout_kind() == WeightLayout::kEncoded;
  const int64_t narrow_run_bytes = NarrowRunBusBytes(program, dma, remote);
  const int64_t bus_bytes = record_bytes + checked::Mul(reads,
                                                        encoded_weights    ? TileBytes(dma.tile)
                                                        : narrow_run_bytes ? narrow_run_bytes
                                                                           : dma.bus_bytes,
                                                        "DMA bytes");
  cost.cycles = kIssueCycles + checked::ToInt64(std::ceil(bus_bytes / bandwidth), "DMA cycles");
  const Tier remote_tier = TierOf(remote);
  cost.bytes[TierIndex(remote_tier)] += bus_bytes;
  cost.bytes[TierIndex(dma.tile.tier)] += TileBytes(dma.tile);
  cost.energy_pj =
      bus_bytes * (remote_tier == Tier::kDram ? config.energy_dram_pj_per_byte
                                              : config.energy_l2_pj_per_byte) +
      TileBytes(dma.tile) * (dma.tile.tier == Tier::kL2 ? config.energy_l2_pj_per_byte
                                                        : config.energy_l1_pj_per_byte);
  return cost;
}

}  // namespace command_cost
}  // namespace example_npu
