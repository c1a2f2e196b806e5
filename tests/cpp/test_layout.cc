/*!
 * \file tests/cpp/test_layout.cc
 * \brief NumElements and Transpose against naive references.
 */
#include <gtest/gtest.h>
#include <tvm/ffi/error.h>

#include <random>
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

TEST(LayoutTest, NumElements) {
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({7}), 7);
  EXPECT_EQ(NumElements({2, 3, 4}), 24);
  EXPECT_EQ(NumElements({2, 0, 4}), 0);
}

/*! \brief out[i0..] = in[i at axes]: each output element fetched by explicit index mapping. */
std::vector<float> NaiveTranspose(const std::vector<float>& in, const Shape& in_shape,
                                  const std::vector<int64_t>& axes) {
  Shape out_shape(axes.size());
  for (size_t i = 0; i < axes.size(); ++i) out_shape[i] = in_shape[axes[i]];
  std::vector<float> out(in.size());
  for (int64_t flat = 0; flat < static_cast<int64_t>(out.size()); ++flat) {
    const std::vector<int64_t> oi = Unravel(flat, out_shape);
    std::vector<int64_t> ii(in_shape.size());
    for (size_t i = 0; i < axes.size(); ++i) ii[axes[i]] = oi[i];
    out[flat] = in[Ravel(ii, in_shape)];
  }
  return out;
}

TEST(LayoutTest, TransposeMatchesReference) {
  std::mt19937 rng(11);
  struct Case {
    Shape shape;
    std::vector<int64_t> axes;
  };
  const std::vector<Case> cases = {
      {{}, {}},
      {{5}, {0}},
      {{3, 4}, {1, 0}},
      {{17, 33}, {1, 0}},
      {{2, 3, 4}, {0, 1, 2}},
      {{2, 3, 4}, {2, 0, 1}},
      {{2, 3, 4}, {1, 2, 0}},
      {{2, 1, 4, 5}, {3, 2, 0, 1}},
      {{3, 4, 5, 6}, {0, 2, 3, 1}},
      {{3, 4, 5, 6}, {0, 3, 1, 2}},
      {{2, 3, 1, 4, 2}, {4, 0, 3, 1, 2}},
  };
  for (const Case& c : cases) {
    const std::vector<float> in = RandomVector(NumElements(c.shape), &rng);
    std::vector<float> out(in.size(), -1.0f);
    Transpose(in.data(), c.shape, c.axes, out.data());
    // A permutation moves values without arithmetic, so the match must be exact.
    ExpectAllClose(out, NaiveTranspose(in, c.shape, c.axes), ShapeToString(c.shape), 0.0, 0.0);
  }
}

TEST(LayoutTest, TransposeRejectsBadAxes) {
  std::vector<float> buf(24);
  EXPECT_THROW(Transpose(buf.data(), {2, 3, 4}, {0, 1}, buf.data()), tvm::ffi::Error);
  EXPECT_THROW(Transpose(buf.data(), {2, 3, 4}, {0, 1, 1}, buf.data()), tvm::ffi::Error);
  EXPECT_THROW(Transpose(buf.data(), {2, 3, 4}, {0, 1, 3}, buf.data()), tvm::ffi::Error);
}

}  // namespace
}  // namespace kernels
}  // namespace example_npu
