#include "kernels/weight_pack_cache.h"

#include <utility>

namespace example_npu {
namespace kernels {

size_t WeightPackCache::KeyHash::operator()(const Key& key) const {
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a over the eight words
  for (int64_t word : key) hash = (hash ^ static_cast<uint64_t>(word)) * 0x100000001b3ULL;
  return static_cast<size_t>(hash);
}

const PackedWeights* WeightPackCache::Find(const Key& key, bool* full) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = packed_.find(key);
  if (found != packed_.end()) return found->second.get();
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
}

}  // namespace kernels
}  // namespace example_npu
