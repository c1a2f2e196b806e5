/*!
 * \file tests/cpp/test_reduce.cc
 * \brief Reductions (mean, sum, max, min, variance, argmax, argmin), log_softmax, LayerNorm,
 * maximum / minimum and the masked softmax against naive references; special values follow
 * TVM's combiners.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/reduce.h"
#include "test_util.h"

namespace example_npu {
namespace kernels {
namespace {

using test_util::ExpectAllClose;
using test_util::RandomVector;
using test_util::Ravel;
using test_util::ShapeToString;
using test_util::Unravel;

/*! \brief mean over `axes` in double precision, element by element. */
std::vector<double> NaiveMean(const std::vector<float>& in, const Shape& shape,
                              const std::vector<int64_t>& axes) {
  Shape kept = shape;
  int64_t count = 1;
  for (int64_t axis : axes) {
    kept[axis] = 1;
    count *= shape[axis];
  }
  std::vector<double> out(NumElements(kept), 0.0);
  for (int64_t flat = 0; flat < static_cast<int64_t>(in.size()); ++flat) {
    std::vector<int64_t> index = Unravel(flat, shape);
    for (int64_t axis : axes) index[axis] = 0;
    out[Ravel(index, kept)] += in[flat];
  }
  for (double& value : out) value /= count;
  return out;
}

TEST(MeanTest, AnyAxesOfVariousShapes) {
  std::mt19937 rng(7);
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{1, 8, 7, 7}, {2, 3}},      {{2, 3, 4}, {2}}, {{2, 3, 4}, {0}},
      {{2, 3, 4}, {0, 2}},         {{5}, {0}},       {{1, 6, 1, 9}, {1, 3}},
      {{3, 4, 5, 2}, {0, 1, 2, 3}}};
  for (const auto& [shape, axes] : cases) {
    const std::vector<float> in = RandomVector(NumElements(shape), &rng, -3.0f, 3.0f);
    Shape kept = shape;
    for (int64_t axis : axes) kept[axis] = 1;
    std::vector<float> out(NumElements(kept), -1.0f);
    Mean(in.data(), shape, axes, out.data());
    ExpectAllClose(out, NaiveMean(in, shape, axes), "mean of " + ShapeToString(shape));
  }
}

std::vector<double> NaiveLayerNorm(const std::vector<float>& in, int64_t row,
                                   const std::vector<float>& gamma, const std::vector<float>& beta,
                                   double epsilon) {
  std::vector<double> out(in.size());
  for (size_t r = 0; r < in.size() / row; ++r) {
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < row; ++i) mean += in[r * row + i];
    mean /= row;
    for (int64_t i = 0; i < row; ++i) var += (in[r * row + i] - mean) * (in[r * row + i] - mean);
    var /= row;
    for (int64_t i = 0; i < row; ++i) {
      out[r * row + i] = (in[r * row + i] - mean) / std::sqrt(var + epsilon) * gamma[i] + beta[i];
    }
  }
  return out;
}

TEST(LayerNormTest, TrailingDimsWithAndWithoutAffine) {
  std::mt19937 rng(11);
  for (const auto& [shape, first] : std::vector<std::pair<Shape, int64_t>>{
           {{2, 5, 16}, 2}, {{3, 4, 6}, 1}, {{7, 33}, 1}, {{1, 17, 32}, 2}}) {
    int64_t row = 1;
    for (size_t d = first; d < shape.size(); ++d) row *= shape[d];
    const std::vector<float> in = RandomVector(NumElements(shape), &rng, -4.0f, 4.0f);
    const std::vector<float> gamma = RandomVector(row, &rng, 0.5f, 1.5f);
    const std::vector<float> beta = RandomVector(row, &rng);
    std::vector<float> out(in.size());
    LayerNorm(in.data(), shape, first, gamma.data(), beta.data(), 1e-5f, true, true, out.data());
    ExpectAllClose(out, NaiveLayerNorm(in, row, gamma, beta, 1e-5), "layer_norm", 1e-4, 1e-5);
    const std::vector<float> ones(row, 1.0f), zeros(row, 0.0f);
    LayerNorm(in.data(), shape, first, gamma.data(), beta.data(), 1e-5f, false, false, out.data());
    ExpectAllClose(out, NaiveLayerNorm(in, row, ones, zeros, 1e-5), "layer_norm, no affine", 1e-4,
                   1e-5);
  }
}

