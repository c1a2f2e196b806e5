/*!
 * \file kernels/quantized_depthwise.h
 * \brief The integer depthwise convolution (one input and one output channel per group) of 8-bit
 * activations: quantize.cc's QuantizedConv2d sends it here; not a public API.
 */
#ifndef EXAMPLE_NPU_KERNELS_QUANTIZED_DEPTHWISE_H_
#define EXAMPLE_NPU_KERNELS_QUANTIZED_DEPTHWISE_H_

#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/quantize.h"

namespace example_npu {
namespace kernels {

/*!
 * \brief Whether QuantizedDepthwise computes this NHWC / HWIO convolution exactly: groups ==
 * input channels == output channels, a zero point in [-128, 255] and few enough taps that every
 * sum of (x - zero point) * w over them fits int32 (|x - zp| <= 383, |w| <= 128).
 */
bool IsQuantizedDepthwise(const Shape& in_shape, int64_t zero_point, const Shape& weight_shape,
                          const Shape& out_shape, const Conv2dParams& params);

/*!
 * \brief NHWC sums `to` (+)= sum over the in-bounds taps of (input - zero_point) * weight, per
 * channel (padding contributes zero), summed in int32 with the channels innermost: 16 channels
 * to a vector on CPUs with AVX-512 BW, 8 on CPUs with AVX2 (chosen at run time), a portable loop
 * otherwise or when `portable` (tests check both on any CPU). A requantized `to` gets each
 * output row requantized as it is summed. Weights `packs` keeps (constants) are widened once.
 * The input is read through `in_strides` (a box of a larger tensor read in place), or densely
 * when nullptr.
 */
void QuantizedDepthwise(const int8_t* input, const Shape& in_shape, int64_t zero_point,
                        const int8_t* weight, const Shape& weight_shape, const SumsOut& to,
                        const Shape& out_shape, const Conv2dParams& params, bool portable = false,
                        WeightPackCache* packs = nullptr, const PixelStrides* in_strides = nullptr);
void QuantizedDepthwise(const uint8_t* input, const Shape& in_shape, int64_t zero_point,
                        const int8_t* weight, const Shape& weight_shape, const SumsOut& to,
                        const Shape& out_shape, const Conv2dParams& params, bool portable = false,
                        WeightPackCache* packs = nullptr, const PixelStrides* in_strides = nullptr);

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_QUANTIZED_DEPTHWISE_H_
