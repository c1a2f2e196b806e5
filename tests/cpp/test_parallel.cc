/*!
 * \file tests/cpp/test_parallel.cc
 * \brief ParallelFor's split (edge cases), nesting, exceptions, and kernels run from several
 * threads at once against single-threaded results.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/parallel.h"
#include "test_util.h"

namespace example_npu {
namespace kernels {
namespace {

using test_util::RandomVector;

/*! \brief Runs ParallelFor and checks every index in [0, n) is visited exactly once. */
void ExpectCoversOnce(int64_t n, int64_t grain, int chunks_per_thread = 4) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::atomic<int> calls{0};
  ParallelFor(
      n, grain,
      [&](int64_t begin, int64_t end) {
        EXPECT_LT(begin, end);
        EXPECT_GE(end - begin, std::min(grain, n)) << "chunk below the grain";
        for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
        calls.fetch_add(1);
      },
      chunks_per_thread);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " index " << i;
  EXPECT_LE(calls.load(), std::max<int64_t>(1, int64_t{chunks_per_thread} * MaxThreads()));
  if (n <= 0) EXPECT_EQ(calls.load(), 0);
}

TEST(ParallelTest, ChunkBoundsCoverTheRangeInOrder) {
  for (int64_t n : {0, 1, 2, 3, 7, 8, 9, 100, 1001}) {
    for (int64_t chunks : {1, 2, 3, 4, 8, 16}) {
      int64_t expected_begin = 0;
      for (int64_t c = 0; c < chunks; ++c) {
        int64_t begin = 0;
        int64_t end = 0;
        ChunkBounds(n, chunks, c, &begin, &end);
        EXPECT_EQ(begin, expected_begin) << n << "/" << chunks;
        // Sizes differ by at most one: the first n % chunks chunks hold the extra items.
        EXPECT_EQ(end - begin, n / chunks + (c < n % chunks ? 1 : 0)) << n << "/" << chunks;
        expected_begin = end;
      }
      EXPECT_EQ(expected_begin, n);
    }
  }
}

TEST(ParallelTest, EdgeCaseSizesAreCoveredExactlyOnce) {
  // Empty work, work smaller than the number of workers, sizes not divisible by the workers,
  // and grains that force inline runs.
  for (int64_t n : {-3, 0, 1, 2, 3, 5, 7, 13, 64, 1000, 4099}) {
    for (int64_t grain : {0, 1, 2, 3, 1000, 10000}) ExpectCoversOnce(n, grain);
  }
  ExpectCoversOnce(4099, 1, /*chunks_per_thread=*/1);
}

TEST(ParallelTest, SmallWorkRunsInlineOnTheCaller) {
  const std::thread::id caller = std::this_thread::get_id();
  ParallelFor(10, 8, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 10);
    EXPECT_EQ(std::this_thread::get_id(), caller);
  });
}

TEST(ParallelTest, NestedLoopsRunInlineWithoutDeadlock) {
  std::atomic<int64_t> total{0};
  ParallelFor(64, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ParallelFor(100, 1, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
    }
  });
  EXPECT_EQ(total.load(), 64 * 100);
}

TEST(ParallelTest, ExceptionsReachTheCallerAndThePoolStaysUsable) {
  EXPECT_THROW(ParallelFor(1000, 1,
                           [](int64_t begin, int64_t) {
                             if (begin > 0) throw std::runtime_error("chunk failed");
                           }),
               std::runtime_error);
  ExpectCoversOnce(1000, 1);
}

TEST(ParallelTest, ConcurrentCallersEachGetTheirWholeRange) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int rep = 0; rep < 200; ++rep) {
        std::vector<std::atomic<int>> hits(777);
        ParallelFor(777, 1, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
        for (auto& h : hits) failures += h.load() != 1;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ParallelTest, KernelsFromTwoThreadsMatchSingleThreadedResults) {
  std::mt19937 rng(3);
  const Shape a_shape{96, 200};
  const Shape b_shape{200, 72};
  const std::vector<float> a = RandomVector(96 * 200, &rng);
  const std::vector<float> b = RandomVector(200 * 72, &rng);
  const Shape x_shape{2, 16, 20, 20};
  const Shape w_shape{24, 16, 3, 3};
  const std::vector<float> x = RandomVector(2 * 16 * 20 * 20, &rng);
  const std::vector<float> w = RandomVector(24 * 16 * 9, &rng);
  Conv2dParams conv;
  conv.padding = {1, 1, 1, 1};
  const Shape y_shape{2, 24, 20, 20};

  // Reference results, computed before any concurrency.
  std::vector<float> mm_ref(96 * 72);
  Matmul(a.data(), a_shape, b.data(), b_shape, mm_ref.data(), {96, 72});
  std::vector<float> conv_ref(2 * 24 * 20 * 20);
  Conv2d(x.data(), x_shape, w.data(), w_shape, conv_ref.data(), y_shape, conv);
  std::vector<float> sm_ref(x.size());
  Softmax(x.data(), x_shape, 3, sm_ref.data());

  std::atomic<int> mismatches{0};
  auto worker = [&] {
    for (int rep = 0; rep < 30; ++rep) {
      std::vector<float> mm(mm_ref.size());
      Matmul(a.data(), a_shape, b.data(), b_shape, mm.data(), {96, 72});
      std::vector<float> y(conv_ref.size());
      Conv2d(x.data(), x_shape, w.data(), w_shape, y.data(), y_shape, conv);
      std::vector<float> sm(sm_ref.size());
      Softmax(x.data(), x_shape, 3, sm.data());
      // Same code path and summation order in every thread: results are bit-identical.
      mismatches += mm != mm_ref;
      mismatches += y != conv_ref;
      mismatches += sm != sm_ref;
    }
  };
  std::thread first(worker);
  std::thread second(worker);
  first.join();
  second.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace kernels
}  // namespace example_npu
