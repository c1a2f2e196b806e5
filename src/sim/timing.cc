#include "sim/timing.h"

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/extra/json.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <numeric>
#include <utility>
#include <vector>

#include "sim/command_cost.h"
#include "support/checked_math.h"

namespace example_npu {
namespace {

namespace json = tvm::ffi::json;
using command_cost::ComputeCost;
using command_cost::Cost;
using command_cost::kIssueCycles;
using command_cost::TierIndex;
using command_cost::TileBytes;
using command_cost::TimelineOf;
using tvm::ffi::String;

/*! \brief A resource's busy intervals [start, end), merged, for gap-filling placement. */
class Timeline {
 public:
  /*! \brief Earliest start >= ready with `duration` free cycles. */
  int64_t EarliestFree(int64_t ready, int64_t duration) const {
    int64_t start = ready;
    auto it = busy_.upper_bound(start);
    if (it != busy_.begin()) {
      auto prev = std::prev(it);
      if (prev->second > start) start = prev->second;
    }
    for (; it != busy_.end(); ++it) {
      if (it->first >= checked::Add(start, duration, "cycle count")) break;
      start = std::max(start, it->second);
    }
    return start;
  }

  void Reserve(int64_t start, int64_t duration) {
    if (duration <= 0) return;
    int64_t end = checked::Add(start, duration, "cycle count");
    auto next = busy_.lower_bound(start);
    if (next != busy_.begin()) {
      auto prev = std::prev(next);
      if (prev->second == start) {
        start = prev->first;
        busy_.erase(prev);
      }
    }
    next = busy_.find(end);
    if (next != busy_.end()) {
      end = next->second;
      busy_.erase(next);
    }
    busy_[start] = end;
  }

