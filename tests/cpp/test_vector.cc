/*!
 * \file tests/cpp/test_vector.cc
 * \brief Softmax, Unary, Binary and BatchNorm against naive double-precision references.
 */
#include <gtest/gtest.h>
#include <tvm/ffi/error.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/simd.h"
#include "test_util.h"

namespace example_npu {
namespace kernels {
namespace {

using test_util::ExpectAllClose;
using test_util::RandomVector;
using test_util::Ravel;
using test_util::ShapeToString;
using test_util::Unravel;

// ---------------------------------------------------------------------------------------------
// Softmax

/*! \brief softmax(x)_i = exp(x_i - max) / sum_j exp(x_j - max), walking each line by index. */
std::vector<double> NaiveSoftmax(const std::vector<float>& in, const Shape& shape, int64_t axis) {
  std::vector<double> out(in.size());
  for (int64_t flat = 0; flat < static_cast<int64_t>(in.size()); ++flat) {
    std::vector<int64_t> idx = Unravel(flat, shape);
    double max_v = -std::numeric_limits<double>::infinity();
    for (int64_t a = 0; a < shape[axis]; ++a) {
      idx[axis] = a;
      max_v = std::max(max_v, static_cast<double>(in[Ravel(idx, shape)]));
    }
    double sum = 0.0;
    for (int64_t a = 0; a < shape[axis]; ++a) {
      idx[axis] = a;
      sum += std::exp(in[Ravel(idx, shape)] - max_v);
    }
    out[flat] = std::exp(in[flat] - max_v) / sum;
  }
  return out;
}

TEST(SoftmaxTest, EveryAxisOfVariousShapes) {
  std::mt19937 rng(41);
  const std::vector<Shape> shapes = {
      {7}, {1}, {3, 5}, {40, 3}, {2, 3, 4}, {16, 16}, {2, 1, 17, 33}, {3, 32, 2}, {5, 1, 1, 9}};
  for (const Shape& shape : shapes) {
    const std::vector<float> in = RandomVector(NumElements(shape), &rng, -5.0f, 5.0f);
    for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis) {
      std::vector<float> out(in.size(), -1.0f);
      Softmax(in.data(), shape, axis, out.data());
      ExpectAllClose(out, NaiveSoftmax(in, shape, axis),
                     ShapeToString(shape) + " axis " + std::to_string(axis));
    }
  }
}

TEST(SoftmaxTest, LargeInputsDoNotOverflow) {
  // exp(1000) overflows float; subtracting the max first keeps every term in range.
  const std::vector<float> in = {1000.0f, 999.0f, 998.0f, -1000.0f, 500.0f, 1000.0f};
  for (int64_t axis : {0, 1}) {
    const Shape shape = {2, 3};
    std::vector<float> out(in.size());
    Softmax(in.data(), shape, axis, out.data());
    for (float v : out) EXPECT_TRUE(std::isfinite(v));
    ExpectAllClose(out, NaiveSoftmax(in, shape, axis), "large axis " + std::to_string(axis));
  }
}

TEST(SoftmaxTest, RejectsBadAxis) {
  std::vector<float> buf(6);
  EXPECT_THROW(Softmax(buf.data(), {2, 3}, 2, buf.data()), tvm::ffi::Error);
  EXPECT_THROW(Softmax(buf.data(), {2, 3}, -1, buf.data()), tvm::ffi::Error);
}

// ---------------------------------------------------------------------------------------------
// Unary

double NaiveUnary(UnaryOp op, double x, double lo, double hi) {
  const double pi = 3.14159265358979323846;
  switch (op) {
    case UnaryOp::kRelu:
      return x > 0 ? x : 0;
    case UnaryOp::kClip:
      return x < lo ? lo : (x > hi ? hi : x);
    case UnaryOp::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case UnaryOp::kTanh:
      return std::tanh(x);
    case UnaryOp::kGelu:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case UnaryOp::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
    case UnaryOp::kSqrt:
      return std::sqrt(x);
    case UnaryOp::kRsqrt:
      return 1.0 / std::sqrt(x);
    case UnaryOp::kExp:
      return std::exp(x);
    case UnaryOp::kLog:
      return std::log(x);
    case UnaryOp::kErf:
      return std::erf(x);
    case UnaryOp::kAbs:
      return std::fabs(x);
    case UnaryOp::kNegative:
      return -x;
  }
  return 0.0;
}

const std::vector<std::pair<UnaryOp, std::string>> kMathOps = {
    {UnaryOp::kSqrt, "sqrt"},         {UnaryOp::kRsqrt, "rsqrt"}, {UnaryOp::kExp, "exp"},
    {UnaryOp::kLog, "log"},           {UnaryOp::kErf, "erf"},     {UnaryOp::kAbs, "abs"},
    {UnaryOp::kNegative, "negative"},
};

TEST(UnaryTest, MathOpsMatchDefinitionsOnTheirDomain) {
  std::mt19937 rng(44);
  const std::vector<float> positive = RandomVector(5000, &rng, 1e-3f, 20.0f);  // > one chunk
  const std::vector<float> any = RandomVector(5000, &rng, -20.0f, 20.0f);
  for (const auto& [op, name] : kMathOps) {
    const bool needs_positive =
        op == UnaryOp::kSqrt || op == UnaryOp::kRsqrt || op == UnaryOp::kLog;
    const std::vector<float>& input = needs_positive ? positive : any;
    std::vector<float> out(input.size(), -123.0f);
    Unary(op, input.data(), out.data(), static_cast<int64_t>(input.size()));
    std::vector<double> expected(input.size());
    for (size_t i = 0; i < input.size(); ++i) expected[i] = NaiveUnary(op, input[i], 0, 0);
    ExpectAllClose(out, expected, name, 1e-6, 0.0);
  }
}

TEST(UnaryTest, MathOpsAreTheCLibrarysFunctionsOnSpecialValues) {
  // TVM's LLVM build calls sqrtf / expf / logf / erff (rsqrt as 1 / sqrtf): the same bits,
  // NaN and infinities included, for any input.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> in = {nan,    inf,   -inf,   0.0f, -0.0f, 1e-40f, -1e-40f, 1e30f,
                                 -1e30f, 88.8f, -104.f, 1.0f, -1.0f, 4.0f,   -4.0f,   0.5f};
  for (const auto& [op, name] : kMathOps) {
    std::vector<float> out(in.size());
    Unary(op, in.data(), out.data(), static_cast<int64_t>(in.size()));
    for (size_t i = 0; i < in.size(); ++i) {
      const float x = in[i];
      float expected = 0.0f;
      switch (op) {
        case UnaryOp::kSqrt:
          expected = std::sqrt(x);
          break;
        case UnaryOp::kRsqrt:
          expected = 1.0f / std::sqrt(x);
          break;
        case UnaryOp::kExp:
          expected = std::exp(x);
          break;
        case UnaryOp::kLog:
          expected = std::log(x);
          break;
        case UnaryOp::kErf:
          expected = std::erf(x);
          break;
        case UnaryOp::kAbs:
          expected = std::fabs(x);
          break;
        default:
          expected = -x;
      }
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(out[i])) << name << "(" << x << ")";
      } else {
        EXPECT_EQ(std::signbit(out[i]), std::signbit(expected)) << name << "(" << x << ")";
        EXPECT_EQ(out[i], expected) << name << "(" << x << ")";
      }
    }
  }
}

