/*!
 * \file kernels/quantized_ops.cc
 * \brief Integer requantization, add / multiply, lookup tables and softmax (quantized_ops.h).
 * Integer pooling shares the window plan of pool2d.cc and lives there.
 */
#include "kernels/quantized_ops.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "kernels/broadcast.h"
#include "kernels/parallel.h"
#include "kernels/qdq_float32.h"
#include "kernels/rounded_product.h"

namespace example_npu {
namespace kernels {
namespace {

constexpr int64_t kGrain = 16 * 1024;

inline int64_t Clamp(int64_t value, const QuantizedOutput& out) {
  return std::clamp(out.zero_point + value, out.min, out.max);
}

/*! \brief TVM's add / multiply: both operands dequantized, combined and quantized in float32. */
template <QuantizedBinaryKind kKind>
struct Float32BinaryOp {
  Float32Dequantize lhs, rhs;
  Float32Quantize out;

  explicit Float32BinaryOp(const QuantizedBinaryParams& p)
      : lhs{static_cast<float>(p.lhs_zero_point), p.lhs_scale},
        rhs{static_cast<float>(p.rhs_zero_point), p.rhs_scale},
        out(p.output_scale, p.out) {}

  float operator()(float a, float b) const {
    return out(kKind == QuantizedBinaryKind::kAdd ? lhs(a) + rhs(b) : lhs(a) * rhs(b));
  }
};

/*! \brief TFLite's MUL: the integer product rescaled by MultiplyByQuantizedMultiplier, on int32
 * values as TFLite computes it (the operands are 8- or 16-bit integers less their zero points;
 * the rescale reads the product's low 32 bits either way). The multiplier is checked once
 * (CheckTfliteMultipliers), so the row loops vectorise on sixteen int32 lanes. */
struct TfliteMultiplyOp {
  int32_t lhs_zero_point, rhs_zero_point, m0, left_shift, right_shift, zero_point, min, max;

  explicit TfliteMultiplyOp(const QuantizedBinaryParams& p)
      : lhs_zero_point(static_cast<int32_t>(p.lhs_zero_point)),
        rhs_zero_point(static_cast<int32_t>(p.rhs_zero_point)),
        m0(static_cast<int32_t>(p.lhs.m0)),
        left_shift(static_cast<int32_t>(p.lhs.shift < 31 ? 31 - p.lhs.shift : 0)),
        right_shift(static_cast<int32_t>(p.lhs.shift > 31 ? p.lhs.shift - 31 : 0)),
        zero_point(static_cast<int32_t>(p.out.zero_point)),
        min(static_cast<int32_t>(p.out.min)),
        max(static_cast<int32_t>(p.out.max)) {}