/*! \brief Layer norm in float32 as TVM's build orders it: one row at a time, each sum a chain of
 * additions over the row in order, no contraction (this file builds with -ffp-contract=off). */
std::vector<float> SequentialLayerNorm(const std::vector<float>& in, int64_t row,
                                       const std::vector<float>& gamma,
                                       const std::vector<float>& beta, float epsilon) {
  std::vector<float> out(in.size());
  const float count = static_cast<float>(row);
  for (size_t r = 0; r < in.size() / row; ++r) {
    const float* x = in.data() + r * row;
    float sum = 0.0f;
    for (int64_t i = 0; i < row; ++i) sum += x[i];
    const float mean = sum / count;
    float var_sum = 0.0f;
    for (int64_t i = 0; i < row; ++i) var_sum += (x[i] - mean) * (x[i] - mean);
    const float inv_std = 1.0f / std::sqrt(var_sum / count + epsilon);
    for (int64_t i = 0; i < row; ++i)
      out[r * row + i] = (x[i] - mean) * inv_std * gamma[i] + beta[i];
  }
  return out;
}

TEST(LayerNormTest, RowsNormalisedTogetherKeepEachRowsBits) {
  // 8 rows at a time, and the 5 left over one by one: the bits of one row alone.
  std::mt19937 rng(12);
  const int64_t rows = 21, row = 203;
  const std::vector<float> in = RandomVector(rows * row, &rng, -30.0f, 30.0f);
  const std::vector<float> gamma = RandomVector(row, &rng, 0.5f, 1.5f);
  const std::vector<float> beta = RandomVector(row, &rng);
  std::vector<float> out(in.size());
  LayerNorm(in.data(), {rows, row}, 1, gamma.data(), beta.data(), 1e-5f, true, true, out.data());
  EXPECT_EQ(out, SequentialLayerNorm(in, row, gamma, beta, 1e-5f));
}

TEST(BinaryTest, MaximumAndMinimumFollowTvmNanRules) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> lhs = {nan, 1.0f, -inf, 2.0f, 0.0f};
  const std::vector<float> rhs = {0.0f, nan, 3.0f, -1.0f, -0.0f};
  std::vector<float> max_out(5), min_out(5);
  const Shape shape = {5};
  Binary(BinaryOp::kMaximum, lhs.data(), shape, rhs.data(), shape, max_out.data(), shape);
  Binary(BinaryOp::kMinimum, lhs.data(), shape, rhs.data(), shape, min_out.data(), shape);
  for (size_t i = 0; i < lhs.size(); ++i) {
    // TVM's LLVM build: max(a, b) = a > b ? a : b, min(a, b) = a < b ? a : b.
    const float want_max = lhs[i] > rhs[i] ? lhs[i] : rhs[i];
    const float want_min = lhs[i] < rhs[i] ? lhs[i] : rhs[i];
    EXPECT_TRUE(std::isnan(want_max) ? std::isnan(max_out[i]) : max_out[i] == want_max) << i;
    EXPECT_TRUE(std::isnan(want_min) ? std::isnan(min_out[i]) : min_out[i] == want_min) << i;
  }
  // Broadcast scalar rhs, as the ONNX Clip lowering uses it.
  const float bound = 0.0f;
  std::vector<float> out(5);
  Binary(BinaryOp::kMaximum, lhs.data(), shape, &bound, {}, out.data(), shape);
  EXPECT_EQ(out[0], 0.0f);  // NaN > 0 is false: the bound
  EXPECT_EQ(out[3], 2.0f);
}