TEST(UnaryTest, AllOpsMatchDefinitions) {
  std::mt19937 rng(42);
  std::vector<float> in = RandomVector(1000, &rng, -6.0f, 6.0f);
  // Extremes: sigmoid must not produce NaN/inf, clip and relu must pass through exactly.
  const std::vector<float> extremes = {0.0f,   -0.0f,   1e-7f, -1e-7f, 30.0f, -30.0f, 88.0f, -88.0f,
                                       100.0f, -100.0f, 1e30f, -1e30f, 0.5f,  -0.25f, 1.0f};
  in.insert(in.end(), extremes.begin(), extremes.end());
  const std::vector<std::pair<UnaryOp, std::string>> ops = {
      {UnaryOp::kRelu, "relu"}, {UnaryOp::kClip, "clip"}, {UnaryOp::kSigmoid, "sigmoid"},
      {UnaryOp::kTanh, "tanh"}, {UnaryOp::kGelu, "gelu"}, {UnaryOp::kGeluTanh, "gelu_tanh"},
  };
  const float lo = -0.5f;
  const float hi = 2.0f;
  for (const auto& [op, name] : ops) {
    // GeluTanh cubes x: keep 1e30 out of its input so the reference is not inf * 0.
    std::vector<float> input = in;
    if (op == UnaryOp::kGeluTanh) {
      for (float& x : input) x = std::max(std::min(x, 100.0f), -100.0f);
    }
    std::vector<float> out(input.size(), -123.0f);
    Unary(op, input.data(), out.data(), static_cast<int64_t>(input.size()), lo, hi);
    std::vector<double> expected(input.size());
    for (size_t i = 0; i < input.size(); ++i) expected[i] = NaiveUnary(op, input[i], lo, hi);
    for (float v : out) EXPECT_FALSE(std::isnan(v)) << name;
    ExpectAllClose(out, expected, name);
  }
}