 private:
  std::map<int64_t, int64_t> busy_;
};

/*! \brief Where a DMA's remote bytes live; each has its own port. */
enum class Remote { kDram, kFlash, kSram, kL2 };
constexpr int kNumRemotes = 4;

/*! \brief Which feature maps the SRAM arena holds, decided once per program as a compiler places
 * a function's tensors before it runs: the inputs and outputs all or none, the intermediates one
 * by one (KeepIntermediates). */
struct ArenaPlacement {
  bool io = false;
  std::vector<bool> intermediate;  // [tensor]: an intermediate the arena holds
};

int64_t TensorBytes(const Program& program, int64_t tensor) {
  const Node& node = program.graph.nodes[tensor];
  return kernels::NumElements(node.shape) * DTypeBytes(node.dtype);
}

/*! \brief Arena bytes of an intermediate that only the group after its producer reads: a
 * stripe of NPUConfig.cascade_stripe_rows rows of each image (a 4-D NHWC map) when the two
 * groups run as a cascade, else the whole tensor. */
int64_t CascadeBytes(const Program& program, int64_t tensor) {
  const int64_t rows = program.config.cascade_stripe_rows;
  const Shape& shape = program.graph.nodes[tensor].shape;
  const int64_t whole = TensorBytes(program, tensor);
  if (rows == 0 || shape.size() != 4 || shape[1] <= rows) return whole;
  return whole / shape[1] * rows;
}

/*! \brief The intermediates an arena of `arena` bytes holds. Each lives from the first group
 * that moves it to the last; taken in the order they are first written, one stays in the arena
 * when, at every group of its life, it fits beside those already kept, and goes to DRAM
 * otherwise (leaving the room to later ones): a capacity check over time, as Vela's allocator
 * makes, rather than the addresses of the reused DRAM scratch area. */
std::vector<bool> KeepIntermediates(const Program& program, int64_t arena) {
  const size_t count = program.placements.size();
  std::vector<int64_t> first(count, -1), last(count, -1);
  for (const Command& command : program.commands) {
    if (!command.is_dma || command.dma.gather) continue;
    const int64_t tensor = command.dma.view.tensor;
    if (program.placements[tensor].kind != TensorPlacement::Kind::kScratch) continue;
    if (first[tensor] < 0) first[tensor] = command.group;
    last[tensor] = std::max(last[tensor], command.group);
  }
  std::vector<int64_t> order;
  for (size_t tensor = 0; tensor < count; ++tensor) {
    if (first[tensor] >= 0) order.push_back(static_cast<int64_t>(tensor));
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return first[a] < first[b]; });
  std::vector<int64_t> used(program.groups.size() + 1, 0);
  std::vector<bool> keep(count, false);
  for (int64_t tensor : order) {
    const int64_t bytes = last[tensor] == first[tensor] + 1 ? CascadeBytes(program, tensor)
                                                            : TensorBytes(program, tensor);
    const auto begin = used.begin() + first[tensor], end = used.begin() + last[tensor] + 1;
    if (checked::Add(*std::max_element(begin, end), bytes, "arena bytes") > arena) continue;
    for (auto it = begin; it != end; ++it) *it += bytes;
    keep[tensor] = true;
  }
  return keep;
}

ArenaPlacement PlaceFeatureMaps(const Program& program) {
  const NPUConfig& config = program.config;
  const int64_t arena = config.sram_arena_kb * 1024;
  int64_t io_bytes = 0;
  for (size_t id = 0; id < program.placements.size(); ++id) {
    const TensorPlacement::Kind kind = program.placements[id].kind;
    if (kind != TensorPlacement::Kind::kInput && kind != TensorPlacement::Kind::kOutput) continue;
    const Node& node = program.graph.nodes[id];
    io_bytes = checked::Add(io_bytes, kernels::NumElements(node.shape) * DTypeBytes(node.dtype),
                            "feature map bytes");
  }
  ArenaPlacement placement;
  switch (config.feature_map_memory_kind()) {
    case FeatureMapMemory::kDram:
      break;
    case FeatureMapMemory::kSram:
      // Everything when it fits together; else the intermediates take the arena.
      placement.io =
          checked::Add(io_bytes, program.dram_scratch_bytes, "feature map bytes") <= arena;
      placement.intermediate = KeepIntermediates(program, arena);
      break;
    case FeatureMapMemory::kSramIntermediates:
      placement.intermediate = KeepIntermediates(program, arena);
      break;
  }
  return placement;
}

Remote RemoteOf(const Program& program, const ArenaPlacement& arena, const DmaCommand& dma) {
  if (!dma.store && dma.remote_tier == Tier::kL2) return Remote::kL2;
  switch (program.placements[dma.view.tensor].kind) {
    case TensorPlacement::Kind::kConst:
      return program.config.weight_memory_kind() == WeightMemory::kFlash ? Remote::kFlash
                                                                         : Remote::kDram;
    case TensorPlacement::Kind::kScratch:
      return !arena.intermediate.empty() && arena.intermediate[dma.view.tensor] ? Remote::kSram
                                                                                : Remote::kDram;
    case TensorPlacement::Kind::kInput:
    case TensorPlacement::Kind::kOutput:
      return arena.io ? Remote::kSram : Remote::kDram;
    case TensorPlacement::Kind::kNone:
      break;
  }
  return Remote::kDram;
}

/*! \brief Off-chip memories (DRAM, flash) count as DRAM traffic, the SRAM arena as L2's. */
Tier TierOf(Remote remote) {
  return remote == Remote::kDram || remote == Remote::kFlash ? Tier::kDram : Tier::kL2;
}

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

/*! \brief Where a quantized layer's constant weight counts its output channels, whose records
 * (NPUConfig.weight_record_bytes) are read with it: its first or its last axis. */
enum class RecordAxis { kNone, kFirst, kLast };

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

/*! \brief Bytes of the per-channel records an off-chip weight read brings with it. */
int64_t RecordBytes(const Program& program, const std::vector<RecordAxis>& record_axes,
                    const DmaCommand& dma, Remote remote) {
  if (dma.store || (remote != Remote::kDram && remote != Remote::kFlash)) return 0;
  const RecordAxis axis = record_axes[dma.view.tensor];
  if (axis == RecordAxis::kNone || dma.box.extent.empty()) return 0;
  const int64_t channels =
      axis == RecordAxis::kFirst ? dma.box.extent.front() : dma.box.extent.back();
  return program.config.weight_record_bytes * channels;
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

/*!
 * \brief Per command, how many times a load crosses the bus (1 but for the rule below): on an NPU
 * that re-reads a narrow convolution input for every block of
 * NPUConfig.narrow_input_reread_channels output channels (Ethos-U reads the input feature map
 * once per output block; Vela's blocks for a 1- to 8-channel input are 16 channels deep), a load
 * of such an input is read once per block of the output channels the MAC array computes from it
 * before the tile is overwritten.
 */
std::vector<int64_t> LoadReads(const Program& program, const ArenaPlacement& arena) {
  std::vector<int64_t> reads(program.commands.size(), 1);
  if (program.config.narrow_input_reread_channels == 0) return reads;
  std::map<std::pair<Tier, int64_t>, int64_t> narrow_load;  // on-chip tile -> the load filling it
  std::vector<int64_t> channels(program.commands.size(), 0);
  for (const Command& command : program.commands) {
    if (command.is_dma) {
      const DmaCommand& dma = command.dma;
      if (dma.store) continue;
      const std::pair<Tier, int64_t> tile{dma.tile.tier, dma.tile.offset};
      if (LoadsNarrowFeatureMap(program, dma, RemoteOf(program, arena, dma))) {
        narrow_load[tile] = command.id;
      } else {
        narrow_load.erase(tile);
      }
      continue;
    }
    const ComputeCommand& compute = command.compute;
    if (IsArrayConvolution(program, compute) && !compute.output.shape.empty()) {
      const auto it = narrow_load.find({compute.inputs[0].tier, compute.inputs[0].offset});
      if (it != narrow_load.end()) channels[it->second] += compute.output.shape.back();
    }
    narrow_load.erase({compute.output.tier, compute.output.offset});
  }
  for (size_t id = 0; id < reads.size(); ++id) {
    if (channels[id] > 0) {
      const DmaCommand& dma = program.commands[id].dma;
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

/*!
 * \brief The most bytes of `tier` in use at once. Groups overlap in time, each holding
 * [base, base + bytes) of the tier from its first to its last command; at every group's start,
 * the union of the ranges of the groups then running is measured. The starts are swept in order,
 * so only the groups running at each one are visited (a few, since groups that share on-chip bytes
 * wait for each other), not every group.
 */
int64_t PeakOnChipBytes(const std::vector<GroupInfo>& infos,
                        const std::vector<GroupProfile>& groups, Tier tier) {
  std::vector<size_t> by_start(groups.size());
  std::iota(by_start.begin(), by_start.end(), 0);
  std::stable_sort(by_start.begin(), by_start.end(),
                   [&](size_t a, size_t b) { return groups[a].start < groups[b].start; });
  int64_t peak = 0;
  std::vector<size_t> running;  // started at or before the current time, with on-chip bytes
  size_t next = 0;
  for (size_t now : by_start) {
    const int64_t time = groups[now].start;
    for (; next < by_start.size() && groups[by_start[next]].start <= time; ++next) {
      const size_t g = by_start[next];
      if ((tier == Tier::kL1 ? infos[g].l1_bytes : infos[g].l2_bytes) > 0) running.push_back(g);
    }
    running.erase(std::remove_if(running.begin(), running.end(),
                                 [&](size_t g) { return groups[g].end <= time; }),
                  running.end());
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (size_t g : running) {
      const int64_t base = tier == Tier::kL1 ? infos[g].l1_base : infos[g].l2_base;
      const int64_t bytes = tier == Tier::kL1 ? infos[g].l1_bytes : infos[g].l2_bytes;
      ranges.emplace_back(base, base + bytes);
    }
    std::sort(ranges.begin(), ranges.end());
    int64_t used = 0, covered = 0;
    for (const auto& [begin, end] : ranges) {
      used += std::max<int64_t>(0, end - std::max(begin, covered));
      covered = std::max(covered, end);
    }
    peak = std::max(peak, used);
  }
  return peak;
}

std::string TrackName(const NPUConfig& config, const Command& command, int64_t channel) {
  if (command.is_dma) return "dma" + std::to_string(channel);
  return EngineName(TimelineOf(config, command.compute));
}

}  // namespace

Profile Simulate(const Program& program) {
  const NPUConfig& config = program.config;
  Profile profile;
  profile.symbol = program.graph.symbol;
  profile.power_mode = config.power_mode;
  profile.clock_mhz = config.clock_mhz();
  profile.dram_scratch_bytes = program.dram_scratch_bytes;
  // Feature-map channels first, then those of off-chip weight reads
  // (NPUConfig::weight_dma_channels).
  std::vector<Timeline> channels(config.dma_channels + config.weight_dma_channels);
  std::array<Timeline, kNumRemotes> ports;
  const ArenaPlacement arena = PlaceFeatureMaps(program);
  const std::vector<RecordAxis> record_axes = RecordAxes(program);
  const std::vector<int64_t> load_reads = LoadReads(program, arena);
  std::array<Timeline, kNumEngines> engines;
  std::vector<int64_t> end(program.commands.size(), 0);
  for (const GroupInfo& info : program.groups) {
    GroupProfile group;
    group.name = info.name;
    for (int64_t id : info.nodes) group.ops.push_back(OpKindName(program.graph.nodes[id].op));
    group.engine = info.engine;
    group.tiles = info.tiles;
    group.tile_shape = info.tile_shape;
    group.l1_bytes = info.l1_bytes;
    group.l2_bytes = info.l2_bytes;
    profile.groups.push_back(group);
  }
  int64_t finished = 0;
  // The end of the earlier groups' last command (the stream holds groups one after another).
  int64_t current_group = -1, earlier_groups_end = 0;
  std::vector<bool> started(program.groups.size(), false);
  std::vector<bool> set_up(program.groups.size(), false);  // op_setup_cycles paid
  for (const Command& command : program.commands) {
    if (command.group != current_group) {
      current_group = command.group;
      earlier_groups_end = finished;
    }
    // Only dependencies order commands, across groups too (the scheduler records them).
    int64_t ready = command.after_earlier_groups ? earlier_groups_end : 0;
    for (int64_t dep : command.deps) ready = std::max(ready, end[dep]);
    const Remote remote = command.is_dma ? RemoteOf(program, arena, command.dma) : Remote::kDram;
    Cost cost = command.is_dma ? DmaCost(program, command.dma, remote,
                                         RecordBytes(program, record_axes, command.dma, remote),
                                         load_reads[command.id])
                               : ComputeCost(program, command.compute);
    if (!command.is_dma && !set_up[command.group]) {
      cost.cycles = checked::Add(cost.cycles, config.op_setup_cycles, "cycle count");
      set_up[command.group] = true;
    }
    int64_t start = ready;
    int64_t channel = 0;
    if (command.is_dma) {
      Timeline& port = ports[static_cast<int>(remote)];
      // Earliest time both a channel and the port are free, over all channels.
      int64_t best = INT64_MAX;
      const bool weight_stream =
          config.weight_dma_channels > 0 && !command.dma.store &&
          (remote == Remote::kDram || remote == Remote::kFlash) &&
          program.placements[command.dma.view.tensor].kind == TensorPlacement::Kind::kConst;
      const size_t first_channel = weight_stream ? config.dma_channels : 0;
      const size_t end_channel =
          weight_stream ? channels.size() : static_cast<size_t>(config.dma_channels);
      for (size_t c = first_channel; c < end_channel; ++c) {
        // Alternate between the two timelines until both have the same free interval; each
        // step moves t forward past a busy interval, so this terminates.
        int64_t t = ready;
        while (true) {
          const int64_t on_channel = channels[c].EarliestFree(t, cost.cycles);
          const int64_t on_port = port.EarliestFree(on_channel, cost.cycles);
          if (on_port == on_channel) {
            t = on_port;
            break;
          }
          t = on_port;
        }
        if (t < best) best = t, channel = static_cast<int64_t>(c);
      }
      start = best;
      channels[channel].Reserve(start, cost.cycles);
      port.Reserve(start, cost.cycles);
      int64_t& busy = profile.busy_cycles[static_cast<int>(Engine::kDma)];
      busy = checked::Add(busy, cost.cycles, "DMA busy cycles");
    } else {
      const int timeline = static_cast<int>(TimelineOf(config, command.compute));
      Timeline& engine = engines[timeline];
      start = engine.EarliestFree(ready, cost.cycles);
      engine.Reserve(start, cost.cycles);
      int64_t& busy = profile.busy_cycles[timeline];
      busy = checked::Add(busy, cost.cycles, "engine busy cycles");
      profile.macs = checked::Add(profile.macs, command.compute.macs, "MAC count");
      profile.groups[command.group].macs += command.compute.macs;
    }
    end[command.id] =
        checked::Add(checked::Add(start, cost.cycles, "cycle count"), cost.latency, "cycle count");
    finished = std::max(finished, end[command.id]);
    GroupProfile& group = profile.groups[command.group];
    group.start = started[command.group] ? std::min(group.start, start) : start;
    started[command.group] = true;
    group.end = std::max(group.end, end[command.id]);
    for (int t = 0; t < kNumTiers; ++t) {
      profile.bytes[t] = checked::Add(profile.bytes[t], cost.bytes[t], "bytes moved");
      group.bytes[t] += cost.bytes[t];  // a part of the checked total
    }
    const double energy = cost.energy_pj * config.EnergyScale();
    group.energy_pj += energy;
    profile.energy_pj += energy;
    profile.events.push_back(TraceEvent{command.id, TrackName(config, command, channel), start,
                                        end[command.id] - start});
  }
  profile.total_cycles = finished;
  profile.l1_used_bytes = PeakOnChipBytes(program.groups, profile.groups, Tier::kL1);
  profile.l2_used_bytes = PeakOnChipBytes(program.groups, profile.groups, Tier::kL2);
  if (!std::isfinite(profile.energy_pj)) {
    TVM_FFI_THROW(ValueError) << "the energy of " << profile.symbol << " overflows a double";
  }
  return profile;
}

std::string Profile::ToJSON() const {
  auto ints = [](const auto& values) {
    json::Array array;
    for (auto v : values) array.push_back(static_cast<int64_t>(v));
    return array;
  };
  auto tiers = [](const std::array<int64_t, kNumTiers>& bytes) {
    json::Object object;
    for (int t = 0; t < kNumTiers; ++t)
      object.Set(String(TierName(static_cast<Tier>(t))), bytes[t]);
    return object;
  };
  json::Object root;
  root.Set(String("symbol"), String(symbol));
  root.Set(String("power_mode"), String(power_mode));
  root.Set(String("clock_mhz"), clock_mhz);
  root.Set(String("total_cycles"), total_cycles);
  root.Set(String("energy_pj"), energy_pj);
  root.Set(String("macs"), macs);
  root.Set(String("bytes"), tiers(bytes));
  json::Object busy;
  for (int e = 0; e < kNumEngines; ++e) {
    busy.Set(String(EngineName(static_cast<Engine>(e))), busy_cycles[e]);
  }
  root.Set(String("busy_cycles"), busy);
  json::Object memory_used;
  memory_used.Set(String("L1"), l1_used_bytes);
  memory_used.Set(String("L2"), l2_used_bytes);
  memory_used.Set(String("DRAM"), dram_scratch_bytes);
  root.Set(String("memory_used"), memory_used);
  json::Array group_list;
  for (const GroupProfile& g : groups) {
    json::Object object;
    json::Array ops;
    for (const std::string& op : g.ops) ops.push_back(String(op));
    object.Set(String("name"), String(g.name));
    object.Set(String("ops"), ops);
    object.Set(String("engine"), String(EngineName(g.engine)));
    object.Set(String("tiles"), g.tiles);
    object.Set(String("tile_shape"), ints(g.tile_shape));
    object.Set(String("macs"), g.macs);
    object.Set(String("start"), g.start);
    object.Set(String("end"), g.end);
    object.Set(String("bytes"), tiers(g.bytes));
    object.Set(String("energy_pj"), g.energy_pj);
    object.Set(String("l1_bytes"), g.l1_bytes);
    object.Set(String("l2_bytes"), g.l2_bytes);
    group_list.push_back(object);
  }
  root.Set(String("groups"), group_list);
  json::Array event_list;
  for (const TraceEvent& e : events) {
    json::Array event;
    event.push_back(e.command);
    event.push_back(String(e.track));
    event.push_back(e.start);
    event.push_back(e.duration);
    event_list.push_back(event);
  }
  root.Set(String("events"), event_list);
  return std::string(json::Stringify(root));
}

}  // namespace example_npu