  float operator()(float a, float b) const {
    const uint32_t product = static_cast<uint32_t>(static_cast<int32_t>(a) - lhs_zero_point) *
                             static_cast<uint32_t>(static_cast<int32_t>(b) - rhs_zero_point);
    const int32_t scaled =
        tflite::DoubleRounding(static_cast<int32_t>(product), left_shift, m0, right_shift);
    return static_cast<float>(std::clamp(zero_point + scaled, min, max));
  }
};

/*! \brief TFLite's ADD: both inputs 20 bits up, each rescaled, the sum rescaled (all rounded).
 * The multipliers are checked once (CheckTfliteMultipliers) for the inline, in-range multiply. */
struct TfliteAddOp {
  const QuantizedBinaryParams& p;
  float operator()(float a, float b) const {
    constexpr int64_t kShifted = int64_t{1} << tflite::AddRealMultipliers::kLeftShift;
    const int64_t lhs = tflite::MultiplyByQuantizedMultiplierInRange(
        (static_cast<int64_t>(a) - p.lhs_zero_point) * kShifted, p.lhs.m0, p.lhs.shift);
    const int64_t rhs = tflite::MultiplyByQuantizedMultiplierInRange(
        (static_cast<int64_t>(b) - p.rhs_zero_point) * kShifted, p.rhs.m0, p.rhs.shift);
    return static_cast<float>(
        Clamp(tflite::MultiplyByQuantizedMultiplierInRange(lhs + rhs, p.output.m0, p.output.shift),
              p.out));
  }
};

/*! \brief The multipliers TFLite's ADD (three) or MUL (one) rescales with are in range. */
void CheckTfliteMultipliers(const QuantizedBinaryParams& p) {
  const FixedPointMultiplier* multipliers[] = {&p.lhs, &p.rhs, &p.output};
  const int used = p.kind == QuantizedBinaryKind::kAdd ? 3 : 1;
  for (int i = 0; i < used; ++i) tflite::CheckInMultiplierRange(*multipliers[i]);
}

/*! \brief Whether every multiplier of TFLite's ADD is below 1 (right shifts only), as TFLite's
 * ADD prepares them: its steps then fit int32 lanes (|x - zp| 2^20 < 2^28). */
bool TfliteAddFitsInt32Lanes(const QuantizedBinaryParams& p) {
  return p.lhs.shift >= 31 && p.rhs.shift >= 31 && p.output.shift >= 31;
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)

/*! \brief TfliteAddOp over n elements of contiguous rows, sixteen to a vector: each input 20 bits
 * up and rescaled, the sum rescaled, every rescale TFLite's double rounding (RoundedProduct16). */
void TfliteAddRow(const QuantizedBinaryParams& p, const float* lhs, const float* rhs, float* out,
                  int64_t n) {
  auto rounding = [](const FixedPointMultiplier& m) {
    return RoundedProduct16::DoubleRounding(_mm512_set1_epi32(static_cast<int32_t>(m.m0)),
                                            _mm512_set1_epi32(static_cast<int32_t>(m.shift - 31)));
  };
  const RoundedProduct16 lhs_rescale = rounding(p.lhs), rhs_rescale = rounding(p.rhs),
                         sum_rescale = rounding(p.output);
  constexpr int kShift = tflite::AddRealMultipliers::kLeftShift;
  auto shifted = [&](const float* x, __mmask16 lanes, int64_t zero_point) {
    const __m512i q = _mm512_maskz_cvttps_epi32(kAll16, _mm512_maskz_loadu_ps(lanes, x));
    return _mm512_maskz_slli_epi32(
        kAll16, _mm512_sub_epi32(q, _mm512_set1_epi32(static_cast<int32_t>(zero_point))), kShift);
  };
  const __m512i zero_point = _mm512_set1_epi32(static_cast<int32_t>(p.out.zero_point));
  const __m512i lo = _mm512_set1_epi32(static_cast<int32_t>(p.out.min));
  const __m512i hi = _mm512_set1_epi32(static_cast<int32_t>(p.out.max));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512i sum =
        _mm512_add_epi32(lhs_rescale.Apply(shifted(lhs + i, lanes, p.lhs_zero_point)),
                         rhs_rescale.Apply(shifted(rhs + i, lanes, p.rhs_zero_point)));
    const __m512i result = _mm512_add_epi32(sum_rescale.Apply(sum), zero_point);
    const __m512i clamped =
        _mm512_maskz_min_epi32(kAll16, _mm512_maskz_max_epi32(kAll16, result, lo), hi);
    _mm512_mask_storeu_ps(out + i, lanes, _mm512_maskz_cvtepi32_ps(kAll16, clamped));
  }
}
#else
/*! \brief TfliteAddOp over n elements of contiguous rows on int32 values (DoubleRounding with no
 * left shift): a loop the compiler vectorises. */
void TfliteAddRow(const QuantizedBinaryParams& p, const float* lhs, const float* rhs, float* out,
                  int64_t n) {
  constexpr int kShift = tflite::AddRealMultipliers::kLeftShift;
  auto right = [](const FixedPointMultiplier& m) { return static_cast<int32_t>(m.shift - 31); };
  const int32_t lhs_m0 = static_cast<int32_t>(p.lhs.m0), lhs_right = right(p.lhs);
  const int32_t rhs_m0 = static_cast<int32_t>(p.rhs.m0), rhs_right = right(p.rhs);
  const int32_t out_m0 = static_cast<int32_t>(p.output.m0), out_right = right(p.output);
  const int32_t lhs_zp = static_cast<int32_t>(p.lhs_zero_point);
  const int32_t rhs_zp = static_cast<int32_t>(p.rhs_zero_point);
  const int32_t zp = static_cast<int32_t>(p.out.zero_point);
  const int32_t lo = static_cast<int32_t>(p.out.min), hi = static_cast<int32_t>(p.out.max);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t a = (static_cast<int32_t>(lhs[i]) - lhs_zp) * (1 << kShift);
    const int32_t b = (static_cast<int32_t>(rhs[i]) - rhs_zp) * (1 << kShift);
    const int32_t sum = tflite::DoubleRounding(a, 0, lhs_m0, lhs_right) +
                        tflite::DoubleRounding(b, 0, rhs_m0, rhs_right);
    out[i] = static_cast<float>(
        std::clamp(tflite::DoubleRounding(sum, 0, out_m0, out_right) + zp, lo, hi));
  }
}
#endif

template <typename Op>
void BinaryAll(const Op& op, const float* lhs, const Shape& lhs_shape, const float* rhs,
               const Shape& rhs_shape, float* out, const Shape& out_shape) {
  const BroadcastPlan plan = MakeBroadcastPlan(lhs_shape, rhs_shape, out_shape);
  const size_t rank = plan.dims.size();
  const int64_t inner = plan.dims.back();
  const int64_t rows = NumElements(out_shape) / inner;
  ParallelFor(rows, std::max<int64_t>(1, kGrain / inner), [&](int64_t begin, int64_t end) {
    ForEachBroadcastRow(plan, begin, end, [&](int64_t row, int64_t lhs_off, int64_t rhs_off) {
      BroadcastRow(op, lhs + lhs_off, plan.lhs_strides[rank - 1], rhs + rhs_off,
                   plan.rhs_strides[rank - 1], out + row * inner, inner);
    });
  });
}

/*! \brief Row `row` of an [outer, axis, inner] view: element a of it is at base + a * stride. */
struct Row {
  int64_t base;
  int64_t stride;
};

}  // namespace