TEST(UnaryTest, NaNFollowsTvmsLlvmBuild) {
  // TVM lowers relu to max(x, 0) and clip to max(min(x, hi), lo) with NaN-ignoring max / min.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> in = {nan, -nan, 3.0f, -3.0f};
  std::vector<float> relu(4), clip(4);
  Unary(UnaryOp::kRelu, in.data(), relu.data(), 4, 0.0f, 0.0f);
  Unary(UnaryOp::kClip, in.data(), clip.data(), 4, 0.0f, 6.0f);
  EXPECT_EQ(relu, (std::vector<float>{0.0f, 0.0f, 3.0f, 0.0f}));
  EXPECT_EQ(clip, (std::vector<float>{6.0f, 6.0f, 3.0f, 0.0f}));
}

TEST(UnaryTest, SpecialValuesFollowTvmsFormulas) {
  // TVM: sigmoid = 1 / (1 + e^-x), tanh = (1 - e^-2x) / (1 + e^-2x) for x >= 0 (mirrored), with
  // libm's expf: NaN stays NaN, the infinities saturate, e^x overflows to inf above ~88.72.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> in = {nan, inf, -inf, 88.8f, -88.8f, 100.0f, -100.0f, -104.5f};
  std::vector<float> sigmoid(in.size()), tanh(in.size()), gelu(in.size());
  const int64_t n = static_cast<int64_t>(in.size());
  Unary(UnaryOp::kSigmoid, in.data(), sigmoid.data(), n);
  Unary(UnaryOp::kTanh, in.data(), tanh.data(), n);
  Unary(UnaryOp::kGelu, in.data(), gelu.data(), n);
  for (size_t i = 0; i < in.size(); ++i) {
    const double x = in[i];
    const double expected_sigmoid = 1.0 / (1.0 + static_cast<double>(std::exp(-in[i])));
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(sigmoid[i]) && std::isnan(tanh[i]) && std::isnan(gelu[i]));
      continue;
    }
    EXPECT_FLOAT_EQ(sigmoid[i], static_cast<float>(expected_sigmoid)) << x;
    EXPECT_FLOAT_EQ(tanh[i], static_cast<float>(std::tanh(x))) << x;
  }
  EXPECT_EQ(sigmoid[6], 0.0f);  // 1 / (1 + inf), not ~4e-39
  EXPECT_EQ(gelu[1], inf);
  EXPECT_TRUE(std::isnan(gelu[2]));  // -inf * (1 + erf(-inf)) = -inf * 0
}

