/*!
 * \file kernels/vector.cc
 * \brief Vector-engine kernels: softmax, activations, broadcasting binary ops, batch norm.
 */
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/broadcast.h"
#include "kernels/kernels.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace example_npu {
namespace kernels {
namespace {

/*! \brief A shape viewed as [outer, axis, inner] around one axis. */
struct AxisSplit {
  int64_t outer;
  int64_t axis;
  int64_t inner;
};

AxisSplit SplitAt(const Shape& shape, int64_t axis) {
  TVM_FFI_ICHECK(axis >= 0 && axis < static_cast<int64_t>(shape.size()))
      << "axis " << axis << " out of range for rank " << shape.size();
  AxisSplit s{1, shape[axis], 1};
  for (int64_t i = 0; i < axis; ++i) s.outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) s.inner *= shape[i];
  return s;
}

// Elements per parallel chunk: enough work that a thread hand-off (~microseconds) pays off.
constexpr int64_t kCheapGrain = 32 * 1024;          // loads/stores and one arithmetic op
constexpr int64_t kTranscendentalGrain = 4 * 1024;  // a polynomial per element

/*! \brief out[i] = f(in[i]) in 8-lane vectors; the tail goes through a zero-padded vector. */
template <typename F>
EXAMPLE_NPU_INLINE void MapV8(const float* in, float* out, int64_t n, F f) {
  int64_t i = 0;
  for (; i + simd::kLanes <= n; i += simd::kLanes) simd::Store(out + i, f(simd::Load(in + i)));
  if (i == n) return;
  float buf[simd::kLanes] = {0.0f};
  std::copy(in + i, in + n, buf);
  simd::Store(buf, f(simd::Load(buf)));
  std::copy(buf, buf + (n - i), out + i);
}

/*! \brief out[i] = f(a[i], b[i]) in 8-lane vectors. */
template <typename F>
EXAMPLE_NPU_INLINE void MapBinaryV8(const float* a, const float* b, float* out, int64_t n, F f) {
  int64_t i = 0;
  for (; i + simd::kLanes <= n; i += simd::kLanes) {
    simd::Store(out + i, f(simd::Load(a + i), simd::Load(b + i)));
  }
  for (; i < n; ++i) out[i] = f(simd::Splat(a[i]), simd::Splat(b[i]))[0];
}

/*! \brief ExpOrZero on one value, so a softmax's tail rounds exactly like its vector body. */
inline float ExpOrZeroScalar(float x) { return simd::ExpOrZero(simd::Splat(x))[0]; }

/*! \brief Softmax of one contiguous row: vector max, then exp and sum, then one scale. */
void SoftmaxRow(const float* in, float* out, int64_t n) {
  const int64_t vec_end = n - n % simd::kLanes;
  float max_v = -std::numeric_limits<float>::infinity();
  if (vec_end > 0) {
    simd::V8 m = simd::Load(in);
    for (int64_t i = simd::kLanes; i < vec_end; i += simd::kLanes)
      m = simd::Max(m, simd::Load(in + i));
    max_v = simd::HorizontalMax(m);
  }
  for (int64_t i = vec_end; i < n; ++i) max_v = std::max(max_v, in[i]);
  simd::V8 acc = simd::Splat(0.0f);
  for (int64_t i = 0; i < vec_end; i += simd::kLanes) {
    const simd::V8 e = simd::ExpOrZero(simd::Load(in + i) - max_v);
    simd::Store(out + i, e);
    acc += e;
  }
  float sum = simd::HorizontalSum(acc);
  for (int64_t i = vec_end; i < n; ++i) {
    out[i] = ExpOrZeroScalar(in[i] - max_v);
    sum += out[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) out[i] *= inv;
}

/*!
 * \brief Softmax over the middle dim of an [axis, inner] block. Reductions are carried as
 * inner-length vectors so every loop walks memory contiguously instead of striding by inner.
 */
void SoftmaxStrided(const float* in, float* out, int64_t axis, int64_t inner, float* max_v,
                    float* sum) {
  std::copy(in, in + inner, max_v);
  for (int64_t a = 1; a < axis; ++a) {
    const float* row = in + a * inner;
    for (int64_t j = 0; j < inner; ++j) max_v[j] = std::max(max_v[j], row[j]);
  }
  std::fill(sum, sum + inner, 0.0f);
  for (int64_t a = 0; a < axis; ++a) {
    const float* row = in + a * inner;
    float* out_row = out + a * inner;
    MapBinaryV8(row, max_v, out_row, inner,
                [](simd::V8 x, simd::V8 m) { return simd::ExpOrZero(x - m); });
    for (int64_t j = 0; j < inner; ++j) sum[j] += out_row[j];
  }
  for (int64_t j = 0; j < inner; ++j) sum[j] = 1.0f / sum[j];
  for (int64_t a = 0; a < axis; ++a) {
    float* out_row = out + a * inner;
    for (int64_t j = 0; j < inner; ++j) out_row[j] *= sum[j];
  }
}

// One loop per activation, so each gets its own tight vectorised body. NaN follows TVM's LLVM
// build, whose max / min ignore a NaN operand: relu(NaN) = 0 and clip(NaN) = max(min(NaN, hi),
// lo) = hi.
void ReluRange(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
  // A comparison, not std::max: NaN > 0 is false, so NaN gives 0 (and it vectorises to maxps).
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void ClipRange(const float* __restrict__ in, float* __restrict__ out, int64_t n, float lo,
               float hi) {
  for (int64_t i = 0; i < n; ++i) {
    const float upper = in[i] < hi ? in[i] : hi;  // NaN < hi is false: NaN becomes hi
    out[i] = upper > lo ? upper : lo;
  }
}

void SigmoidRange(const float* in, float* out, int64_t n) {
  MapV8(in, out, n, [](simd::V8 x) { return simd::Sigmoid(x); });
}

void TanhRange(const float* in, float* out, int64_t n) {
  MapV8(in, out, n, [](simd::V8 x) { return simd::Tanh(x); });
}

void GeluRange(const float* in, float* out, int64_t n) {
  const float inv_sqrt2 = static_cast<float>(1.0 / std::sqrt(2.0));
  MapV8(in, out, n,
        [inv_sqrt2](simd::V8 x) { return 0.5f * x * (1.0f + simd::Erf(x * inv_sqrt2)); });
}

void GeluTanhRange(const float* in, float* out, int64_t n) {
  constexpr float k = 0.7978845608028654f;  // sqrt(2 / pi)
  MapV8(in, out, n, [k](simd::V8 x) {
    return 0.5f * x * (1.0f + simd::Tanh(k * (x + 0.044715f * x * x * x)));
  });
}

/*! \brief out[i] = f(in[i]): the C library's scalar functions, which TVM's build calls too. */
template <typename F>
void MapScalar(const float* __restrict__ in, float* __restrict__ out, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(in[i]);
}

void SqrtRange(const float* in, float* out, int64_t n) {
  MapScalar(in, out, n, [](float x) { return std::sqrt(x); });
}

void RsqrtRange(const float* in, float* out, int64_t n) {
  MapScalar(in, out, n, [](float x) { return 1.0f / std::sqrt(x); });
}

void ExpRange(const float* in, float* out, int64_t n) {
  MapScalar(in, out, n, [](float x) { return std::exp(x); });
}

void LogRange(const float* in, float* out, int64_t n) {
  MapScalar(in, out, n, [](float x) { return std::log(x); });
}

void ErfRange(const float* in, float* out, int64_t n) {
  MapScalar(in, out, n, [](float x) { return std::erf(x); });
}

void AbsRange(const float* in, float* out, int64_t n) {
  MapScalar(in, out, n, [](float x) { return std::fabs(x); });
}

void NegativeRange(const float* in, float* out, int64_t n) {
  MapScalar(in, out, n, [](float x) { return -x; });
}

void RoundRange(const float* in, float* out, int64_t n) {
  MapScalar(in, out, n, [](float x) { return std::nearbyint(x); });  // half to even
}

void FloorRange(const float* in, float* out, int64_t n) {
  MapScalar(in, out, n, [](float x) { return std::floor(x); });
}

void CeilRange(const float* in, float* out, int64_t n) {
  MapScalar(in, out, n, [](float x) { return std::ceil(x); });
}

struct AddOp {
  float operator()(float a, float b) const { return a + b; }
};
struct SubtractOp {
  float operator()(float a, float b) const { return a - b; }
};
struct MultiplyOp {
  float operator()(float a, float b) const { return a * b; }
};
struct DivideOp {
  float operator()(float a, float b) const { return a / b; }
};
struct MaximumOp {
  float operator()(float a, float b) const { return a > b ? a : b; }
};
struct MinimumOp {
  float operator()(float a, float b) const { return a < b ? a : b; }
};
struct PowerOp {
  float operator()(float a, float b) const { return std::pow(a, b); }
};
struct PreluOp {
  float operator()(float a, float b) const { return a > 0.0f ? a : a * b; }
};
struct GreaterOp {
  float operator()(float a, float b) const { return a > b ? 1.0f : 0.0f; }
};
struct GreaterEqualOp {
  float operator()(float a, float b) const { return a >= b ? 1.0f : 0.0f; }
};
struct LessOp {
  float operator()(float a, float b) const { return a < b ? 1.0f : 0.0f; }
};
struct LessEqualOp {
  float operator()(float a, float b) const { return a <= b ? 1.0f : 0.0f; }
};
struct EqualOp {
  float operator()(float a, float b) const { return a == b ? 1.0f : 0.0f; }
};
// Ordered, as TVM's LLVM build compares (fcmp one): NaN is not "not equal" to anything.
struct NotEqualOp {
  float operator()(float a, float b) const { return a < b || a > b ? 1.0f : 0.0f; }
};

/*! \brief Dispatches on the op once per row, not per element. */
void BinaryRowOf(BinaryOp op, const float* lhs, int64_t ls, const float* rhs, int64_t rs,
                 float* out, int64_t n) {
  switch (op) {
    case BinaryOp::kAdd:
      return BroadcastRow(AddOp{}, lhs, ls, rhs, rs, out, n);
    case BinaryOp::kSubtract:
      return BroadcastRow(SubtractOp{}, lhs, ls, rhs, rs, out, n);
    case BinaryOp::kMultiply:
      return BroadcastRow(MultiplyOp{}, lhs, ls, rhs, rs, out, n);
    case BinaryOp::kDivide:
      return BroadcastRow(DivideOp{}, lhs, ls, rhs, rs, out, n);
    case BinaryOp::kMaximum:
      return BroadcastRow(MaximumOp{}, lhs, ls, rhs, rs, out, n);
    case BinaryOp::kMinimum:
      return BroadcastRow(MinimumOp{}, lhs, ls, rhs, rs, out, n);
    case BinaryOp::kPower:
      return BroadcastRow(PowerOp{}, lhs, ls, rhs, rs, out, n);
    case BinaryOp::kPrelu:
      return BroadcastRow(PreluOp{}, lhs, ls, rhs, rs, out, n);
    case BinaryOp::kGreater:
      return BroadcastRow(GreaterOp{}, lhs, ls, rhs, rs, out, n);
    case BinaryOp::kGreaterEqual:
      return BroadcastRow(GreaterEqualOp{}, lhs, ls, rhs, rs, out, n);
    case BinaryOp::kLess:
      return BroadcastRow(LessOp{}, lhs, ls, rhs, rs, out, n);
    case BinaryOp::kLessEqual:
      return BroadcastRow(LessEqualOp{}, lhs, ls, rhs, rs, out, n);
    case BinaryOp::kEqual:
      return BroadcastRow(EqualOp{}, lhs, ls, rhs, rs, out, n);
    case BinaryOp::kNotEqual:
      return BroadcastRow(NotEqualOp{}, lhs, ls, rhs, rs, out, n);
  }
}

/*! \brief Rows [row_begin, row_end) of the broadcast plan (a row is the merged innermost dim). */
void BinaryRows(BinaryOp op, const float* lhs, const float* rhs, float* out,
                const BroadcastPlan& plan, int64_t row_begin, int64_t row_end) {
  const size_t rank = plan.dims.size();
  const int64_t inner = plan.dims[rank - 1];
  ForEachBroadcastRow(plan, row_begin, row_end, [&](int64_t row, int64_t lhs_off, int64_t rhs_off) {
    BinaryRowOf(op, lhs + lhs_off, plan.lhs_strides[rank - 1], rhs + rhs_off,
                plan.rhs_strides[rank - 1], out + row * inner, inner);
  });
}

/*! \brief Rows [begin, end) of an [outer, axis, inner] batch norm, one channel per row. */
void BatchNormRows(const float* input, float* out, int64_t axis, int64_t inner, const float* mean,
                   const float* inv_std, const float* mul, const float* add, int64_t begin,
                   int64_t end) {
  for (int64_t row = begin; row < end; ++row) {
    const int64_t c = row % axis;
    const float* __restrict__ in_row = input + row * inner;
    float* __restrict__ out_row = out + row * inner;
    const float mu = mean[c];
    const float s = inv_std[c];
    const float m = mul[c];
    const float a = add[c];
    for (int64_t i = 0; i < inner; ++i) out_row[i] = (in_row[i] - mu) * s * m + a;
  }
}

/*! \brief Zeroes every softmax row of an [outer, axis, inner] block whose inputs are all -inf. */
void ZeroMaskedRows(const float* input, const AxisSplit& s, float* out) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t j = 0; j < s.inner; ++j) {
      const int64_t base = o * s.axis * s.inner + j;
      bool masked = true;
      for (int64_t a = 0; a < s.axis && masked; ++a) masked = input[base + a * s.inner] == kNegInf;
      if (!masked) continue;
      for (int64_t a = 0; a < s.axis; ++a) out[base + a * s.inner] = 0.0f;
    }
  }
}