RequantizeParams MakeRequantizeParams(double input_scale, int64_t input_zero_point,
                                      double output_scale, const QuantizedOutput& out,
                                      Rounding rounding) {
  return RequantizeParams{input_zero_point,
                          QuantizeMultiplier(input_scale / output_scale),
                          out,
                          rounding,
                          static_cast<float>(input_scale),
                          static_cast<float>(output_scale)};
}

bool IsIdentity(const RequantizeParams& p, int64_t lo, int64_t hi) {
  return p.multiplier.m0 == (1LL << 30) && p.multiplier.shift == 30 &&
         p.input_zero_point == p.out.zero_point && p.out.min <= lo && p.out.max >= hi;
}

void Requantize(const float* x, int64_t size, const RequantizeParams& p, float* out) {
  if (p.rounding == Rounding::kTflite) {
    // The multiplier checked once, then the inline rescale: the loop vectorises.
    const FixedPointMultiplier& m = p.multiplier;
    tflite::CheckInMultiplierRange(m);
    ParallelFor(size, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t value = static_cast<int64_t>(x[i]) - p.input_zero_point;
        out[i] = static_cast<float>(
            Clamp(tflite::MultiplyByQuantizedMultiplierInRange(value, m.m0, m.shift), p.out));
      }
    });
    return;
  }
  const Float32Dequantize in{static_cast<float>(p.input_zero_point), p.input_scale};
  const Float32Quantize requantized(p.output_scale, p.out);
  ParallelFor(size, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = requantized(in(x[i]));
  });
}

void QuantizedConcat(const std::vector<const float*>& inputs, const std::vector<Shape>& shapes,
                     int64_t axis, const std::vector<RequantizeParams>& params, float* out) {
  TVM_FFI_ICHECK(inputs.size() == shapes.size() && inputs.size() == params.size())
      << "QuantizedConcat: one shape and one requantization per input";
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shapes[0][d];
  std::vector<int64_t> slice(inputs.size());  // elements of one input per outer index
  int64_t row = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    slice[k] = NumElements(shapes[k]) / std::max<int64_t>(outer, 1);
    row += slice[k];
  }
  for (int64_t o = 0; o < outer; ++o) {
    float* dst = out + o * row;
    for (size_t k = 0; k < inputs.size(); ++k) {
      Requantize(inputs[k] + o * slice[k], slice[k], params[k], dst);
      dst += slice[k];
    }
  }
}

