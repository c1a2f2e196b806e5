#include "compiler/command_stream.h"

#include <sstream>

namespace example_npu {
namespace {

template <typename T>
std::string Join(const std::vector<T>& values) {
  std::ostringstream os;
  for (size_t i = 0; i < values.size(); ++i) os << (i ? "," : "") << values[i];
  return os.str();
}

const char* PlacementName(TensorPlacement::Kind kind) {
  switch (kind) {
    case TensorPlacement::Kind::kInput:
      return "input";
    case TensorPlacement::Kind::kOutput:
      return "output";
    case TensorPlacement::Kind::kConst:
      return "const";
    case TensorPlacement::Kind::kScratch:
      return "scratch@";
    case TensorPlacement::Kind::kNone:
      break;
  }
  return "on-chip";
}

}  // namespace

const char* EngineName(Engine engine) {
  switch (engine) {
    case Engine::kDma:
      return "dma";
    case Engine::kMatrix:
      return "matrix";
    case Engine::kVector:
      return "vector";
    case Engine::kActivation:
      return "activation";
    case Engine::kPooling:
      return "pooling";
  }
  return "?";
}

std::string Program::ToText() const {
  std::ostringstream os;
  os << "# NPU program " << graph.symbol << " (" << config.power_mode << ", L1 "
     << config.l1_sram_kb << " KB, L2 " << config.l2_cmx_kb << " KB)\n";
  os << "# DRAM scratch " << dram_scratch_bytes << " bytes\n";
  for (size_t id = 0; id < placements.size(); ++id) {
    const TensorPlacement& p = placements[id];
    if (p.kind == TensorPlacement::Kind::kNone) continue;
    os << "tensor " << graph.nodes[id].name << " " << PlacementName(p.kind) << p.index << " order("
       << Join(p.storage_order) << ")\n";
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    const GroupInfo& info = groups[g];
    os << "group " << g << " " << info.name << " engine=" << EngineName(info.engine)
       << " tiles=" << info.tiles << " tile=(" << Join(info.tile_shape) << ") L1=" << info.l1_bytes
       << "@" << info.l1_base << " L2=" << info.l2_bytes << "@" << info.l2_base << " ops=";
    for (size_t i = 0; i < info.nodes.size(); ++i) {
      os << (i ? "+" : "") << OpKindName(graph.nodes[info.nodes[i]].op);
    }
    os << "\n";
  }
  for (const Command& c : commands) {
    os << c.id << " g" << c.group << " ";
    if (c.is_dma()) {
      const DmaCommand& d = c.dma();
      os << "dma " << (d.store ? "store " : "load ") << graph.nodes[d.view.tensor].name << "["
         << Join(d.box.begin) << "+" << Join(d.box.extent) << "] "
         << (d.store ? TierName(d.tile.tier) : TierName(d.remote_tier)) << "->"
         << (d.store ? "DRAM" : TierName(d.tile.tier)) << "@" << d.tile.offset
         << " bytes=" << d.bus_bytes;
    } else {
      const ComputeCommand& k = c.compute();
      os << EngineName(k.engine) << " " << OpKindName(graph.nodes[k.node].op) << " out@"
         << k.output.offset << "(" << Join(k.output.shape) << ")" << (k.accumulate ? " acc" : "")
         << " macs=" << k.macs;
    }
    if (!c.deps.empty()) os << " deps=" << Join(c.deps);
    if (c.after_earlier_groups) os << " after=earlier-groups";
    os << "\n";
  }
  return os.str();
}

}  // namespace example_npu
