/*!
 * \file kernels/quantize.h
 * \brief Integer arithmetic of the quantized datapath (int8 / int16 activations, int8 weights).
 *
 * The scheme (docs/quantization/integer-inference.md):
 *   real = scale * (q - zero_point); weights are symmetric (zero point 0), per tensor or per
 *   output channel.
 *   acc[c]   = sum (x_q - x_zp) * w_q                      int32 for int8 inputs, int64 for int16
 *   bias_q[c] = round_half_even(bias[c] / (x_scale * w_scale[c]))
 *   M[c]     = x_scale * w_scale[c] / y_scale = m0[c] * 2^-shift[c],  m0 in [2^30, 2^31)
 *   y_q      = clamp(y_zp + ((acc + bias_q) * m0 + 2^(shift-1)) >> shift, lo, hi)
 * i.e. one 64x32-bit product and one rounding (half up) per output; a fused relu / clip only
 * narrows [lo, hi]. quantize / dequantize follow Relax exactly: clip(round_half_even(x / s) +
 * zp) and s * (q - zp), computed in float32.
 */
#ifndef EXAMPLE_NPU_KERNELS_QUANTIZE_H_
#define EXAMPLE_NPU_KERNELS_QUANTIZE_H_

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/weight_pack_cache.h"

namespace example_npu {
namespace kernels {

/*!
 * \brief Whose integer arithmetic a qnn op follows. kTvm: one exact rounding, half up, of every
 * result (bit-equal to TVM's CPU build of Relax QDQ graphs up to that rounding, see above).
 * kTflite: TFLite's integer kernels (tflite_arithmetic.h), for models that come from TFLite.
 */
enum class Rounding { kTvm, kTflite };

/*! \brief m0 * 2^-shift approximating a positive real multiplier, m0 in [2^30, 2^31). */
struct FixedPointMultiplier {
  int64_t m0 = 0;
  int64_t shift = 0;
};

/*! \brief Decomposes `real` (> 0); shift is in [1, 62] for multipliers in [2^-31, 2^30). */
FixedPointMultiplier QuantizeMultiplier(double real);

/*! \brief round_half_up(value * m.m0 * 2^-m.shift), exact (128-bit product: int16 activations
 * give accumulators beyond 32 bits). */
inline int64_t ScaleRounded(int64_t value, const FixedPointMultiplier& m) {
  const __int128 product = static_cast<__int128>(value) * m.m0;
  return static_cast<int64_t>((product + (static_cast<__int128>(1) << (m.shift - 1))) >> m.shift);
}

/*! \brief Rounds to the nearest integer, ties to even (the rounding of Relax's quantize). */
int64_t RoundHalfEven(double value);

/*!
 * \brief A QDQ matmul's operands as TVM's float32 build of it reads them (Rounding::kTvm): TVM
 * sums the dequantized products in float32, so where the exact value lies near a rounding tie its
 * answer can be the other integer; those outputs are recomputed in its steps
 * (kernels/near_ties.h). Empty for convolutions (they keep the exact rounding) and for layers
 * without a float graph to follow (TFLite's).
 */
struct Float32Operands {
  float input_scale = 0;
  float output_scale = 0;
  std::vector<float> weight_scales;  // one, or one per channel
  std::vector<float> bias;           // TVM's float32 bias: empty, or one per channel

  bool empty() const { return weight_scales.empty(); }
  float WeightScale(int64_t channel) const {
    return weight_scales[weight_scales.size() > 1 ? channel : 0];
  }
};

/*! \brief Per-output-channel requantization of one quantized layer. */
struct Requantization {
  std::vector<FixedPointMultiplier> multipliers;  // one, or one per channel
  std::vector<int64_t> bias;                      // empty, or one per channel
  int64_t output_zero_point = 0;
  int64_t min = -128;  // output clamp, including a fused relu / clip
  int64_t max = 127;
  Rounding rounding = Rounding::kTvm;  // kTflite: MultiplyByQuantizedMultiplier, int32 bias as is
  // kTflite only: one rounding, (x * m0 + 2^(shift-1)) >> shift, as LiteRT's reference
  // FULLY_CONNECTED computes (its CONV_2D rounds twice, as MultiplyByQuantizedMultiplier).
  bool single_rounding = false;
  Float32Operands float32;  // kTvm layers: outputs near a tie are recomputed from these

