/*!
 * \file tests/cpp/test_matmul.cc
 * \brief Matmul against a naive numpy.matmul reference.
 */
#include <gtest/gtest.h>
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "test_util.h"

namespace example_npu {
namespace kernels {
namespace {

using test_util::ExpectAllClose;
using test_util::RandomVector;
using test_util::Ravel;
using test_util::ShapeToString;
using test_util::Unravel;

/*! \brief numpy.matmul written out: promote 1-D operands, broadcast batches, sum over k. */
std::vector<double> NaiveMatmul(const std::vector<float>& lhs, Shape lhs_shape,
                                const std::vector<float>& rhs, Shape rhs_shape, Shape* out_shape) {
  const bool lhs_vec = lhs_shape.size() == 1;
  const bool rhs_vec = rhs_shape.size() == 1;
  if (lhs_vec) lhs_shape.insert(lhs_shape.begin(), 1);
  if (rhs_vec) rhs_shape.push_back(1);
  const size_t lr = lhs_shape.size();
  const size_t rr = rhs_shape.size();
  const int64_t m = lhs_shape[lr - 2];
  const int64_t k = lhs_shape[lr - 1];
  const int64_t n = rhs_shape[rr - 1];
  EXPECT_EQ(k, rhs_shape[rr - 2]);

  const size_t batch_rank = std::max(lr, rr) - 2;
  Shape full(batch_rank + 2);
  for (size_t i = 0; i < batch_rank; ++i) {
    const int64_t li = static_cast<int64_t>(i) - static_cast<int64_t>(batch_rank - (lr - 2));
    const int64_t ri = static_cast<int64_t>(i) - static_cast<int64_t>(batch_rank - (rr - 2));
    const int64_t ld = li >= 0 ? lhs_shape[li] : 1;
    const int64_t rd = ri >= 0 ? rhs_shape[ri] : 1;
    full[i] = std::max(ld, rd);
  }
  full[batch_rank] = m;
  full[batch_rank + 1] = n;

  std::vector<double> out(NumElements(full));
  for (int64_t flat = 0; flat < static_cast<int64_t>(out.size()); ++flat) {
    const std::vector<int64_t> idx = Unravel(flat, full);
    // Right-align each operand's batch dims against the output's; size-1 dims read index 0.
    std::vector<int64_t> li(lr), ri(rr);
    for (size_t d = 0; d + 2 < lr; ++d) {
      const int64_t od = idx[d + batch_rank - (lr - 2)];
      li[d] = lhs_shape[d] == 1 ? 0 : od;
    }
    for (size_t d = 0; d + 2 < rr; ++d) {
      const int64_t od = idx[d + batch_rank - (rr - 2)];
      ri[d] = rhs_shape[d] == 1 ? 0 : od;
    }
    double acc = 0.0;
    for (int64_t p = 0; p < k; ++p) {
      li[lr - 2] = idx[batch_rank];
      li[lr - 1] = p;
      ri[rr - 2] = p;
      ri[rr - 1] = idx[batch_rank + 1];
      acc += static_cast<double>(lhs[Ravel(li, lhs_shape)]) * rhs[Ravel(ri, rhs_shape)];
    }
    out[flat] = acc;
  }
  *out_shape = Shape(full.begin(), full.begin() + batch_rank);
  if (!lhs_vec) out_shape->push_back(m);
  if (!rhs_vec) out_shape->push_back(n);
  return out;
}

struct MatmulCase {
  Shape lhs;
  Shape rhs;
};

void CheckMatmul(const MatmulCase& c, std::mt19937* rng) {
  const std::vector<float> lhs = RandomVector(NumElements(c.lhs), rng);
  const std::vector<float> rhs = RandomVector(NumElements(c.rhs), rng);
  Shape out_shape;
  const std::vector<double> expected = NaiveMatmul(lhs, c.lhs, rhs, c.rhs, &out_shape);
  std::vector<float> out(NumElements(out_shape), -123.0f);
  Matmul(lhs.data(), c.lhs, rhs.data(), c.rhs, out.data(), out_shape);
  const double k = static_cast<double>(c.lhs.back());
  // Float accumulation error grows roughly with sqrt(k) for values in [-1, 1].
  ExpectAllClose(out, expected, ShapeToString(c.lhs) + " x " + ShapeToString(c.rhs), 1e-5,
                 1e-5 * std::sqrt(std::max(k, 1.0)));
}

TEST(MatmulTest, TwoDimensionalSizesAroundBlockEdges) {
  std::mt19937 rng(1);
  const std::vector<MatmulCase> cases = {
      {{1, 1}, {1, 1}},        {{3, 5}, {5, 2}},     {{4, 4}, {4, 4}},     {{15, 15}, {15, 15}},
      {{16, 16}, {16, 16}},    {{17, 17}, {17, 17}}, {{32, 32}, {32, 32}}, {{33, 31}, {31, 35}},
      {{7, 3}, {3, 64}},       {{5, 300}, {300, 7}}, {{3, 20}, {20, 600}}, {{9, 130}, {130, 513}},
      {{64, 129}, {129, 257}}, {{2, 1}, {1, 9}},
  };
  for (const MatmulCase& c : cases) CheckMatmul(c, &rng);
}

TEST(MatmulTest, OneDimensionalOperands) {
  std::mt19937 rng(2);
  const std::vector<MatmulCase> cases = {
      {{5}, {5}},       {{1}, {1}},       {{40}, {40}},     {{7}, {7, 3}},    {{4, 7}, {7}},
      {{3, 4, 7}, {7}}, {{7}, {2, 7, 3}}, {{33}, {33, 17}}, {{17, 33}, {33}}, {{2, 3, 9, 5}, {5}},
  };
  for (const MatmulCase& c : cases) CheckMatmul(c, &rng);
}

TEST(MatmulTest, BatchedWithBroadcastBatchDims) {
  std::mt19937 rng(3);
  const std::vector<MatmulCase> cases = {
      {{2, 3, 4, 5}, {5, 6}},    {{3, 4, 5}, {2, 1, 5, 6}},     {{2, 1, 4, 5}, {3, 5, 6}},
      {{1, 4, 5}, {3, 5, 6}},    {{3, 4, 5}, {1, 5, 6}},        {{2, 3, 4, 5}, {2, 3, 5, 1}},
      {{2, 4, 5}, {5, 1}},       {{4, 1, 18, 20}, {3, 20, 17}}, {{5, 5}, {2, 2, 5, 5}},
      {{1, 1, 3, 2}, {1, 2, 4}}, {{6, 2, 3}, {6, 3, 2}},
  };
  for (const MatmulCase& c : cases) CheckMatmul(c, &rng);
}

TEST(MatmulTest, SizesCrossingCacheBlocksAndThreads) {
  // Several row blocks, depth blocks and column panels, ragged edges on each, and batches spread
  // over threads. The last case is beyond the in-place GEMM's size, so the packed GEMM runs.
  std::mt19937 rng(4);
  const std::vector<MatmulCase> cases = {
      {{200, 300}, {300, 530}}, {{97, 257}, {257, 17}},   {{5, 61, 70}, {5, 70, 33}},
      {{3, 1, 40}, {40, 600}},  {{100, 800}, {800, 600}},
  };
  for (const MatmulCase& c : cases) CheckMatmul(c, &rng);
}

TEST(MatmulTest, EmptyReductionGivesZeros) {
  const Shape lhs_shape{3, 0};
  const Shape rhs_shape{0, 4};
  std::vector<float> out(12, 7.0f);
  Matmul(nullptr, lhs_shape, nullptr, rhs_shape, out.data(), {3, 4});
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

TEST(MatmulTest, KnownValues) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};     // 2x3
  const std::vector<float> b = {7, 8, 9, 10, 11, 12};  // 3x2
  std::vector<float> out(4);
  Matmul(a.data(), {2, 3}, b.data(), {3, 2}, out.data(), {2, 2});
  EXPECT_EQ(out, (std::vector<float>{58, 64, 139, 154}));
}

TEST(MatmulTest, RejectsInconsistentShapes) {
  std::vector<float> buf(64, 0.0f);
  EXPECT_THROW(Matmul(buf.data(), {2, 3}, buf.data(), {4, 2}, buf.data(), {2, 2}), tvm::ffi::Error);
  EXPECT_THROW(Matmul(buf.data(), {2, 2, 3}, buf.data(), {3, 3, 2}, buf.data(), {3, 2, 2}),
               tvm::ffi::Error);
  EXPECT_THROW(Matmul(buf.data(), {2, 3}, buf.data(), {3, 2}, buf.data(), {2, 3}), tvm::ffi::Error);
}

}  // namespace
}  // namespace kernels
}  // namespace example_npu
