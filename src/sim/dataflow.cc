#include "sim/dataflow.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>
#include <utility>

#include "kernels/parallel.h"

namespace example_npu {
namespace {

/*! \brief The DRAM storage a DMA reads or writes: placement kind and index. */
using DramKey = std::pair<int, int64_t>;

struct DramAccess {
  int64_t command;
  const DmaCommand* dma;
};

/*!
 * \brief Whether two boxes of one tensor may touch the same bytes. Exact for boxes seen through
 * the same strides; any other pair is assumed to overlap.
 */
bool MayOverlap(const DmaCommand& a, const DmaCommand& b) {
  if (a.view.strides != b.view.strides) return true;
  for (size_t d = 0; d < a.box.begin.size(); ++d) {
    const int64_t a_end = a.box.begin[d] + a.box.extent[d];
    const int64_t b_end = b.box.begin[d] + b.box.extent[d];
    if (a_end <= b.box.begin[d] || b_end <= a.box.begin[d]) return false;
  }
  return true;
}

void AddConflicts(const std::vector<DramAccess>& earlier, const DmaCommand& dma,
                  std::vector<int64_t>* deps) {
  for (const DramAccess& access : earlier) {
    if (MayOverlap(*access.dma, dma)) deps->push_back(access.command);
  }
}

int64_t TileBytes(const TileRef& tile) {
  return kernels::NumElements(tile.shape) * DTypeBytes(tile.dtype);
}

/*!
 * \brief The compiler orders accesses per L1 slot (its offset); commands on different slots may
 * run at the same time, so slots must not share bytes. Checked, not assumed: a planner bug would
 * otherwise be a data race.
 */
void CheckSlotsDisjoint(const Program& program, const GroupSchedule& group) {
  std::map<int64_t, int64_t> slot_bytes;  // L1 offset -> largest tile stored there
  auto note = [&](const TileRef& tile) {
    if (tile.tier != Tier::kL1) return;
    int64_t& bytes = slot_bytes[tile.offset];
    bytes = std::max(bytes, TileBytes(tile));
  };
  for (int64_t i = group.begin; i < group.end; ++i) {
    const Command& command = program.commands[i];
    if (command.is_dma) {
      note(command.dma.tile);
    } else {
      for (const TileRef& input : command.compute.inputs) note(input);
      note(command.compute.output);
    }
  }
  int64_t end = 0;
  for (const auto& [offset, bytes] : slot_bytes) {
    TVM_FFI_ICHECK_LE(end, offset) << "group " << program.commands[group.begin].group
                                   << ": L1 tiles overlap below offset " << end;
    end = offset + bytes;
  }
}

/*! \brief Work of a command in elements: moved (DMA) or multiply-adds plus results (compute). */
double Work(const Command& command) {
  if (command.is_dma) return static_cast<double>(kernels::NumElements(command.dma.box.extent));
  return static_cast<double>(command.compute.macs + command.compute.elements);
}

void AnalyzeGroup(const Program& program, GroupSchedule* group, double min_speedup,
                  Dataflow* dataflow) {
  CheckSlotsDisjoint(program, *group);
  std::map<DramKey, std::vector<DramAccess>> loads, stores;
  double total = 0.0, critical = 0.0;
  int64_t computes = 0;
  std::vector<double> finish(group->end - group->begin, 0.0);
  for (int64_t i = group->begin; i < group->end; ++i) {
    const Command& command = program.commands[i];
    std::vector<int64_t>& deps = dataflow->deps[i];
    for (int64_t dep : command.deps) {
      if (dep >= group->begin) deps.push_back(dep);  // earlier groups are behind the barrier
    }
    if (command.is_dma && command.dma.remote_tier == Tier::kDram) {
      const TensorPlacement& placement = program.placements[command.dma.view.tensor];
      const DramKey key{static_cast<int>(placement.kind), placement.index};
      AddConflicts(stores[key], command.dma, &deps);
      if (command.dma.store) {
        AddConflicts(loads[key], command.dma, &deps);
        stores[key].push_back(DramAccess{i, &command.dma});
      } else {
        loads[key].push_back(DramAccess{i, &command.dma});
      }
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    double start = 0.0;
    for (int64_t dep : deps) {
      TVM_FFI_ICHECK_LT(dep, i) << "command " << i << " depends on a later command";
      start = std::max(start, finish[dep - group->begin]);
    }
    const double work = Work(command);
    finish[i - group->begin] = start + work;
    critical = std::max(critical, start + work);
    total += work;
    computes += command.is_dma ? 0 : 1;
    // A load after a compute or a store begins the next tile.
    const bool load = command.is_dma && !command.dma.store;
    const bool previous_load =
        i > group->begin && program.commands[i - 1].is_dma && !program.commands[i - 1].dma.store;
    if (i == group->begin || (load && !previous_load)) group->tile_starts.push_back(i);
  }
  group->concurrent = computes >= 2 && total >= min_speedup * critical;
}

}  // namespace

Dataflow AnalyzeDataflow(const Program& program, double min_speedup) {
  Dataflow dataflow;
  const int64_t count = static_cast<int64_t>(program.commands.size());
  dataflow.deps.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t group = program.commands[i].group;
    if (dataflow.groups.empty() || program.commands[dataflow.groups.back().begin].group != group) {
      dataflow.groups.push_back(GroupSchedule{i, i, false, {}});
    }
    dataflow.groups.back().end = i + 1;
  }
  for (GroupSchedule& group : dataflow.groups) {
    AnalyzeGroup(program, &group, min_speedup, &dataflow);
  }
  return dataflow;
}

void RunGroup(const Dataflow& dataflow, const GroupSchedule& group,
              const std::function<void(int64_t)>& execute) {
  if (!group.concurrent) {
    for (int64_t i = group.begin; i < group.end; ++i) execute(i);
    return;
  }
  const int64_t size = group.end - group.begin;
  std::vector<std::atomic<bool>> done(size);  // value-initialised: false
  std::atomic<size_t> next_tile{0};
  std::atomic<bool> failed{false};
  // Each thread claims the next tile in stream order and waits for each command's deps. The
  // earliest unfinished command always has its deps done, so the threads cannot deadlock.
  auto worker = [&](int64_t, int64_t) {
    for (size_t t = next_tile.fetch_add(1); t < group.tile_starts.size();
         t = next_tile.fetch_add(1)) {
      const int64_t tile_end =
          t + 1 < group.tile_starts.size() ? group.tile_starts[t + 1] : group.end;
      for (int64_t i = group.tile_starts[t]; i < tile_end; ++i) {
        for (int64_t dep : dataflow.deps[i]) {
          for (int spins = 0; !done[dep - group.begin].load(std::memory_order_acquire); ++spins) {
            if (failed.load(std::memory_order_relaxed)) return;
            if (spins > 64) std::this_thread::yield();
          }
        }
        try {
          execute(i);
        } catch (...) {
          failed.store(true);
          throw;
        }
        done[i - group.begin].store(true, std::memory_order_release);
      }
    }
  };
  kernels::ParallelFor(kernels::MaxThreads(), 1, worker, /*chunks_per_thread=*/1);
}

}  // namespace example_npu
