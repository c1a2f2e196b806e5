#include "sim/dataflow.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "kernels/parallel.h"

namespace example_npu {
namespace {

int64_t TileBytes(const TileRef& tile) {
  return kernels::NumElements(tile.shape) * DTypeBytes(tile.dtype);
}

/*! \brief An on-chip buffer: tier and byte offset (a slot of L1, a staging area of L2). */
using BufferKey = std::pair<int, int64_t>;

BufferKey KeyOf(const TileRef& tile) { return BufferKey{static_cast<int>(tile.tier), tile.offset}; }

/*!
 * \brief Hazards are tracked per buffer (tier, offset), which is exact only if buffers at
 * different offsets never share bytes: checked, not assumed, as a planner bug would otherwise be
 * a data race between concurrent commands.
 */
void CheckBuffersDisjoint(const Program& program, const GroupSchedule& group) {
  std::map<BufferKey, int64_t> buffer_bytes;  // -> the largest tile stored there
  auto note = [&](const TileRef& tile) {
    int64_t& bytes = buffer_bytes[KeyOf(tile)];
    bytes = std::max(bytes, TileBytes(tile));
  };
  for (int64_t i = group.begin; i < group.end; ++i) {
    const Command& command = program.commands[i];
    if (command.is_dma()) {
      note(command.dma().tile);
    } else {
      for (const TileRef& input : command.compute().inputs) note(input);
      note(command.compute().output);
    }
  }
  BufferKey previous{-1, 0};
  int64_t end = 0;
  for (const auto& [key, bytes] : buffer_bytes) {
    if (key.first != previous.first) end = 0;  // a new tier
    TVM_FFI_ICHECK_LE(end, key.second) << "group " << program.commands[group.begin].group
                                       << ": on-chip tiles overlap below offset " << end;
    previous = key;
    end = key.second + bytes;
  }
}

/*!
 * \brief Read-after-write, write-after-read and write-after-write dependencies of one group,
 * derived from what each command actually touches once forwarding is decided: on-chip buffers
 * by (tier, offset), DRAM tensors by box. Forwarded transfers touch nothing and wait for nothing.
 */
class HazardTracker {
 public:
  HazardTracker(const Program& program, const TransferPlan& plan, Dataflow* dataflow)
      : program_(program), plan_(plan), dataflow_(dataflow) {}

  /*!
   * \brief Adds command i's deps; returns the earliest command whose result i reads (a
   * read-after-write dependency) or overwrites outside L1, or i if none: what would make the
   * order of two tiles matter.
   */
  int64_t Add(int64_t i) {
    order_conflict_ = i;
    if (plan_.skipped[i]) return i;
    deps_ = &dataflow_->deps[i];
    const Command& command = program_.commands[i];
    if (command.is_dma()) {
      const DmaCommand& dma = command.dma();
      if (dma.store) {
        Read(i, KeyOf(dma.tile));
        WriteDram(i, dma);
      } else {
        if (dma.gather) Read(i, KeyOf(dma.gather_ids));
        if (dma.remote_tier == Tier::kL2) {
          Read(i, BufferKey{static_cast<int>(Tier::kL2), dma.remote_offset});
        } else {
          ReadDram(i, dma);
        }
        Write(i, KeyOf(dma.tile));
      }
    } else {
      // Forwarded operands read or write DRAM tensors that no other command of the group
      // writes (or touches, for a result): the transfer plan guarantees it.
      const ComputeCommand& compute = command.compute();
      for (size_t k = 0; k < compute.inputs.size(); ++k) {
        if (!plan_.input_from[i][k].valid()) Read(i, KeyOf(compute.inputs[k]));
      }
      if (!plan_.output_to[i].valid()) {
        if (compute.accumulate) Read(i, KeyOf(compute.output));
        Write(i, KeyOf(compute.output));
      }
    }
    std::sort(deps_->begin(), deps_->end());
    deps_->erase(std::unique(deps_->begin(), deps_->end()), deps_->end());
    deps_->erase(std::remove(deps_->begin(), deps_->end(), i), deps_->end());
    return order_conflict_;
  }

 private:
  struct Buffer {
    int64_t writer = -1;
    std::vector<int64_t> readers;  // since the last write
  };

  void Read(int64_t i, const BufferKey& key) {
    Buffer& buffer = buffers_[key];
    if (buffer.writer >= 0) ReadAfterWrite(buffer.writer);
    buffer.readers.push_back(i);
  }

  void ReadAfterWrite(int64_t writer) {
    deps_->push_back(writer);
    order_conflict_ = std::min(order_conflict_, writer);
  }

  void Overwrites(int64_t writer) { order_conflict_ = std::min(order_conflict_, writer); }

