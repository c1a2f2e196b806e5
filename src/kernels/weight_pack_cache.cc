#include "kernels/weight_pack_cache.h"

#include <utility>

namespace example_npu {
namespace kernels {

const PackedWeights* WeightPackCache::Get(const Key& key,
                                          const std::function<void(PackedWeights*)>& pack) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = packed_.find(key);
    if (found != packed_.end()) return found->second.get();
    if (bytes_ >= kMaxBytes) return nullptr;
  }
  // Packed outside the lock; a tile packed twice at once keeps the first copy.
  auto packed = std::make_unique<PackedWeights>();
  pack(packed.get());
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