/*! \brief TVM's fold of one output, written per output: identity, then each element in order. */
std::vector<float> NaiveReduce(ReduceKind kind, const std::vector<float>& in, const Shape& shape,
                               int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = shape[axis];
  std::vector<float> out(outer * inner);
  for (int64_t o = 0; o < outer * inner; ++o) {
    auto x = [&](int64_t k) { return in[(o / inner * n + k) * inner + o % inner]; };
    float acc = kind == ReduceKind::kMin || kind == ReduceKind::kArgmin
                    ? std::numeric_limits<float>::max()
                    : (kind == ReduceKind::kMax || kind == ReduceKind::kArgmax
                           ? std::numeric_limits<float>::lowest()
                           : 0.0f);
    int64_t index = -1;
    for (int64_t k = 0; k < n; ++k) {
      const float v = x(k);
      switch (kind) {
        case ReduceKind::kMax:
          acc = acc > v ? acc : v;
          break;
        case ReduceKind::kMin:
          acc = acc < v ? acc : v;
          break;
        case ReduceKind::kArgmax:
          if (!(acc > v) && !(acc == v)) index = k;
          acc = acc > v ? acc : v;
          break;
        case ReduceKind::kArgmin:
          if (!(acc < v) && !(acc == v)) index = k;
          acc = acc < v ? acc : v;
          break;
        default:
          acc += v;
      }
    }
    if (kind == ReduceKind::kMean) acc /= static_cast<float>(n);
    if (kind == ReduceKind::kVariance) {
      const float mean = acc / static_cast<float>(n);
      acc = 0.0f;
      for (int64_t k = 0; k < n; ++k) acc += (x(k) - mean) * (x(k) - mean);
      acc /= static_cast<float>(n);
    }
    out[o] = kind == ReduceKind::kArgmax || kind == ReduceKind::kArgmin ? static_cast<float>(index)
                                                                        : acc;
  }
  return out;
}

bool SameFloat(float a, float b) { return std::isnan(a) ? std::isnan(b) : a == b; }

TEST(ReduceTest, EveryKindFoldsLikeTvmIncludingSpecialValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(29);
  // Rows of special values (TVM's build, measured: max of all -inf is -FLT_MAX, argmax -1; a NaN
  // survives only as the last element; ties keep the first index), then random rows.
  std::vector<float> in = {-inf, -inf, -inf, nan, 1.0f, 2.0f, 1.0f,  nan,  -inf,  5.0f, nan,  nan,
                           3.0f, 3.0f, 3.0f, inf, -inf, 0.0f, -0.0f, 0.0f, -1.0f, 2.0f, 2.0f, 1.0f};
  const std::vector<float> random = RandomVector(6 * 7 * 5, &rng, -4.0f, 4.0f);
  for (const auto kind : {ReduceKind::kSum, ReduceKind::kMean, ReduceKind::kMax, ReduceKind::kMin,
                          ReduceKind::kVariance, ReduceKind::kArgmax, ReduceKind::kArgmin}) {
    std::vector<float> out(6);
    Reduce(kind, in.data(), {6, 4}, {1}, out.data());
    const std::vector<float> want = NaiveReduce(kind, in, {6, 4}, 1);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(SameFloat(out[i], want[i])) << "kind " << static_cast<int>(kind) << " row " << i
                                              << ": " << out[i] << " vs " << want[i];
    }
    for (int64_t axis : {0, 1, 2}) {
      Shape kept = {6, 7, 5};
      kept[axis] = 1;
      std::vector<float> r(NumElements(kept));
      Reduce(kind, random.data(), {6, 7, 5}, {axis}, r.data());
      EXPECT_EQ(r, NaiveReduce(kind, random, {6, 7, 5}, axis))
          << "kind " << static_cast<int>(kind) << " axis " << axis;
    }
  }
  // argmax over several axes: the row-major index over the reduced dims.
  std::vector<float> flat(1);
  Reduce(ReduceKind::kArgmax, random.data(), {6, 7, 5}, {0, 1, 2}, flat.data());
  EXPECT_EQ(flat[0],
            static_cast<float>(std::max_element(random.begin(), random.end()) - random.begin()));
}

