#include "kernels/half.h"

#include <cstring>

namespace example_npu {
namespace kernels {
namespace {

uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float FromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

}  // namespace

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return FromBits(sign | 0x7f800000u | (mantissa << 13));  // inf / NaN
  if (exponent != 0) return FromBits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24, exact in float32.
  const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return sign ? -magnitude : magnitude;
}

uint16_t FloatToHalf(float value) {
  const uint32_t bits = Bits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u) {  // inf or NaN (keep NaN quiet and non-zero)
    return sign | 0x7c00u | (abs_bits > 0x7f800000u ? 0x200u : 0u);
  }
  if (abs_bits >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504: overflow to inf
  if (abs_bits < 0x38800000u) {
    // Result is subnormal or zero: scale so the float's rounding does the work (RNE).
    const float scaled = FromBits(abs_bits) * 16777216.0f;     // 2^24: units of the smallest half
    const float rounded = scaled + 12582912.0f - 12582912.0f;  // 1.5 * 2^23 forces integer RNE
    return sign | static_cast<uint16_t>(rounded);
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even.
  const uint32_t odd = (abs_bits >> 13) & 1u;
  const uint32_t rounded = abs_bits + 0xfffu + odd;
  return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
}

void HalfToFloat(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = HalfToFloat(in[i]);
}

void FloatToHalf(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToHalf(in[i]);
}

void RoundToHalf(float* values, int64_t n) {
  for (int64_t i = 0; i < n; ++i) values[i] = HalfToFloat(FloatToHalf(values[i]));
}

}  // namespace kernels
}  // namespace example_npu
