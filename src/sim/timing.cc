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
#include "sim/dma_cost.h"
#include "sim/memory_placement.h"
#include "support/checked_math.h"

namespace example_npu {
namespace {

namespace json = tvm::ffi::json;
using command_cost::ComputeCost;
using command_cost::Cost;
using command_cost::DmaCost;
using command_cost::LoadReads;
using command_cost::RecordAxes;
using command_cost::RecordAxis;
using command_cost::RecordBytes;
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
  if (command.is_dma()) return "dma" + std::to_string(channel);
  return EngineName(TimelineOf(config, command.compute()));
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
    const Remote remote =
        command.is_dma() ? RemoteOf(program, arena, command.dma()) : Remote::kDram;
    Cost cost = command.is_dma() ? DmaCost(program, command.dma(), remote,
                                           RecordBytes(program, record_axes, command.dma(), remote),
                                           load_reads[command.id])
                                 : ComputeCost(program, command.compute());
    if (!command.is_dma() && !set_up[command.group]) {
      cost.cycles = checked::Add(cost.cycles, config.op_setup_cycles, "cycle count");
      set_up[command.group] = true;
    }
    int64_t start = ready;
    int64_t channel = 0;
    if (command.is_dma()) {
      Timeline& port = ports[static_cast<int>(remote)];
      // Earliest time both a channel and the port are free, over all channels.
      int64_t best = INT64_MAX;
      const bool weight_stream =
          config.weight_dma_channels > 0 && !command.dma().store &&
          (remote == Remote::kDram || remote == Remote::kFlash) &&
          program.placements[command.dma().view.tensor].kind == TensorPlacement::Kind::kConst;
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
      const int timeline = static_cast<int>(TimelineOf(config, command.compute()));
      Timeline& engine = engines[timeline];
      start = engine.EarliestFree(ready, cost.cycles);
      engine.Reserve(start, cost.cycles);
      int64_t& busy = profile.busy_cycles[timeline];
      busy = checked::Add(busy, cost.cycles, "engine busy cycles");
      profile.macs = checked::Add(profile.macs, command.compute().macs, "MAC count");
      profile.groups[command.group].macs += command.compute().macs;
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
