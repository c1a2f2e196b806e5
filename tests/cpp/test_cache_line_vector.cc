#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cache_line_vector.h"

namespace example_npu {
namespace kernels {
namespace {

bool OnCacheLine(const void* p) { return reinterpret_cast<uintptr_t>(p) % kCacheLineBytes == 0; }

TEST(CacheLineVectorTest, ElementsStartOnACacheLineAtEverySize) {
  // Sizes below and above the C library's mmap threshold (where malloc returns 16 bytes past a
  // page), and a vector that grows through several reallocations.
  for (size_t size : {size_t{1}, size_t{17}, size_t{1000}, size_t{1} << 20, size_t{3} << 22}) {
    CacheLineVector<uint8_t> bytes(size);
    EXPECT_TRUE(OnCacheLine(bytes.data())) << size;
  }
  CacheLineVector<int32_t> words;
  for (int i = 0; i < 100000; ++i) {
    words.push_back(i);
    ASSERT_TRUE(OnCacheLine(words.data())) << words.size();
  }
  EXPECT_EQ(words[99999], 99999);
}

TEST(CacheLineVectorTest, ValueInitialisesLikeAVector) {
  // The emulator's memories rely on starting zeroed, as std::vector's did.
  CacheLineVector<uint8_t> bytes(4096);
  for (uint8_t b : bytes) ASSERT_EQ(b, 0);
  bytes.assign(100, 7);
  EXPECT_EQ(bytes.size(), 100u);
  EXPECT_EQ(bytes[99], 7);
  EXPECT_TRUE(OnCacheLine(bytes.data()));
}

}  // namespace
}  // namespace kernels
}  // namespace example_npu