/*! \brief Rows per parallel chunk for rows of `row_len` elements and a per-element grain. */
inline int64_t RowGrain(int64_t row_len, int64_t element_grain) {
  return std::max<int64_t>(1, element_grain / std::max<int64_t>(row_len, 1));
}

}  // namespace

namespace {

std::vector<int64_t> AlignedStrides(const Shape& shape, const Shape& out_shape) {
  TVM_FFI_ICHECK_LE(shape.size(), out_shape.size()) << "Binary: operand rank exceeds output rank";
  const size_t offset = out_shape.size() - shape.size();
  std::vector<int64_t> strides(out_shape.size(), 0);
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    TVM_FFI_ICHECK(shape[i] == out_shape[offset + i] || shape[i] == 1)
        << "Binary: dim " << shape[i] << " does not broadcast to " << out_shape[offset + i];
    strides[offset + i] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

}  // namespace

BroadcastPlan MakeBroadcastPlan(const Shape& lhs_shape, const Shape& rhs_shape,
                                const Shape& out_shape) {
  const std::vector<int64_t> ls = AlignedStrides(lhs_shape, out_shape);
  const std::vector<int64_t> rs = AlignedStrides(rhs_shape, out_shape);
  BroadcastPlan plan;
  plan.dims.reserve(out_shape.size());
  plan.lhs_strides.reserve(out_shape.size());
  plan.rhs_strides.reserve(out_shape.size());
  for (size_t i = 0; i < out_shape.size(); ++i) {
    const int64_t d = out_shape[i];
    if (d == 1) continue;
    if (!plan.dims.empty()) {
      const int64_t prev_l = plan.lhs_strides.back();
      const int64_t prev_r = plan.rhs_strides.back();
      if (prev_l == ls[i] * d && prev_r == rs[i] * d) {
        plan.dims.back() *= d;
        plan.lhs_strides.back() = ls[i];
        plan.rhs_strides.back() = rs[i];
        continue;
      }
    }
    plan.dims.push_back(d);
    plan.lhs_strides.push_back(ls[i]);
    plan.rhs_strides.push_back(rs[i]);
  }
  if (plan.dims.empty()) {
    plan.dims.push_back(1);
    plan.lhs_strides.push_back(0);
    plan.rhs_strides.push_back(0);
  }
  return plan;
}

void Softmax(const float* input, const Shape& shape, int64_t axis, float* out,
             bool zero_masked_rows, bool zero_nan) {
  const AxisSplit s = SplitAt(shape, axis);
  if (s.axis == 0) return;
  if (zero_nan) {
    Softmax(input, shape, axis, out, zero_masked_rows);
    const int64_t size = s.outer * s.axis * s.inner;
    for (int64_t i = 0; i < size; ++i) out[i] = std::isnan(out[i]) ? 0.0f : out[i];
    return;
  }
  if (zero_masked_rows) {
    Softmax(input, shape, axis, out);
    ZeroMaskedRows(input, s, out);
    return;
  }
  const int64_t block = s.axis * s.inner;
  const int64_t grain = RowGrain(block, kTranscendentalGrain);
  if (s.inner == 1) {
    ParallelFor(s.outer, grain, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) SoftmaxRow(input + o * block, out + o * block, s.axis);
    });
    return;
  }
  ParallelFor(s.outer, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> max_v(s.inner);
    std::vector<float> sum(s.inner);
    for (int64_t o = begin; o < end; ++o) {
      SoftmaxStrided(input + o * block, out + o * block, s.axis, s.inner, max_v.data(), sum.data());
    }
  });
}

