/*!
 * \file kernels/vector.cc
 * \brief Vector-engine kernels: softmax, activations, broadcasting binary ops, batch norm.
 */
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

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

/*! \brief Softmax of one contiguous row. */
void SoftmaxRow(const float* in, float* out, int64_t n) {
  const float max_v = *std::max_element(in, in + n);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = std::exp(in[i] - max_v);
    sum += out[i];
  }
  for (int64_t i = 0; i < n; ++i) out[i] /= sum;
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
    for (int64_t j = 0; j < inner; ++j) {
      out_row[j] = std::exp(row[j] - max_v[j]);
      sum[j] += out_row[j];
    }
  }
  for (int64_t a = 0; a < axis; ++a) {
    float* out_row = out + a * inner;
    for (int64_t j = 0; j < inner; ++j) out_row[j] /= sum[j];
  }
}

/*! \brief Applies f elementwise; a template so each activation gets its own tight loop. */
template <typename F>
void Map(const float* in, float* out, int64_t size, F f) {
  for (int64_t i = 0; i < size; ++i) out[i] = f(in[i]);
}

inline float Sigmoid(float x) {
  // exp of a non-positive argument cannot overflow, so split on the sign.
  if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
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

/*!
 * \brief Output dims with each operand's element strides (0 where it broadcasts), with size-1
 * dims dropped and adjacent dims merged whenever both operands stay linear across them, so the
 * innermost loop is as long as possible.
 */
struct BroadcastPlan {
  std::vector<int64_t> dims;
  std::vector<int64_t> lhs_strides;
  std::vector<int64_t> rhs_strides;
};

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

BroadcastPlan MakePlan(const Shape& lhs_shape, const Shape& rhs_shape, const Shape& out_shape) {
  const std::vector<int64_t> ls = AlignedStrides(lhs_shape, out_shape);
  const std::vector<int64_t> rs = AlignedStrides(rhs_shape, out_shape);
  BroadcastPlan plan;
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

/*! \brief out[0:n] = op(lhs[i * ls], rhs[i * rs]) with the stride pattern hoisted out. */
template <typename Op>
void BinaryRow(Op op, const float* lhs, int64_t ls, const float* rhs, int64_t rs, float* out,
               int64_t n) {
  if (ls == 1 && rs == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = op(lhs[i], rhs[i]);
  } else if (ls == 1 && rs == 0) {
    const float b = rhs[0];
    for (int64_t i = 0; i < n; ++i) out[i] = op(lhs[i], b);
  } else if (ls == 0 && rs == 1) {
    const float a = lhs[0];
    for (int64_t i = 0; i < n; ++i) out[i] = op(a, rhs[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = op(lhs[i * ls], rhs[i * rs]);
  }
}

template <typename Op>
void BinaryImpl(Op op, const float* lhs, const Shape& lhs_shape, const float* rhs,
                const Shape& rhs_shape, float* out, const Shape& out_shape) {
  const int64_t total = NumElements(out_shape);
  if (total == 0) return;
  const int64_t lhs_size = NumElements(lhs_shape);
  const int64_t rhs_size = NumElements(rhs_shape);
  if (lhs_size == total && rhs_size == total && lhs_shape == rhs_shape) {
    BinaryRow(op, lhs, 1, rhs, 1, out, total);
    return;
  }
  if (rhs_size == 1 && lhs_size == total) {
    BinaryRow(op, lhs, 1, rhs, 0, out, total);
    return;
  }
  if (lhs_size == 1 && rhs_size == total) {
    BinaryRow(op, lhs, 0, rhs, 1, out, total);
    return;
  }
  const BroadcastPlan plan = MakePlan(lhs_shape, rhs_shape, out_shape);
  const size_t rank = plan.dims.size();
  const int64_t inner = plan.dims[rank - 1];
  std::vector<int64_t> index(rank, 0);
  int64_t lhs_off = 0;
  int64_t rhs_off = 0;
  for (int64_t done = 0; done < total; done += inner) {
    BinaryRow(op, lhs + lhs_off, plan.lhs_strides[rank - 1], rhs + rhs_off,
              plan.rhs_strides[rank - 1], out + done, inner);
    for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {
      lhs_off += plan.lhs_strides[d];
      rhs_off += plan.rhs_strides[d];
      if (++index[d] < plan.dims[d]) break;
      lhs_off -= plan.lhs_strides[d] * plan.dims[d];
      rhs_off -= plan.rhs_strides[d] * plan.dims[d];
      index[d] = 0;
    }
  }
}

}  // namespace

void Softmax(const float* input, const Shape& shape, int64_t axis, float* out) {
  const AxisSplit s = SplitAt(shape, axis);
  if (s.axis == 0) return;
  const int64_t block = s.axis * s.inner;
  if (s.inner == 1) {
    for (int64_t o = 0; o < s.outer; ++o) SoftmaxRow(input + o * block, out + o * block, s.axis);
    return;
  }
  std::vector<float> max_v(s.inner);
  std::vector<float> sum(s.inner);
  for (int64_t o = 0; o < s.outer; ++o) {
    SoftmaxStrided(input + o * block, out + o * block, s.axis, s.inner, max_v.data(), sum.data());
  }
}

void Unary(UnaryOp op, const float* input, float* out, int64_t size, float clip_min,
           float clip_max) {
  switch (op) {
    case UnaryOp::kRelu:
      Map(input, out, size, [](float x) { return std::max(x, 0.0f); });
      return;
    case UnaryOp::kClip:
      Map(input, out, size,
          [clip_min, clip_max](float x) { return std::min(std::max(x, clip_min), clip_max); });
      return;
    case UnaryOp::kSigmoid:
      Map(input, out, size, Sigmoid);
      return;
    case UnaryOp::kTanh:
      Map(input, out, size, [](float x) { return std::tanh(x); });
      return;
    case UnaryOp::kGelu: {
      const float inv_sqrt2 = static_cast<float>(1.0 / std::sqrt(2.0));
      Map(input, out, size,
          [inv_sqrt2](float x) { return 0.5f * x * (1.0f + std::erf(x * inv_sqrt2)); });
      return;
    }
    case UnaryOp::kGeluTanh: {
      constexpr float k = 0.7978845608028654f;  // sqrt(2 / pi)
      Map(input, out, size,
          [k](float x) { return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x))); });
      return;
    }
  }
  TVM_FFI_ICHECK(false) << "Unary: unknown op " << static_cast<int>(op);
}