  /*! \brief The multiplier of `channel` (per tensor: the only one). */
  const FixedPointMultiplier& Multiplier(int64_t channel) const {
    return multipliers[multipliers.size() > 1 ? channel : 0];
  }
};

class PreparedRequantization;  // kernels/requantize_sums.h

/*!
 * \brief What a fused requantization writes: float (the tile the NPU's vector unit holds, which
 * its store narrows), or the output integers themselves (where only that store reads the tile).
 */
enum class SumsType { kFloat32, kInt8, kUInt8, kInt16 };

inline int64_t SumsTypeBytes(SumsType type) {
  return type == SumsType::kFloat32 ? 4 : type == SumsType::kInt16 ? 2 : 1;
}

/*! \brief Calls store(out as a pointer to `type`'s elements). */
template <typename Store>
void WithSumsType(SumsType type, void* out, const Store& store) {
  switch (type) {
    case SumsType::kFloat32:
      return store(static_cast<float*>(out));
    case SumsType::kInt8:
      return store(static_cast<int8_t*>(out));
    case SumsType::kUInt8:
      return store(static_cast<uint8_t*>(out));
    case SumsType::kInt16:
      return store(static_cast<int16_t*>(out));
  }
}

/*!
 * \brief Where an integer kernel's exact sums go: int64 accumulators (stored, or added to when
 * `accumulate`), or, with `requant` set, their requantization into `out` as `out_type`
 * (Requantize's result for accumulators whose innermost dim is the channel, channel_offset 0):
 * the NPU's requantization step computed with its accumulation (kernels/requantize_sums.h). The
 * requantized output's pixels (its rows of channels) lie `pixel_stride` elements apart, or
 * densely when 0 (a tile's channels straight into a wider tensor in DRAM).
 */
struct SumsOut {
  int64_t* acc = nullptr;
  bool accumulate = false;
  const PreparedRequantization* requant = nullptr;
  void* out = nullptr;
  SumsType out_type = SumsType::kFloat32;
  int64_t pixel_stride = 0;
  /*! \brief With `requant`: where the flat indices (pixel * channels + channel) of the outputs
   * whose exact value lies near a rounding tie are appended (FindNearTies), or nullptr. */
  std::vector<int64_t>* near_ties = nullptr;