void Unary(UnaryOp op, const float* input, float* out, int64_t size, float clip_min,
           float clip_max) {
  void (*range_fn)(const float*, float*, int64_t) = nullptr;
  switch (op) {
    case UnaryOp::kRelu:
      range_fn = ReluRange;
      break;
    case UnaryOp::kClip:
      ParallelFor(size, kCheapGrain, [&](int64_t begin, int64_t end) {
        ClipRange(input + begin, out + begin, end - begin, clip_min, clip_max);
      });
      return;
    case UnaryOp::kSigmoid:
      range_fn = SigmoidRange;
      break;
    case UnaryOp::kTanh:
      range_fn = TanhRange;
      break;
    case UnaryOp::kGelu:
      range_fn = GeluRange;
      break;
    case UnaryOp::kGeluTanh:
      range_fn = GeluTanhRange;
      break;
    case UnaryOp::kSqrt:
      range_fn = SqrtRange;
      break;
    case UnaryOp::kRsqrt:
      range_fn = RsqrtRange;
      break;
    case UnaryOp::kExp:
      range_fn = ExpRange;
      break;
    case UnaryOp::kLog:
      range_fn = LogRange;
      break;
    case UnaryOp::kErf:
      range_fn = ErfRange;
      break;
    case UnaryOp::kAbs:
      range_fn = AbsRange;
      break;
    case UnaryOp::kNegative:
      range_fn = NegativeRange;
      break;
    case UnaryOp::kRound:
      range_fn = RoundRange;
      break;
    case UnaryOp::kFloor:
      range_fn = FloorRange;
      break;
    case UnaryOp::kCeil:
      range_fn = CeilRange;
      break;
  }
  TVM_FFI_ICHECK(range_fn != nullptr) << "Unary: unknown op " << static_cast<int>(op);
  const bool cheap = op == UnaryOp::kRelu || op == UnaryOp::kAbs || op == UnaryOp::kNegative ||
                     op == UnaryOp::kRound || op == UnaryOp::kFloor || op == UnaryOp::kCeil;
  const int64_t grain = cheap ? kCheapGrain : kTranscendentalGrain;
  ParallelFor(size, grain, [&](int64_t begin, int64_t end) {
    range_fn(input + begin, out + begin, end - begin);
  });
}