TEST(UnaryTest, ExpMatchesLibmOverTheWholeRange) {
  // Normal results to a few ulp; overflow to inf, subnormals and 0 exactly where expf has them.
  std::vector<float> x;
  for (float v = -110.0f; v <= 90.0f; v += 0.0137f) x.push_back(v);
  for (size_t i = 0; i < x.size(); i += simd::kLanes) {
    float lanes[simd::kLanes] = {};
    std::copy(x.begin() + i, x.begin() + std::min(i + simd::kLanes, x.size()), lanes);
    float got[simd::kLanes];
    simd::Store(got, simd::Exp(simd::Load(lanes)));
    for (int k = 0; k < simd::kLanes && i + k < x.size(); ++k) {
      const float want = std::exp(lanes[k]);
      if (std::isinf(want) || want == 0.0f) {
        EXPECT_EQ(got[k], want) << lanes[k];
      } else {
        // A few ulp of the value, or of the smallest subnormal.
        EXPECT_NEAR(got[k], want, 4e-7 * want + 3e-45) << lanes[k];
      }
    }
  }
}

TEST(UnaryTest, ExpOrZeroIsExpOrZeroBelowTheNormalRange) {
  // Exp's bits for normal results, 0 where Exp gives a subnormal, inf and NaN as Exp.
  std::vector<float> x;
  for (float v = -110.0f; v <= 90.0f; v += 0.0137f) x.push_back(v);
  x.insert(x.end(),
           {-87.3f, std::nextafter(-87.3f, -100.0f), 88.7f, -std::numeric_limits<float>::infinity(),
            std::numeric_limits<float>::quiet_NaN()});
  for (size_t i = 0; i < x.size(); i += simd::kLanes) {
    float lanes[simd::kLanes] = {};
    std::copy(x.begin() + i, x.begin() + std::min(i + simd::kLanes, x.size()), lanes);
    float got[simd::kLanes], exp[simd::kLanes];
    simd::Store(got, simd::ExpOrZero(simd::Load(lanes)));
    simd::Store(exp, simd::Exp(simd::Load(lanes)));
    for (int k = 0; k < simd::kLanes; ++k) {
      if (std::isnan(lanes[k])) {
        EXPECT_TRUE(std::isnan(got[k]));
      } else if (lanes[k] < -87.3f) {
        EXPECT_EQ(got[k], 0.0f) << lanes[k];
      } else {
        EXPECT_EQ(got[k], exp[k]) << lanes[k];
        EXPECT_TRUE(std::isinf(got[k]) || std::isnormal(got[k])) << lanes[k];
      }
    }
  }
}

TEST(SoftmaxTest, RowsWithSpecialValuesAsTvm) {
  // TVM: max (init lowest), e^(x - max), sum, divide. +inf or NaN anywhere, or a row of -inf,
  // gives NaN everywhere; -inf next to finite values gives exactly 0.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<float>> rows = {
      {inf, 1, 2, 3, 4, 5, 6, 7, 8},
      {1, 2, nan, 3, 4, 5, 6, 7, 8},
      {-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf},
      {-inf, 1, 2, 3, 4, 5, 6, 7, -inf}};
  for (const auto& row : rows) {
    // Along the last axis and, transposed, along the first.
    for (int64_t axis : {1, 0}) {
      const int64_t n = static_cast<int64_t>(row.size());
      std::vector<float> in = row;
      Shape shape = axis == 1 ? Shape{1, n} : Shape{n, 1};
      std::vector<float> out(row.size());
      Softmax(in.data(), shape, axis, out.data());
      const bool all_nan =
          std::any_of(row.begin(), row.end(), [&](float v) { return std::isnan(v) || v == inf; }) ||
          std::all_of(row.begin(), row.end(), [&](float v) { return v == -inf; });
      for (size_t i = 0; i < row.size(); ++i) {
        if (all_nan) {
          EXPECT_TRUE(std::isnan(out[i])) << i;
        } else if (row[i] == -inf) {
          EXPECT_EQ(out[i], 0.0f) << i;
        } else {
          EXPECT_GT(out[i], 0.0f) << i;
        }
      }
    }
  }
}