  void Write(int64_t i, const BufferKey& key) {
    Buffer& buffer = buffers_[key];
    if (buffer.writer >= 0) {
      deps_->push_back(buffer.writer);
      // An L1 slot is a tile's scratch; which tile writes another buffer last can matter.
      if (key.first != static_cast<int>(Tier::kL1)) Overwrites(buffer.writer);
    }
    deps_->insert(deps_->end(), buffer.readers.begin(), buffer.readers.end());
    buffer.writer = i;
    buffer.readers.clear();
  }

  void Conflicts(const DramBoxIndex& earlier, const DmaCommand& dma) {
    earlier.ForEachOverlap(dma, [this](int64_t command) { deps_->push_back(command); });
  }

  void ReadDram(int64_t i, const DmaCommand& dma) {
    const DramKey key = DramKeyOf(program_, dma);
    stores_[key].ForEachOverlap(dma, [this](int64_t command) { ReadAfterWrite(command); });
    loads_[key].Add(i, &dma);
  }

  void WriteDram(int64_t i, const DmaCommand& dma) {
    const DramKey key = DramKeyOf(program_, dma);
    stores_[key].ForEachOverlap(dma, [this](int64_t command) {
      deps_->push_back(command);
      Overwrites(command);
    });
    Conflicts(loads_[key], dma);
    stores_[key].Add(i, &dma);
  }

  const Program& program_;
  const TransferPlan& plan_;
  Dataflow* dataflow_;
  std::vector<int64_t>* deps_ = nullptr;
  int64_t order_conflict_ = 0;
  std::map<BufferKey, Buffer> buffers_;
  std::map<DramKey, DramBoxIndex> loads_, stores_;
};

/*! \brief Work of a command in elements: moved (DMA) or multiply-adds plus results (compute). */
double Work(const Command& command) {
  if (command.is_dma()) {
    const DmaCommand& dma = command.dma();  // a gather moves its tile, not its (whole-table) box
    return static_cast<double>(kernels::NumElements(dma.gather ? dma.tile.shape : dma.box.extent));
  }
  return static_cast<double>(command.compute().macs + command.compute().elements);
}

/*!
 * \brief A claim order for the tiles of a group in which no tile reads another's results: tiles
 * that read the same operand in place from DRAM (a matmul's weight column tiles, say) back to
 * back, so each of its tiles comes from memory once and then from the core's cache. Stream order
 * (output rows outer) streams a weight larger than the cache once per row of output tiles:
 * ViT-B/16's 768 x 3072 weights, 9 MiB, 13 times per matmul. The operand is the compute input
 * whose distinct tiles total the most bytes, if more than a core's cache holds; the sort is
 * stable. Empty when stream order is as good.
 */
std::vector<int64_t> TileOrder(const Program& program, const TransferPlan& plan,
                               const GroupSchedule& group) {
  constexpr int64_t kCacheBytes = int64_t{1} << 20;
  const size_t tiles = group.tile_starts.size();
  if (tiles < 2) return {};
  // The first compute command of each tile: its forwarded inputs identify the tile's operands.
  std::vector<int64_t> first_compute(tiles, -1);
  for (size_t t = 0; t < tiles; ++t) {
    const int64_t end = t + 1 < tiles ? group.tile_starts[t + 1] : group.end;
    for (int64_t i = group.tile_starts[t]; i < end && first_compute[t] < 0; ++i) {
      if (!program.commands[i].is_dma()) first_compute[t] = i;
    }
    if (first_compute[t] < 0) return {};
  }
  using Key = std::array<int64_t, 3>;  // arranged tile, tensor, element offset
  auto key_of = [&](size_t t, size_t k) -> std::optional<Key> {
    const std::vector<DramRef>& from = plan.input_from[first_compute[t]];
    if (k >= from.size() || !from[k].valid() || from[k].view >= 0) return std::nullopt;
    return Key{from[k].arranged, from[k].tensor, from[k].offset};
  };
  const size_t inputs = program.commands[first_compute[0]].compute().inputs.size();
  int64_t best_bytes = kCacheBytes;
  std::optional<size_t> best;
  for (size_t k = 0; k < inputs; ++k) {
    std::set<Key> seen;
    int64_t bytes = 0;
    for (size_t t = 0; t < tiles && bytes >= 0; ++t) {
      const std::optional<Key> key = key_of(t, k);
      if (!key) {
        bytes = -1;  // not read in place by every tile
      } else if (seen.insert(*key).second) {
        bytes += TileBytes(program.commands[first_compute[t]].compute().inputs[k]);
      }
    }
    if (bytes > best_bytes) best_bytes = bytes, best = k;
  }
  if (!best) return {};
  std::vector<int64_t> order(tiles);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return *key_of(a, *best) < *key_of(b, *best); });
  if (std::is_sorted(order.begin(), order.end())) return {};
  return order;
}

