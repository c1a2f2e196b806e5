#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/half.h"
#include "sim/dma.h"

namespace example_npu {
namespace {

/*! \brief Row-major (dense) element strides of `extent` permuted by `order` (outermost first). */
std::vector<int64_t> StridesInOrder(const std::vector<int64_t>& extent,
                                    const std::vector<int64_t>& order) {
  std::vector<int64_t> strides(extent.size());
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= extent[*it];
  }
  return strides;
}

/*! \brief The naive definition: one element at a time, by multi-index. */
template <typename T>
void NaiveCopy(const T* src, const std::vector<int64_t>& src_strides, T* dst,
               const std::vector<int64_t>& dst_strides, const std::vector<int64_t>& extent) {
  std::vector<int64_t> index(extent.size(), 0);
  const int64_t total = std::accumulate(extent.begin(), extent.end(), int64_t{1},
                                        [](int64_t a, int64_t b) { return a * b; });
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t s = 0, d = 0;
    for (size_t k = 0; k < extent.size(); ++k) {
      s += index[k] * src_strides[k];
      d += index[k] * dst_strides[k];
    }
    dst[d] = src[s];
    for (int64_t k = static_cast<int64_t>(extent.size()) - 1; k >= 0; --k) {
      if (++index[k] < extent[k]) break;
      index[k] = 0;
    }
  }
}

template <typename T>
void CheckRandomBoxes(DType dtype, int cases) {
  std::mt19937 rng(7);
  for (int c = 0; c < cases; ++c) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> extent(rank), src_order(rank), dst_order(rank);
    for (int d = 0; d < rank; ++d) extent[d] = 1 + static_cast<int64_t>(rng() % 40);
    std::iota(src_order.begin(), src_order.end(), 0);
    std::iota(dst_order.begin(), dst_order.end(), 0);
    std::shuffle(src_order.begin(), src_order.end(), rng);
    std::shuffle(dst_order.begin(), dst_order.end(), rng);
    // The source is a box inside a larger tensor: pad each dim, offset the start.
    std::vector<int64_t> full(extent);
    for (int64_t& e : full) e += static_cast<int64_t>(rng() % 3);
    const std::vector<int64_t> src_strides = StridesInOrder(full, src_order);
    const std::vector<int64_t> dst_strides = StridesInOrder(extent, dst_order);
    const int64_t full_size = std::accumulate(full.begin(), full.end(), int64_t{1},
                                              [](int64_t a, int64_t b) { return a * b; });
    const int64_t size = std::accumulate(extent.begin(), extent.end(), int64_t{1},
                                         [](int64_t a, int64_t b) { return a * b; });
    std::vector<T> src(full_size);
    for (T& v : src) v = static_cast<T>(rng());
    std::vector<T> expected(size, 0), actual(size, 0);
    NaiveCopy(src.data(), src_strides, expected.data(), dst_strides, extent);
    BoxCopy(dtype, src_strides, dtype, dst_strides, extent)
        .Run(reinterpret_cast<const uint8_t*>(src.data()),
             reinterpret_cast<uint8_t*>(actual.data()));
    ASSERT_EQ(actual, expected) << "case " << c << " rank " << rank;
  }
}

TEST(DmaTest, RandomStridedBoxesAndLayoutChangesMatchTheNaiveCopy) {
  CheckRandomBoxes<uint32_t>(DType::kFloat32, 400);
  CheckRandomBoxes<uint16_t>(DType::kFloat16, 200);
  CheckRandomBoxes<uint8_t>(DType::kInt8, 200);
}

/*! \brief An NCHW tile to NHWC and back, against the naive copy. */
template <typename T>
void CheckLargeNchwToNhwc(DType dtype) {
  // Big enough to be split over the thread pool, with ragged 8 x 8 blocks at both edges.
  const std::vector<int64_t> extent = {1, 67, 13, 131};  // N, C, H, W of the tile
  const std::vector<int64_t> nchw = StridesInOrder(extent, {0, 1, 2, 3});
  const std::vector<int64_t> nhwc = StridesInOrder(extent, {0, 2, 3, 1});
  std::vector<T> src(67 * 13 * 131), expected(src.size()), actual(src.size()), back(src.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<T>(i * 7919 % 65521);
  NaiveCopy(src.data(), nchw, expected.data(), nhwc, extent);
  BoxCopy(dtype, nchw, dtype, nhwc, extent)
      .Run(reinterpret_cast<const uint8_t*>(src.data()), reinterpret_cast<uint8_t*>(actual.data()));
  EXPECT_EQ(actual, expected) << sizeof(T) * 8 << "-bit";
  BoxCopy(dtype, nhwc, dtype, nchw, extent)
      .Run(reinterpret_cast<const uint8_t*>(actual.data()),
           reinterpret_cast<uint8_t*>(back.data()));
  EXPECT_EQ(back, src) << sizeof(T) * 8 << "-bit";
}

TEST(DmaTest, LargeNchwToNhwcTransposeMatchesTheNaiveCopy) {
  CheckLargeNchwToNhwc<float>(DType::kFloat32);
  CheckLargeNchwToNhwc<uint8_t>(DType::kInt8);
}

TEST(DmaTest, NarrowsFloat32ToFloat16OnAStridedStore) {
  const std::vector<int64_t> extent = {3, 5};
  std::vector<float> src(15);
  for (size_t i = 0; i < src.size(); ++i) src[i] = 0.1f * static_cast<float>(i) - 0.7f;
  std::vector<uint16_t> dst(15, 0);
  BoxCopy(DType::kFloat32, {5, 1}, DType::kFloat16, {1, 3}, extent)
      .Run(reinterpret_cast<const uint8_t*>(src.data()), reinterpret_cast<uint8_t*>(dst.data()));
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < 5; ++c) {
      EXPECT_EQ(dst[c * 3 + r], kernels::FloatToHalf(src[r * 5 + c]));
    }
  }
}

}  // namespace
}  // namespace example_npu
