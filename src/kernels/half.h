/*!
 * \file kernels/half.h
 * \brief IEEE binary16 <-> binary32 conversion for the float16 datapath.
 *
 * The NPU stores float16 tensors but accumulates in float32: kernels run on float32 copies and
 * every float16 result is rounded back (round to nearest even), as a float16 store would.
 */
#ifndef EXAMPLE_NPU_KERNELS_HALF_H_
#define EXAMPLE_NPU_KERNELS_HALF_H_

#include <cstdint>

namespace example_npu {
namespace kernels {

/*! \brief The lowest finite float16 value. */
constexpr float kHalfLowest = -65504.0f;

/*! \brief Exact widening of a binary16 bit pattern (subnormals, inf and NaN included). */
float HalfToFloat(uint16_t bits);

/*! \brief Narrowing with round-to-nearest-even; overflow gives inf, NaN stays NaN. */
uint16_t FloatToHalf(float value);

/*! \brief Converts n values between the two formats. */
void HalfToFloat(const uint16_t* in, float* out, int64_t n);
void FloatToHalf(const float* in, uint16_t* out, int64_t n);

/*! \brief Rounds each value to the nearest float16 in place (value stays a float). */
void RoundToHalf(float* values, int64_t n);

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_HALF_H_
