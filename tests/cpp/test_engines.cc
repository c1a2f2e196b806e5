/*!
 * \file tests/cpp/test_engines.cc
 * \brief The engines on strided views: the same bits as on dense copies of the operands.
 */
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "sim/engines.h"
#include "test_util.h"

namespace example_npu {
namespace {

using kernels::Shape;
using kernels::test_util::RandomVector;

/*! \brief Rows [0, rows) x columns [0, cols) of a row-major matrix `stride` columns wide. */
std::vector<float> DenseCopy(const std::vector<float>& wide, int64_t stride, int64_t rows,
                             int64_t cols) {
  std::vector<float> dense;
  for (int64_t r = 0; r < rows; ++r) {
    dense.insert(dense.end(), wide.begin() + r * stride, wide.begin() + r * stride + cols);
  }
  return dense;
}

TEST(EnginesTest, MatmulTileOfOneHeadReadsAndWritesRowsThroughStrides) {
  // A [1, 37, 24] x [1, 24, 20] tile of attention: q's rows 40 apart, k^T's 53 apart (a column
  // slice), the result's rows 45 apart; the untouched elements between rows keep their values.
  const int64_t m = 37, k = 24, n = 20;
  std::mt19937 rng(5);
  const std::vector<float> q = RandomVector(m * 40, &rng), kt = RandomVector(k * 53, &rng);
  const Shape a_shape{1, m, k}, b_shape{1, k, n}, out_shape{1, m, n};
  const std::vector<int64_t> a_strides{m * 40, 40, 1}, b_strides{k * 53, 53, 1},
      out_strides{m * 45, 45, 1};
  ASSERT_TRUE(
      StridedView(OpKind::kMatmul, OpAttrs{}, {{q.data(), &a_shape}, {kt.data(), &b_shape}}));
  EXPECT_TRUE(ViewableInput(OpKind::kMatmul, 1));
  EXPECT_FALSE(ViewableInput(OpKind::kConv2d, 1));

  const std::vector<float> a_dense = DenseCopy(q, 40, m, k), b_dense = DenseCopy(kt, 53, k, n);
  std::vector<float> expected(m * n);
  RunOp(OpKind::kMatmul, OpAttrs{}, {{a_dense.data(), &a_shape}, {b_dense.data(), &b_shape}},
        expected.data(), out_shape);

  std::vector<float> out(m * 45, -7.0f);
  RunOp(OpKind::kMatmul, OpAttrs{},
        {{q.data(), &a_shape, &a_strides}, {kt.data(), &b_shape, &b_strides}}, out.data(),
        out_shape, &out_strides);
  EXPECT_EQ(DenseCopy(out, 45, m, n), expected);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = n; j < 45; ++j) EXPECT_EQ(out[r * 45 + j], -7.0f);
  }
}

TEST(EnginesTest, BatchedMatmulTilesAreNoViews) {
  const Shape a{2, 8, 4}, b{2, 4, 8};
  EXPECT_FALSE(StridedView(OpKind::kMatmul, OpAttrs{}, {{nullptr, &a}, {nullptr, &b}}));
  EXPECT_FALSE(SingleMatrixProduct(a, b).has_value());
  const std::optional<MatrixDims> dims = SingleMatrixProduct({1, 1, 8, 4}, {1, 1, 4, 8});
  ASSERT_TRUE(dims.has_value());
  EXPECT_EQ(dims->m, 8);
  EXPECT_EQ(dims->k, 4);
  EXPECT_EQ(dims->n, 8);
}

}  // namespace
}  // namespace example_npu