TEST(LogSoftmaxTest, RowsAreTheLogOfTheSoftmax) {
  std::mt19937 rng(31);
  const Shape shape = {3, 5, 4};
  const std::vector<float> in = RandomVector(NumElements(shape), &rng, -6.0f, 6.0f);
  for (int64_t axis : {0, 1, 2}) {
    std::vector<float> out(in.size());
    LogSoftmax(in.data(), shape, axis, out.data());
    std::vector<double> want(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      std::vector<int64_t> index = Unravel(static_cast<int64_t>(i), shape);
      double sum = 0.0;
      for (int64_t k = 0; k < shape[axis]; ++k) {
        index[axis] = k;
        sum += std::exp(static_cast<double>(in[Ravel(index, shape)]));
      }
      want[i] = in[i] - std::log(sum);
    }
    ExpectAllClose(out, want, "log_softmax axis " + std::to_string(axis), 1e-5, 1e-5);
  }
}

TEST(SoftmaxTest, MaskedRowsBecomeZeroOnlyWhenAsked) {
  const float inf = std::numeric_limits<float>::infinity();
  const Shape shape = {3, 4};
  const std::vector<float> in = {-inf, -inf, -inf, -inf, 1.0f, -inf,
                                 2.0f, 0.5f, 0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<float> plain(12), safe(12);
  Softmax(in.data(), shape, 1, plain.data());
  Softmax(in.data(), shape, 1, safe.data(), /*zero_masked_rows=*/true);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NE(plain[i], 0.0f);  // no live element: the plain softmax has nothing sensible
    EXPECT_EQ(safe[i], 0.0f);
  }
  for (int i = 4; i < 12; ++i) EXPECT_EQ(plain[i], safe[i]);
  EXPECT_LT(safe[5], 1e-30f);  // one -inf in a live row is a zero probability (exp saturates)
  // The same along a non-innermost axis.
  std::vector<float> column(12);
  const std::vector<float> transposed = {-inf, 1.0f, 0.0f, -inf, -inf, 0.0f,
                                         -inf, 2.0f, 0.0f, -inf, 0.5f, 0.0f};
  Softmax(transposed.data(), {4, 3}, 0, column.data(), true);
  for (int a = 0; a < 4; ++a) EXPECT_EQ(column[a * 3], 0.0f);
}

TEST(SoftmaxTest, NanBecomesZeroOnlyWhenAsked) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Shape shape = {4, 3};
  // An all -inf row, a row with NaN, a row with +inf (inf - inf), a plain row.
  const std::vector<float> in = {-inf, -inf, -inf, 1.0f, nan,   0.0f,
                                 inf,  0.0f, 1.0f, 0.5f, -1.0f, 2.0f};
  std::vector<float> plain(12), guarded(12);
  Softmax(in.data(), shape, 1, plain.data());
  Softmax(in.data(), shape, 1, guarded.data(), /*zero_masked_rows=*/false, /*zero_nan=*/true);
  int nans = 0;
  for (int i = 0; i < 12; ++i) {
    // where(isnan(s), 0, s), element by element, of the plain softmax.
    const float want = std::isnan(plain[i]) ? 0.0f : plain[i];
    nans += std::isnan(plain[i]) ? 1 : 0;
    EXPECT_EQ(guarded[i], want) << i;
    EXPECT_FALSE(std::signbit(guarded[i])) << i;
  }
  EXPECT_GE(nans, 3);  // at least the all -inf row is NaN before the guard
}

}  // namespace
}  // namespace kernels
}  // namespace example_npu