TEST(UnaryTest, KnownValues) {
  const std::vector<float> in = {-1.0f, 0.0f, 1.0f, 3.0f};
  std::vector<float> out(4);
  Unary(UnaryOp::kRelu, in.data(), out.data(), 4);
  EXPECT_EQ(out, (std::vector<float>{0.0f, 0.0f, 1.0f, 3.0f}));
  Unary(UnaryOp::kClip, in.data(), out.data(), 4, 0.0f, 2.0f);
  EXPECT_EQ(out, (std::vector<float>{0.0f, 0.0f, 1.0f, 2.0f}));
  Unary(UnaryOp::kSigmoid, in.data(), out.data(), 4);
  EXPECT_NEAR(out[0], 0.26894142f, 1e-6);
  EXPECT_EQ(out[1], 0.5f);
  Unary(UnaryOp::kGelu, in.data(), out.data(), 4);
  EXPECT_NEAR(out[0], -0.15865525f, 1e-6);
  EXPECT_NEAR(out[2], 0.84134475f, 1e-6);
  Unary(UnaryOp::kGeluTanh, in.data(), out.data(), 4);
  EXPECT_NEAR(out[2], 0.84119199f, 1e-6);
}

// ---------------------------------------------------------------------------------------------
// Binary

double NaiveBinary(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSubtract:
      return a - b;
    case BinaryOp::kMultiply:
      return a * b;
    case BinaryOp::kDivide:
      return a / b;
    case BinaryOp::kPower:
      return std::pow(a, b);
    default:
      break;
  }
  return 0.0;
}

Shape BroadcastShape(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    out[i] = std::max(da, db);
  }
  return out;
}

/*! \brief Index of an operand element feeding output index idx (right-aligned broadcasting). */
int64_t OperandIndex(const std::vector<int64_t>& idx, const Shape& shape) {
  std::vector<int64_t> oi(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    oi[d] = shape[d] == 1 ? 0 : idx[d + idx.size() - shape.size()];
  }
  return Ravel(oi, shape);
}

TEST(BinaryTest, BroadcastingShapes) {
  std::mt19937 rng(43);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {2, 3, 4}},
      {{}, {}},
      {{2, 3}, {}},
      {{}, {2, 3}},
      {{2, 1, 4}, {3, 1}},
      {{3, 1}, {2, 1, 4}},
      {{1}, {5}},
      {{5}, {1}},
      {{3, 1}, {1, 4}},
      {{4}, {2, 3, 4}},
      {{2, 3, 4}, {3, 1}},
      {{1, 1, 1}, {}},
      {{5, 1, 3, 1}, {4, 1, 2}},
      {{1, 1}, {2, 3}},
      {{2, 3}, {1, 1}},
      {{33, 17}, {17}},
      {{2, 1, 1, 40}, {2, 3, 5, 1}},
      {{1, 3, 1}, {2, 1, 4}},
      {{16, 1}, {16, 16}},
  };
  const std::vector<BinaryOp> ops = {BinaryOp::kAdd, BinaryOp::kSubtract, BinaryOp::kMultiply,
                                     BinaryOp::kDivide, BinaryOp::kPower};
  for (const auto& [lhs_shape, rhs_shape] : cases) {
    const Shape out_shape = BroadcastShape(lhs_shape, rhs_shape);
    const std::vector<float> signed_lhs = RandomVector(NumElements(lhs_shape), &rng, -2.0f, 2.0f);
    std::vector<float> positive_lhs = signed_lhs;  // power's base: a real result
    for (float& x : positive_lhs) x = std::fabs(x) + 0.1f;
    // Divisors are kept away from zero so the relative tolerance stays meaningful.
    const std::vector<float> rhs = RandomVector(NumElements(rhs_shape), &rng, 0.5f, 2.0f);
    for (BinaryOp op : ops) {
      const std::vector<float>& lhs = op == BinaryOp::kPower ? positive_lhs : signed_lhs;
      std::vector<float> out(NumElements(out_shape), -123.0f);
      Binary(op, lhs.data(), lhs_shape, rhs.data(), rhs_shape, out.data(), out_shape);
      std::vector<double> expected(out.size());
      for (int64_t flat = 0; flat < static_cast<int64_t>(out.size()); ++flat) {
        const std::vector<int64_t> idx = Unravel(flat, out_shape);
        expected[flat] =
            NaiveBinary(op, lhs[OperandIndex(idx, lhs_shape)], rhs[OperandIndex(idx, rhs_shape)]);
      }
      ExpectAllClose(out, expected,
                     ShapeToString(lhs_shape) + " op" + std::to_string(static_cast<int>(op)) + " " +
                         ShapeToString(rhs_shape));
    }
  }
}

