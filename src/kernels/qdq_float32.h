/*!
 * \file kernels/qdq_float32.h
 * \brief TVM's float32 steps of a QDQ island (Rounding::kTvm glue ops): how its LLVM build
 * computes the legalized `dequantize -> op -> quantize`. dequantize is float32(q - zp) * scale,
 * the op runs in float32, quantize is round_half_even(value / scale) + zp, clamped. The glue ops
 * take these steps instead of rounding the exact rational result because float32 often lands on
 * the other side of a .5 tie (an add of scales 0.1 and 0.3 into 0.2 differs in 1 of 8 outputs,
 * a requantize from 0.25 to 0.5 rounds half to even): the contract is TVM's integers, bit for bit.
 *
 * Include only from sources compiled with -ffp-contract=off (CMakeLists.txt): a contracted
 * multiply-add rounds once where TVM's generic x86-64 build (no FMA) rounds twice.
 */
#ifndef EXAMPLE_NPU_KERNELS_QDQ_FLOAT32_H_
#define EXAMPLE_NPU_KERNELS_QDQ_FLOAT32_H_

#include <algorithm>

#include "kernels/quantized_ops.h"

namespace example_npu {
namespace kernels {

/*! \brief A dequantize's parameters as TVM's float32 arithmetic uses them. */
struct Float32Dequantize {
  float zero_point = 0;
  float scale = 1;

  /*! \brief q an integer held in a float; q - zero_point is exact (|q - zp| < 2^17). */
  float operator()(float q) const { return (q - zero_point) * scale; }
};

/*! \brief A quantize's parameters, with the clamp range of QuantizedOutput. */
struct Float32Quantize {
  float scale = 1;
  float zero_point = 0;
  float min = -128;
  float max = 127;

  Float32Quantize(float output_scale, const QuantizedOutput& out)
      : scale(output_scale),
        zero_point(static_cast<float>(out.zero_point)),
        min(static_cast<float>(out.min)),
        max(static_cast<float>(out.max)) {}

  float operator()(float value) const {
    // Past 2^20 steps every output dtype clamps; below 2^22, adding and subtracting 1.5 * 2^23
    // rounds half to even in the default rounding mode (as LLVM's nearbyint does). A NaN (only
    // from scales near float32's limits: inf - inf) becomes the lowest value, not a NaN to narrow.
    constexpr float kBound = 1 << 20, kRounder = 12582912.0f;
    const float quotient = value / scale;
    const float steps = quotient > kBound ? kBound : quotient >= -kBound ? quotient : -kBound;
    return std::clamp(((steps + kRounder) - kRounder) + zero_point, min, max);
  }
};

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_QDQ_FLOAT32_H_