QuantizedBinaryParams MakeQuantizedBinaryParams(QuantizedBinaryKind kind, double lhs_scale,
                                                int64_t lhs_zero_point, double rhs_scale,
                                                int64_t rhs_zero_point, double output_scale,
                                                const QuantizedOutput& out, Rounding rounding) {
  QuantizedBinaryParams p;
  p.kind = kind;
  p.lhs_zero_point = lhs_zero_point;
  p.rhs_zero_point = rhs_zero_point;
  p.out = out;
  p.rounding = rounding;
  if (rounding == Rounding::kTflite) {
    const auto [a, b, o] = std::tuple{static_cast<float>(lhs_scale), static_cast<float>(rhs_scale),
                                      static_cast<float>(output_scale)};
    if (kind == QuantizedBinaryKind::kAdd) {
      const tflite::AddRealMultipliers real = tflite::MakeAddRealMultipliers(a, b, o);
      p.lhs = QuantizeMultiplier(real.lhs);
      p.rhs = QuantizeMultiplier(real.rhs);
      p.output = QuantizeMultiplier(real.output);
    } else {
      p.lhs = QuantizeMultiplier(tflite::MulRealMultiplier(a, b, o));
    }
    return p;
  }
  p.lhs_scale = static_cast<float>(lhs_scale);
  p.rhs_scale = static_cast<float>(rhs_scale);
  p.output_scale = static_cast<float>(output_scale);
  return p;
}

void QuantizedBinary(const float* lhs, const Shape& lhs_shape, const float* rhs,
                     const Shape& rhs_shape, float* out, const Shape& out_shape,
                     const QuantizedBinaryParams& p) {
  if (NumElements(out_shape) == 0) return;
  if (p.rounding == Rounding::kTvm) {
    if (p.kind == QuantizedBinaryKind::kAdd) {
      BinaryAll(Float32BinaryOp<QuantizedBinaryKind::kAdd>(p), lhs, lhs_shape, rhs, rhs_shape, out,
                out_shape);
    } else {
      BinaryAll(Float32BinaryOp<QuantizedBinaryKind::kMultiply>(p), lhs, lhs_shape, rhs, rhs_shape,
                out, out_shape);
    }
    return;
  }
  CheckTfliteMultipliers(p);
  if (p.kind == QuantizedBinaryKind::kMultiply) {
    BinaryAll(TfliteMultiplyOp(p), lhs, lhs_shape, rhs, rhs_shape, out, out_shape);
    return;
  }
  if (lhs_shape == out_shape && rhs_shape == out_shape && TfliteAddFitsInt32Lanes(p)) {
    // The residual adds of CNNs.
    const int64_t size = NumElements(out_shape);
    ParallelFor(size, kGrain, [&](int64_t begin, int64_t end) {
      TfliteAddRow(p, lhs + begin, rhs + begin, out + begin, end - begin);
    });
    return;
  }
  BinaryAll(TfliteAddOp{p}, lhs, lhs_shape, rhs, rhs_shape, out, out_shape);
}

void ApplyLookupTable(const float* x, int64_t size, const LookupTable& table, float* out) {
  const int64_t entries = static_cast<int64_t>(table.values.size());
  int64_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512DQ__)
  // Sixteen lookups at a time, each index clamped into the table (nothing past it is read) and
  // any that was outside it noted; the loop below then reports the first.
  const __m512i offset = _mm512_set1_epi32(static_cast<int32_t>(table.index_offset));
  const __m512i last = _mm512_set1_epi32(static_cast<int32_t>(entries - 1));
  __mmask16 outside = 0;
  for (; i + 16 <= size && entries > 0; i += 16) {
    // maskz / mask forms: GCC 12 warns about the undefined register in the plain intrinsics.
    const __m512i index =
        _mm512_sub_epi32(_mm512_maskz_cvttps_epi32(kAll16, _mm512_loadu_ps(x + i)), offset);
    outside |= _mm512_cmpgt_epu32_mask(index, last);
    _mm512_storeu_ps(out + i, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), kAll16,
                                                       _mm512_maskz_min_epu32(kAll16, index, last),
                                                       table.values.data(), sizeof(float)));
  }
  if (outside != 0) i = 0;
