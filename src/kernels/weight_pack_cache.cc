#include "kernels/weight_pack_cache.h"

#include <utility>

namespace example_npu {
namespace kernels {
namespace {

std::atomic<uint64_t> next_generation{1};

/*! \brief One of a thread's recent lookups: the map entry found (its key and packing). */
struct RecentLookup {
  uint64_t generation = 0;  // 0: empty
  const void* entry = nullptr;
};

// Every tile of a layer looks its packed weights up at every run. Under the map's mutex that was
// an eighth of a batch-1 fully connected network's run (the lock and unlock alone half of it);
// a thread first asks its own table of recent hits, without a lock.
constexpr int kRecentLookupBits = 9;

/*! \brief A lookup's slot: the hash's high bits (its low bits are those of the keys' low bits,
 * alike for every tile of a layer: aligned addresses, the same packing). */
size_t RecentSlot(size_t hash) {
  return static_cast<size_t>((static_cast<uint64_t>(hash) * 0x9e3779b97f4a7c15ULL) >>
                             (64 - kRecentLookupBits));
}

/*! \brief a == b, compared inline (std::array's == calls memcmp: a call per lookup). */
bool SameKey(const WeightPackCache::Key& a, const WeightPackCache::Key& b) {
  bool same = true;
  for (size_t i = 0; i < a.size(); ++i) same &= a[i] == b[i];
  return same;
}

}  // namespace

WeightPackCache::WeightPackCache() : generation_(next_generation.fetch_add(1)) {}

size_t WeightPackCache::KeyHash::operator()(const Key& key) const {
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a over the eight words
  for (int64_t word : key) hash = (hash ^ static_cast<uint64_t>(word)) * 0x100000001b3ULL;
  return static_cast<size_t>(hash);
}

const PackedWeights* WeightPackCache::Find(const Key& key, bool* full) {
  using Entry = decltype(packed_)::value_type;
  thread_local std::array<RecentLookup, size_t{1} << kRecentLookupBits> recent;
  RecentLookup& slot = recent[RecentSlot(KeyHash{}(key))];
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  if (slot.generation == generation) {
    const Entry* entry = static_cast<const Entry*>(slot.entry);
    if (SameKey(entry->first, key)) return entry->second.get();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = packed_.find(key);
  if (found != packed_.end()) {
    slot = {generation, &*found};  // the map's entries stay where they are until Clear()
    return found->second.get();
  }
  *full = bytes_ >= kMaxBytes;
  return nullptr;
}

const PackedWeights* WeightPackCache::Insert(const Key& key,
                                             std::unique_ptr<const PackedWeights> packed) {
  const int64_t bytes =
      static_cast<int64_t>((packed->b.size() + packed->column_sums.size()) * sizeof(int32_t));
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = packed_.emplace(key, std::move(packed));
  if (inserted) bytes_ += bytes;
  return it->second.get();
}

void WeightPackCache::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  packed_.clear();
  bytes_ = 0;
  generation_.store(next_generation.fetch_add(1), std::memory_order_release);
}

}  // namespace kernels
}  // namespace example_npu
