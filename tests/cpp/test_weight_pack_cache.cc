#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "kernels/weight_pack_cache.h"

namespace example_npu {
namespace kernels {
namespace {

/*! \brief Key number `i`; its packing holds i (as the first word of b). */
WeightPackCache::Key KeyOf(int64_t i) { return {4096 + 64 * i, 1, 16, 16, 32, 32, 32, 0}; }

struct CountingPack {
  int64_t value;
  int* calls;
  void operator()(PackedWeights* out) const {
    ++*calls;
    out->b.assign(1, static_cast<int32_t>(value));
  }
};

TEST(WeightPackCacheTest, PacksOnceAndFindsItAgain) {
  WeightPackCache cache;
  int calls = 0;
  const PackedWeights* first = cache.Get(KeyOf(0), CountingPack{7, &calls});
  const PackedWeights* again = cache.Get(KeyOf(0), CountingPack{8, &calls});
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first, again);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(again->b[0], 7);
  // The dot-product kernels load the packed words 64 bytes at a time.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(again->b.data()) % kCacheLineBytes, 0u);
}

TEST(WeightPackCacheTest, ClearForgetsWhatThisThreadLookedUp) {
  // A thread's recent lookups must not outlive Clear(): the same key (the same address, new
  // constants bound there) is packed again, from the new weights.
  WeightPackCache cache;
  int calls = 0;
  EXPECT_EQ(cache.Get(KeyOf(3), CountingPack{1, &calls})->b[0], 1);
  EXPECT_EQ(cache.Get(KeyOf(3), CountingPack{1, &calls})->b[0], 1);
  cache.Clear();
  EXPECT_EQ(cache.Get(KeyOf(3), CountingPack{2, &calls})->b[0], 2);
  EXPECT_EQ(calls, 2);
}

TEST(WeightPackCacheTest, CachesKeepTheirOwnEntries) {
  int calls = 0;
  WeightPackCache a;
  // Packed, then found in the map: this thread now has the lookup among its recent ones.
  EXPECT_EQ(a.Get(KeyOf(5), CountingPack{10, &calls})->b[0], 10);
  EXPECT_EQ(a.Get(KeyOf(5), CountingPack{10, &calls})->b[0], 10);
  // A second cache (also one made where the first lay) does not see the first one's packing.
  WeightPackCache b;
  EXPECT_EQ(b.Get(KeyOf(5), CountingPack{20, &calls})->b[0], 20);
  EXPECT_EQ(a.Get(KeyOf(5), CountingPack{30, &calls})->b[0], 10);
  EXPECT_EQ(calls, 2);
}

TEST(WeightPackCacheTest, EveryKeyFindsItsOwnPackingOnEveryThread) {
  // More keys than a thread keeps recent lookups of: colliding ones replace each other there and
  // are found again in the shared map.
  WeightPackCache cache;
  constexpr int64_t kKeys = 2000;
  int calls = 0;
  for (int64_t i = 0; i < kKeys; ++i) cache.Get(KeyOf(i), CountingPack{i, &calls});
  ASSERT_EQ(calls, kKeys);
  auto check = [&](int* wrong) {
    int unused = 0;
    for (int round = 0; round < 2; ++round) {
      for (int64_t i = 0; i < kKeys; ++i) {
        const PackedWeights* packed = cache.Get(KeyOf(i), CountingPack{-1, &unused});
        if (packed == nullptr || packed->b[0] != i) ++*wrong;
      }
    }
    *wrong += unused;  // nothing is packed again
  };
  int wrong_here = 0, wrong_there = 0;
  std::thread other(check, &wrong_there);
  check(&wrong_here);
  other.join();
  EXPECT_EQ(wrong_here, 0);
  EXPECT_EQ(wrong_there, 0);
}

}  // namespace
}  // namespace kernels
}  // namespace example_npu