#endif
  for (; i < size; ++i) {
    const int64_t index = static_cast<int64_t>(x[i]) - table.index_offset;
    TVM_FFI_ICHECK(index >= 0 && index < entries)
        << "lookup table index " << index << " outside " << entries << " entries";
    out[i] = table.values[index];
  }
}

QuantizedSoftmaxParams MakeQuantizedSoftmaxParams(double input_scale, int64_t input_zero_point,
                                                  double output_scale, const QuantizedOutput& out,
                                                  Rounding rounding) {
  QuantizedSoftmaxParams p;
  p.rounding = rounding;
  p.out = out;
  if (rounding == Rounding::kTflite) {
    p.tflite = tflite::MakeSoftmaxTables(input_scale);
    return p;
  }
  p.output_scale = static_cast<float>(output_scale);
  // TVM's softmax of the dequantized row: exp(x - max) with the two float32 values as they are
  // (not their difference's exact value), so the table holds every (max, x) pair.
  const Float32Dequantize dequantize{static_cast<float>(input_zero_point),
                                     static_cast<float>(input_scale)};
  p.exp_table.assign(kSoftmaxValues * kSoftmaxValues, 0.0f);
  for (int64_t m = 0; m < kSoftmaxValues; ++m) {
    const float largest = dequantize(static_cast<float>(m + kSoftmaxLowest));
    for (int64_t q = 0; q <= m; ++q) {
      p.exp_table[m * kSoftmaxValues + q] =
          std::exp(dequantize(static_cast<float>(q + kSoftmaxLowest)) - largest);
    }
  }
  return p;
}

void QuantizedSoftmax(const float* x, const Shape& shape, int64_t axis,
                      const QuantizedSoftmaxParams& p, float* out) {
  TVM_FFI_ICHECK(axis >= 0 && axis < static_cast<int64_t>(shape.size()))
      << "softmax axis " << axis << " out of range";
  int64_t outer = 1, inner = 1;
  const int64_t length = shape[axis];
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const Float32Quantize quantize(p.output_scale, p.out);
  ParallelFor(
      outer * inner, std::max<int64_t>(1, kGrain / std::max<int64_t>(length, 1)),
      [&](int64_t begin, int64_t end) {
        std::vector<float> e(length);
        for (int64_t r = begin; r < end; ++r) {
          const Row row{(r / inner) * length * inner + r % inner, inner};
          const float* in = x + row.base;
          float* y = out + row.base;
          if (p.rounding == Rounding::kTflite) {
            tflite::SoftmaxRow(in, length, row.stride, p.tflite, p.out.zero_point, p.out.max, y);
            continue;
          }
          float largest = in[0];
          for (int64_t a = 1; a < length; ++a) largest = std::max(largest, in[a * row.stride]);
          TVM_FFI_ICHECK(largest >= kSoftmaxLowest && largest < kSoftmaxLowest + kSoftmaxValues)
              << "softmax input " << largest << " is not an 8-bit value";
          // Row `largest` of the table, indexed by the input value.
          const float* exp_of = p.exp_table.data() +
                                (static_cast<int64_t>(largest) - kSoftmaxLowest) * kSoftmaxValues -
                                kSoftmaxLowest;
          float sum = 0.0f;  // in row order, as TVM's reduction
          for (int64_t a = 0; a < length; ++a) {
            e[a] = exp_of[static_cast<int64_t>(in[a * row.stride])];
            sum += e[a];
          }
          for (int64_t a = 0; a < length; ++a) y[a * row.stride] = quantize(e[a] / sum);
        }
      });
}

}  // namespace kernels
}  // namespace example_npu