void AnalyzeGroup(const Program& program, const TransferPlan& plan, GroupSchedule* group,
                  double min_speedup, Dataflow* dataflow) {
  CheckBuffersDisjoint(program, *group);
  HazardTracker hazards(program, plan, dataflow);
  double total = 0.0, critical = 0.0;
  int64_t computes = 0;
  bool tiles_independent = true;  // no tile reads (or overwrites outside L1) another's results
  std::vector<double> finish(group->end - group->begin, 0.0);
  for (int64_t i = group->begin; i < group->end; ++i) {
    const Command& command = program.commands[i];
    // A load after a store begins the next tile. (Not a load after a compute: a fused chain
    // loads its side operands, a bias say, after the matrix step, and a thread that took those
    // loads as a tile of their own would wait for the other thread's matrix step each time.)
    const bool load = command.is_dma() && !command.dma().store;
    const bool after_store =
        i > group->begin && program.commands[i - 1].is_dma() && program.commands[i - 1].dma().store;
    if (i == group->begin || (load && after_store)) group->tile_starts.push_back(i);
    tiles_independent &= hazards.Add(i) >= group->tile_starts.back();
    double start = 0.0;
    for (int64_t dep : dataflow->deps[i]) start = std::max(start, finish[dep - group->begin]);
    const double work = plan.skipped[i] ? 0.0 : Work(command);
    finish[i - group->begin] = start + work;
    critical = std::max(critical, start + work);
    total += work;
    computes += command.is_dma() ? 0 : 1;
  }
  group->concurrent = computes >= 2 && total >= min_speedup * critical;
  if (!group->concurrent || !tiles_independent) return;
  // Independent tiles may run in any order: each computes the same bits wherever it runs. The
  // deps are derived again in the new order (the L1 slots tiles share: write-after-read).
  std::vector<int64_t> order = TileOrder(program, plan, *group);
  if (order.empty()) return;
  for (int64_t i = group->begin; i < group->end; ++i) dataflow->deps[i].clear();
  HazardTracker reordered(program, plan, dataflow);
  const size_t tiles = group->tile_starts.size();
  for (int64_t t : order) {
    const int64_t end =
        t + 1 < static_cast<int64_t>(tiles) ? group->tile_starts[t + 1] : group->end;
    for (int64_t i = group->tile_starts[t]; i < end; ++i) reordered.Add(i);
  }
  group->tile_order = std::move(order);
}

}  // namespace

Dataflow AnalyzeDataflow(const Program& program, const TransferPlan& plan, double min_speedup) {
  Dataflow dataflow;
  const int64_t count = static_cast<int64_t>(program.commands.size());
  dataflow.deps.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t group = program.commands[i].group;
    if (dataflow.groups.empty() || program.commands[dataflow.groups.back().begin].group != group) {
      dataflow.groups.push_back(GroupSchedule{i, i, false, {}, {}, {}});
    }
    dataflow.groups.back().end = i + 1;
  }
  for (GroupSchedule& group : dataflow.groups) {
    AnalyzeGroup(program, plan, &group, min_speedup, &dataflow);
  }
  return dataflow;
}

void ListPerformed(const std::vector<bool>& performed, Dataflow* dataflow) {
  for (GroupSchedule& group : dataflow->groups) {
    group.in_order.clear();
    auto add = [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        if (performed[i]) group.in_order.push_back(i);
      }
    };
    if (!group.concurrent) {
      add(group.begin, group.end);
      continue;
    }
    // One thread claiming every tile in turn: each command's deps come earlier in that order.
    for (size_t claim = 0; claim < group.tile_starts.size(); ++claim) {
      const size_t t = group.tile_order.empty() ? claim : group.tile_order[claim];
      add(group.tile_starts[t],
          t + 1 < group.tile_starts.size() ? group.tile_starts[t + 1] : group.end);
    }
  }
}

void RunGroup(const Dataflow& dataflow, const GroupSchedule& group,
              const std::function<void(int64_t)>& execute) {
  if (!group.concurrent || kernels::MaxThreads() == 1 || group.tile_starts.size() <= 1) {
    // One thread: nothing needs to wait or be marked done.
    for (int64_t i : group.in_order) execute(i);
    return;
  }
  const int64_t size = group.end - group.begin;
  std::vector<std::atomic<bool>> done(size);  // value-initialised: false
  std::atomic<size_t> next_tile{0};
  std::atomic<bool> failed{false};
  // Each thread claims the next tile in stream order and waits for each command's deps. The
  // earliest unfinished command always has its deps done, so the threads cannot deadlock.
  auto worker = [&](int64_t, int64_t) {
    for (size_t claim = next_tile.fetch_add(1); claim < group.tile_starts.size();
         claim = next_tile.fetch_add(1)) {
      const size_t t = group.tile_order.empty() ? claim : group.tile_order[claim];
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