void Binary(BinaryOp op, const float* lhs, const Shape& lhs_shape, const float* rhs,
            const Shape& rhs_shape, float* out, const Shape& out_shape) {
  TVM_FFI_ICHECK(op >= BinaryOp::kAdd && op <= BinaryOp::kNotEqual)
      << "Binary: unknown op " << static_cast<int>(op);
  const int64_t total = NumElements(out_shape);
  if (total == 0) return;
  const int64_t lhs_size = NumElements(lhs_shape);
  const int64_t rhs_size = NumElements(rhs_shape);
  // Same-shape and scalar operands: one flat row, split by elements.
  int64_t flat_ls = -1;
  int64_t flat_rs = -1;
  if (lhs_size == total && rhs_size == total && lhs_shape == rhs_shape) {
    flat_ls = flat_rs = 1;
  } else if (rhs_size == 1 && lhs_size == total) {
    flat_ls = 1;
    flat_rs = 0;
  } else if (lhs_size == 1 && rhs_size == total) {
    flat_ls = 0;
    flat_rs = 1;
  }
  if (flat_ls >= 0) {
    ParallelFor(total, kCheapGrain, [&](int64_t begin, int64_t end) {
      BinaryRowOf(op, lhs + begin * flat_ls, flat_ls, rhs + begin * flat_rs, flat_rs, out + begin,
                  end - begin);
    });
    return;
  }
  const BroadcastPlan plan = MakeBroadcastPlan(lhs_shape, rhs_shape, out_shape);
  const int64_t inner = plan.dims.back();
  ParallelFor(total / inner, RowGrain(inner, kCheapGrain),
              [&](int64_t begin, int64_t end) { BinaryRows(op, lhs, rhs, out, plan, begin, end); });
}