void Binary(BinaryOp op, const float* lhs, const Shape& lhs_shape, const float* rhs,
            const Shape& rhs_shape, float* out, const Shape& out_shape) {
  switch (op) {
    case BinaryOp::kAdd:
      return BinaryImpl(AddOp{}, lhs, lhs_shape, rhs, rhs_shape, out, out_shape);
    case BinaryOp::kSubtract:
      return BinaryImpl(SubtractOp{}, lhs, lhs_shape, rhs, rhs_shape, out, out_shape);
    case BinaryOp::kMultiply:
      return BinaryImpl(MultiplyOp{}, lhs, lhs_shape, rhs, rhs_shape, out, out_shape);
    case BinaryOp::kDivide:
      return BinaryImpl(DivideOp{}, lhs, lhs_shape, rhs, rhs_shape, out, out_shape);
  }
  TVM_FFI_ICHECK(false) << "Binary: unknown op " << static_cast<int>(op);
}

void BatchNorm(const float* input, const Shape& shape, int64_t axis, const float* gamma,
               const float* beta, const float* mean, const float* var, float epsilon, bool center,
               bool scale, float* out) {
  const AxisSplit s = SplitAt(shape, axis);
  // Per-channel constants are folded once; mean is still subtracted first (rather than folded
  // into the offset) to avoid cancellation when x and mean are large and close.
  std::vector<float> mul(s.axis);
  std::vector<float> add(s.axis);
  for (int64_t c = 0; c < s.axis; ++c) {
    const float inv_std = 1.0f / std::sqrt(var[c] + epsilon);
    mul[c] = scale ? inv_std * gamma[c] : inv_std;
    add[c] = center ? beta[c] : 0.0f;
  }
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t c = 0; c < s.axis; ++c) {
      const float* in_row = input + (o * s.axis + c) * s.inner;
      float* out_row = out + (o * s.axis + c) * s.inner;
      const float mu = mean[c];
      const float m = mul[c];
      const float a = add[c];
      for (int64_t i = 0; i < s.inner; ++i) out_row[i] = (in_row[i] - mu) * m + a;
    }
  }
}

}  // namespace kernels
}  // namespace example_npu