// The comparisons on special values, against C++'s own ordered comparison of the same floats (TVM's
// LLVM build's): NaN compares false, not_equal included; infinities and signed zeros as IEEE.
TEST(BinaryTest, ComparisonsGiveAFloatMaskAsCppCompares) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> values = {nan, -kInf, -2.5f, -0.0f, 0.0f, 1.0f, 2.5f, kInf};
  const int64_t n = static_cast<int64_t>(values.size());
  const Shape lhs_shape = {n, 1}, rhs_shape = {n}, out_shape = {n, n};
  const std::vector<std::pair<BinaryOp, bool (*)(float, float)>> ops = {
      {BinaryOp::kGreater, [](float a, float b) { return a > b; }},
      {BinaryOp::kGreaterEqual, [](float a, float b) { return a >= b; }},
      {BinaryOp::kLess, [](float a, float b) { return a < b; }},
      {BinaryOp::kLessEqual, [](float a, float b) { return a <= b; }},
      {BinaryOp::kEqual, [](float a, float b) { return a == b; }},
      {BinaryOp::kNotEqual, [](float a, float b) { return a < b || a > b; }},
  };
  for (const auto& [op, compare] : ops) {
    std::vector<float> out(n * n, -1.0f);
    Binary(op, values.data(), lhs_shape, values.data(), rhs_shape, out.data(), out_shape);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        EXPECT_EQ(out[i * n + j], compare(values[i], values[j]) ? 1.0f : 0.0f)
            << "op " << static_cast<int>(op) << ": " << values[i] << " vs " << values[j];
      }
    }
  }
}

TEST(WhereTest, SelectsWithBroadcastingAndNeverShowsTheOtherBranch) {
  std::mt19937 rng(47);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // (cond, x, y): a causal mask over heads, a scalar fill, a per-row condition, rank growth.
  const std::vector<std::array<Shape, 3>> cases = {
      {{{1, 1, 5, 5}, {2, 3, 5, 5}, {}}},
      {{{2, 3, 5, 5}, {2, 3, 5, 5}, {2, 3, 5, 5}}},
      {{{4, 1}, {1, 6}, {4, 6}}},
      {{{6}, {}, {3, 1, 6}}},
      {{{}, {2, 3}, {3}}},
  };
  for (const auto& [cond_shape, x_shape, y_shape] : cases) {
    const Shape out_shape = BroadcastShape(BroadcastShape(cond_shape, x_shape), y_shape);
    std::vector<float> cond = RandomVector(NumElements(cond_shape), &rng, -1.0f, 1.0f);
    for (float& c : cond) c = c > 0.0f ? 1.0f : 0.0f;
    std::vector<float> x = RandomVector(NumElements(x_shape), &rng);
    std::vector<float> y = RandomVector(NumElements(y_shape), &rng);
    x[0] = nan;  // wherever it is not selected it must not appear
    y[y.size() - 1] = -inf;
    std::vector<float> out(NumElements(out_shape), -123.0f);
    Where(cond.data(), cond_shape, x.data(), x_shape, y.data(), y_shape, out.data(), out_shape);
    for (int64_t flat = 0; flat < static_cast<int64_t>(out.size()); ++flat) {
      const std::vector<int64_t> idx = Unravel(flat, out_shape);
      const float expected = cond[OperandIndex(idx, cond_shape)] != 0.0f
                                 ? x[OperandIndex(idx, x_shape)]
                                 : y[OperandIndex(idx, y_shape)];
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(out[flat])) << flat;
      } else {
        EXPECT_EQ(out[flat], expected) << ShapeToString(out_shape) << " element " << flat;
      }
    }
  }
}