void BatchNorm(const float* input, const Shape& shape, int64_t axis, const float* gamma,
               const float* beta, const float* mean, const float* var, float epsilon, bool center,
               bool scale, float* out) {
  const AxisSplit s = SplitAt(shape, axis);
  // TVM's order, ((x - mean) / sqrt(var + eps)) * gamma + beta, with the division as a multiply
  // by the reciprocal: a huge normalised value overflows to inf before gamma scales it, as in TVM
  // (folding gamma into the reciprocal first would keep it finite).
  std::vector<float> inv_std(s.axis);
  std::vector<float> mul(s.axis);
  std::vector<float> add(s.axis);
  for (int64_t c = 0; c < s.axis; ++c) {
    inv_std[c] = 1.0f / std::sqrt(var[c] + epsilon);
    mul[c] = scale ? gamma[c] : 1.0f;
    add[c] = center ? beta[c] : 0.0f;
  }
  if (s.inner == 1) {
    // Channels innermost (NHWC tiles): each pixel is one vectorised pass over the channels.
    ParallelFor(s.outer, RowGrain(s.axis, kCheapGrain), [&](int64_t begin, int64_t end) {
      const float* __restrict__ r = inv_std.data();
      const float* __restrict__ m = mul.data();
      const float* __restrict__ a = add.data();
      for (int64_t o = begin; o < end; ++o) {
        const float* __restrict__ in_row = input + o * s.axis;
        float* __restrict__ out_row = out + o * s.axis;
        for (int64_t c = 0; c < s.axis; ++c) {
          out_row[c] = (in_row[c] - mean[c]) * r[c] * m[c] + a[c];
        }
      }
    });
    return;
  }
  ParallelFor(s.outer * s.axis, RowGrain(s.inner, kCheapGrain), [&](int64_t begin, int64_t end) {
    BatchNormRows(input, out, s.axis, s.inner, mean, inv_std.data(), mul.data(), add.data(), begin,
                  end);
  });
}

void Where(const float* cond, const Shape& cond_shape, const float* x, const Shape& x_shape,
           const float* y, const Shape& y_shape, float* out, const Shape& out_shape) {
  const int64_t total = NumElements(out_shape);
  if (total == 0) return;
  const std::vector<int64_t> cs = AlignedStrides(cond_shape, out_shape);
  const std::vector<int64_t> xs = AlignedStrides(x_shape, out_shape);
  const std::vector<int64_t> ys = AlignedStrides(y_shape, out_shape);
  const size_t rank = out_shape.size();
  // One odometer over the output; each operand's offset moves by its (0 when broadcast) stride.
  std::vector<int64_t> index(rank, 0);
  int64_t c = 0, a = 0, b = 0;
  for (int64_t i = 0; i < total; ++i) {
    out[i] = cond[c] != 0.0f ? x[a] : y[b];
    for (size_t d = rank; d-- > 0;) {
      c += cs[d];
      a += xs[d];
      b += ys[d];
      if (++index[d] < out_shape[d]) break;
      c -= cs[d] * out_shape[d];
      a -= xs[d] * out_shape[d];
      b -= ys[d] * out_shape[d];
      index[d] = 0;
    }
  }
}

}  // namespace kernels
}  // namespace example_npu