  /*! \brief Elements from one requantized pixel of `channels` to the next. */
  int64_t PixelStride(int64_t channels) const {
    return pixel_stride == 0 ? channels : pixel_stride;
  }
  /*! \brief Requantized pixel `pixel` (of `channels`) in `out`. */
  void* OutAtPixel(int64_t pixel, int64_t channels) const {
    return static_cast<uint8_t*>(out) + pixel * PixelStride(channels) * SumsTypeBytes(out_type);
  }
};

/*!
 * \brief values[pixels, channels] (exact integers) written as `type` (narrowing is exact for
 * them) into `out`, pixels `pixel_stride` elements apart.
 */
void StoreRequantized(const float* values, int64_t pixels, int64_t channels, SumsType type,
                      void* out, int64_t pixel_stride);

/*!
 * \brief out[i] = requantised acc[i], whose channel is (channel_offset + i % channels) (channel
 * innermost, as in NHWC and [rows, cols] tiles). Results are exact integers stored as float.
 * TFLite's double rounding runs on sixteen int32 lanes on AVX-512 CPUs (where every step fits
 * them); everything else runs RequantizeElementwise.
 */
void Requantize(const int64_t* acc, int64_t size, int64_t channels, int64_t channel_offset,
                const Requantization& requant, float* out);

/*!
 * \brief Requantize as an element-wise loop any CPU runs, in 64-bit (or, for accumulators too
 * wide for it, 128-bit) arithmetic: what Requantize computes, and the reference its lanes are
 * tested against.
 */
void RequantizeElementwise(const int64_t* acc, int64_t size, int64_t channels,
                           int64_t channel_offset, const Requantization& requant, float* out);

/*!
 * \brief to[m, n] (+)= sum_k (lhs[m, k] - lhs_zero_point) * rhs[k, n], exactly. 8-bit
 * activations run on the integer dot-product unit when the build has one (HasInt8DotProduct():
 * VNNI, or AVX2's 16-bit multiplies):
 * lhs as uint8 (int8 + 128, uint8 as it is) times rhs with int32 sums, minus (128 + zero point,
 * or the uint8 zero point) times rhs's column sums. int16 activations (and 8-bit without it) run
 * a portable loop with int32 products and int64 sums. `packs` (the convolutions' too): where rhs's
 * packing for the dot-product unit is kept when rhs is a weight that does not change while the
 * cache holds it; nullptr packs it on every call. rhs's rows lie rhs_stride elements apart (0:
 * n, dense; more: a slice of a wider matrix's columns).
 */
void QuantizedMatmul(const int8_t* lhs, int64_t lhs_zero_point, const int8_t* rhs, int64_t m,
                     int64_t k, int64_t n, const SumsOut& to, WeightPackCache* packs = nullptr,
                     int64_t rhs_stride = 0);
void QuantizedMatmul(const uint8_t* lhs, int64_t lhs_zero_point, const int8_t* rhs, int64_t m,
                     int64_t k, int64_t n, const SumsOut& to, WeightPackCache* packs = nullptr,
                     int64_t rhs_stride = 0);
void QuantizedMatmul(const int16_t* lhs, int64_t lhs_zero_point, const int8_t* rhs, int64_t m,
                     int64_t k, int64_t n, const SumsOut& to, WeightPackCache* packs = nullptr,
                     int64_t rhs_stride = 0);

/*!
 * \brief acc[m, n] -= rhs_zero_point * sum_k (lhs[m, k] - lhs_zero_point): after
 * QuantizedMatmul, the sums against (rhs - rhs_zero_point), exactly (a run-time int8 operand,
 * such as attention's k or v, keeps its own zero point). Linear in k, so each k-tile of an
 * accumulated matmul subtracts its own part.
 */
template <typename T>
void SubtractRhsZeroPoint(const T* lhs, int64_t lhs_zero_point, int64_t rhs_zero_point, int64_t m,
                          int64_t k, int64_t n, int64_t* acc) {
  for (int64_t i = 0; i < m; ++i) {
    int64_t row = 0;
    for (int64_t j = 0; j < k; ++j) row += static_cast<int64_t>(lhs[i * k + j]) - lhs_zero_point;
    for (int64_t j = 0; j < n; ++j) acc[i * n + j] -= rhs_zero_point * row;
  }
}

/*!
 * \brief NHWC input, HWIO weight, NHWC sums `to` (+)= the exact integer convolution of
 * (input - input_zero_point) with the weight. Padding contributes zero (it stands for the real
 * value 0, i.e. the input zero point). Same arithmetic paths as QuantizedMatmul. The input
 * lies at `in_strides` (a box of a larger tensor), or densely when nullptr: the 8-bit depthwise
 * kernel reads it in place, the other paths gather it first.
 */
void QuantizedConv2d(const int8_t* input, const Shape& in_shape, int64_t input_zero_point,
                     const int8_t* weight, const Shape& weight_shape, const SumsOut& to,
                     const Shape& out_shape, const Conv2dParams& params,
                     WeightPackCache* packs = nullptr, const PixelStrides* in_strides = nullptr);
void QuantizedConv2d(const uint8_t* input, const Shape& in_shape, int64_t input_zero_point,
                     const int8_t* weight, const Shape& weight_shape, const SumsOut& to,
                     const Shape& out_shape, const Conv2dParams& params,
                     WeightPackCache* packs = nullptr, const PixelStrides* in_strides = nullptr);
void QuantizedConv2d(const int16_t* input, const Shape& in_shape, int64_t input_zero_point,
                     const int8_t* weight, const Shape& weight_shape, const SumsOut& to,
                     const Shape& out_shape, const Conv2dParams& params,
                     WeightPackCache* packs = nullptr, const PixelStrides* in_strides = nullptr);

/*! \brief q = clamp(round_half_even(x / scale) + zero_point, lo, hi), as exact floats. */
void Quantize(const float* x, int64_t size, float scale, int64_t zero_point, int64_t lo, int64_t hi,
              float* out);

/*! \brief x = scale * (q - zero_point) in float32. */
void Dequantize(const float* q, int64_t size, float scale, int64_t zero_point, float* out);

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_QUANTIZE_H_