TEST(BinaryTest, RejectsIncompatibleShapes) {
  std::vector<float> buf(64);
  EXPECT_THROW(Binary(BinaryOp::kAdd, buf.data(), {2, 3}, buf.data(), {4}, buf.data(), {2, 3}),
               tvm::ffi::Error);
  EXPECT_THROW(Binary(BinaryOp::kAdd, buf.data(), {2, 3}, buf.data(), {3}, buf.data(), {3}),
               tvm::ffi::Error);
}

// ---------------------------------------------------------------------------------------------
// BatchNorm

TEST(BatchNormTest, EveryAxisAndFlagCombination) {
  std::mt19937 rng(44);
  const std::vector<Shape> shapes = {{6}, {2, 3, 4, 5}, {1, 17, 3}, {4, 33}};
  for (const Shape& shape : shapes) {
    const std::vector<float> in = RandomVector(NumElements(shape), &rng, -3.0f, 3.0f);
    for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis) {
      const int64_t channels = shape[axis];
      const std::vector<float> gamma = RandomVector(channels, &rng, -2.0f, 2.0f);
      const std::vector<float> beta = RandomVector(channels, &rng, -1.0f, 1.0f);
      const std::vector<float> mean = RandomVector(channels, &rng, -1.0f, 1.0f);
      const std::vector<float> var = RandomVector(channels, &rng, 0.1f, 2.0f);
      const float eps = 1e-5f;
      for (bool center : {false, true}) {
        for (bool scale : {false, true}) {
          std::vector<float> out(in.size(), -123.0f);
          BatchNorm(in.data(), shape, axis, gamma.data(), beta.data(), mean.data(), var.data(), eps,
                    center, scale, out.data());
          std::vector<double> expected(in.size());
          for (int64_t flat = 0; flat < static_cast<int64_t>(in.size()); ++flat) {
            const int64_t c = Unravel(flat, shape)[axis];
            double v = (in[flat] - static_cast<double>(mean[c])) /
                       std::sqrt(static_cast<double>(var[c]) + eps);
            if (scale) v *= gamma[c];
            if (center) v += beta[c];
            expected[flat] = v;
          }
          ExpectAllClose(out, expected,
                         ShapeToString(shape) + " axis " + std::to_string(axis) + " center " +
                             std::to_string(center) + " scale " + std::to_string(scale));
        }
      }
    }
  }
}

TEST(BatchNormTest, KnownValues) {
  // Two channels on axis 1: (x - mean) / sqrt(var + eps) * gamma + beta.
  const std::vector<float> in = {1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<float> gamma = {2.0f, 0.5f};
  const std::vector<float> beta = {1.0f, -1.0f};
  const std::vector<float> mean = {1.0f, 2.0f};
  const std::vector<float> var = {4.0f, 0.25f};
  std::vector<float> out(4);
  BatchNorm(in.data(), {2, 2}, 1, gamma.data(), beta.data(), mean.data(), var.data(), 0.0f, true,
            true, out.data());
  EXPECT_EQ(out, (std::vector<float>{1.0f, -1.0f, 3.0f, 1.0f}));
}

}  // namespace
}  // namespace kernels
}  // namespace example_npu
