/*!
 * \file kernels/weight_pack_cache.h
 * \brief Packed int8 weights kept for reuse: every tile of a quantized layer multiplies by the
 * same constant weight tile, and packing it for the dot-product unit (four rows interleaved per
 * 32-bit lane, columns padded to 16, column sums) cost as much as the multiplication for small
 * tiles (a fully connected layer at batch 1: over half of the run).
 */
#ifndef EXAMPLE_NPU_KERNELS_WEIGHT_PACK_CACHE_H_
#define EXAMPLE_NPU_KERNELS_WEIGHT_PACK_CACHE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kernels/cache_line_vector.h"

namespace example_npu {
namespace kernels {

/*! \brief int8 weights as DirectGemmU8S8 / DirectGemmS8U8 read them, and their column sums. */
struct PackedWeights {
  CacheLineVector<int32_t> b;
  std::vector<int32_t> column_sums;
};

/*!
 * \brief Packed weights by the address of the weights and how they were packed. Only for weights
 * that do not change while the cache holds them (bound constants): whoever owns them calls
 * Clear() when they are rebound. Thread-safe; entries stay where they are until Clear().
 */
class WeightPackCache {
 public:
  /*! \brief The weights' address, then the packing's parameters (kernel-defined). */
  using Key = std::array<int64_t, 8>;
  /*! \brief Packed bytes kept at most. */
  static constexpr int64_t kMaxBytes = int64_t{256} << 20;

  /*!
   * \brief The packed weights of `key`, made by `pack(PackedWeights*)` the first time; nullptr
   * when they are not kept and the cache is full (the caller then packs them itself). A template,
   * so that the per-tile lookup builds no std::function.
   */
  template <typename Pack>
  const PackedWeights* Get(const Key& key, const Pack& pack) {
    bool full = false;
    if (const PackedWeights* kept = Find(key, &full)) return kept;
    if (full) return nullptr;
    // Packed outside the lock; a tile packed twice at once keeps the first copy.
    auto packed = std::make_unique<PackedWeights>();
    pack(packed.get());
    return Insert(key, std::move(packed));
  }
  void Clear();

  WeightPackCache();

 private:
  struct KeyHash {
    size_t operator()(const Key& key) const;
  };
  const PackedWeights* Find(const Key& key, bool* full);
  const PackedWeights* Insert(const Key& key, std::unique_ptr<const PackedWeights> packed);

  std::mutex mutex_;
  // Names this cache's current entries among all caches' (a fresh number at construction and at
  // each Clear): a thread's recent lookups of another generation are stale.
  std::atomic<uint64_t> generation_;
  std::unordered_map<Key, std::unique_ptr<const PackedWeights>, KeyHash> packed_;
  int64_t bytes_ = 0;
};

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_WEIGHT_PACK_CACHE_H_
