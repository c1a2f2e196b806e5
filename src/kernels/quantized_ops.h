/*!
 * \file kernels/quantized_ops.h
 * \brief Integer kernels of the quantized glue ops: requantization, elementwise add / multiply,
 * pooling, lookup-table activations and softmax (conv / matmul are in quantize.h).
 *
 * Every tensor is quantized per tensor: real = scale * (q - zero_point), q an int8 / uint8 /
 * int16 value held exactly in a float32 tile (the emulator widens integer tiles on load and the
 * DMA narrows results on store). Two arithmetics, by where the model comes from:
 *
 * Rounding::kTvm (Relax QDQ graphs: ONNX, PyTorch, TVMScript) takes the float32 steps of TVM's
 * build of `dequantize -> op -> quantize` (qdq_float32.h), so the integers are TVM's bit for bit:
 *   D(q) = float32(q - zq) * sq,   Q(v) = clamp(zo + round_half_even(v / so))
 *   requantize: y = Q(D(x))          add: y = Q(D(a) + D(b))          multiply: y = Q(D(a) * D(b))
 *   max pool:   y = Q(max over the in-bounds taps of D(x))            (padding never wins)
 *   avg pool:   y = Q((D(x_1) + D(x_2) + ... in window order) / n)    n = the window's tap count
 *               (TVM's count_include_pad rule, see pool2d.cc)
 *   concat:     each input requantized into its slice
 *   softmax:    e_i = expf(D(x_i) - D(max(row))) (a table of every pair, built at load),
 *               y_i = Q(e_i / (e_1 + e_2 + ... in row order))
 *   lut:        y = table[x - offset] (256 entries for 8 bits; the table is TVM's float function)
 * clamp() is to [min, max] of QuantizedOutput: the output dtype's range, narrowed by a fused
 * relu / clip. tests/cpp/test_quantized_ops.cc holds naive references of each formula.
 *
 * Rounding::kTflite follows TFLite's integer kernels instead (tflite_arithmetic.h): requantize /
 * concat / max pool / multiply round with MultiplyByQuantizedMultiplier, add aligns both inputs 20
 * bits up first, avg pool is AVERAGE_POOL_2D's rounded division or MEAN's folded multiplier,
 * softmax is the gemmlowp fixed-point softmax.
 */
#ifndef EXAMPLE_NPU_KERNELS_QUANTIZED_OPS_H_
#define EXAMPLE_NPU_KERNELS_QUANTIZED_OPS_H_

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quantize.h"
#include "kernels/tflite_arithmetic.h"

namespace example_npu {
namespace kernels {

/*! \brief The output side of an integer op: zero point and clamp range. */
struct QuantizedOutput {
  int64_t zero_point = 0;
  int64_t min = -128;
  int64_t max = 127;
};

struct RequantizeParams {
  int64_t input_zero_point = 0;
  FixedPointMultiplier multiplier;  // input scale / output scale
  QuantizedOutput out;
  Rounding rounding = Rounding::kTvm;
  float input_scale = 1;  // kTvm: the float32 scales TVM's build divides and multiplies by
  float output_scale = 1;
};

/*! \brief The parameters rescaling (input_scale, input_zero_point) to the output's. */
RequantizeParams MakeRequantizeParams(double input_scale, int64_t input_zero_point,
                                      double output_scale, const QuantizedOutput& out,
                                      Rounding rounding = Rounding::kTvm);

/*! \brief Whether RequantizeParams maps every value of [lo, hi] to itself. */
bool IsIdentity(const RequantizeParams& params, int64_t lo, int64_t hi);

void Requantize(const float* x, int64_t size, const RequantizeParams& params, float* out);

/*! \brief Concatenation along `axis` of inputs each requantized by its own params. */
void QuantizedConcat(const std::vector<const float*>& inputs, const std::vector<Shape>& shapes,
                     int64_t axis, const std::vector<RequantizeParams>& params, float* out);

enum class QuantizedBinaryKind { kAdd, kMultiply };

struct QuantizedBinaryParams {
  QuantizedBinaryKind kind = QuantizedBinaryKind::kAdd;
  int64_t lhs_zero_point = 0;
  int64_t rhs_zero_point = 0;
  QuantizedOutput out;
  Rounding rounding = Rounding::kTvm;
  float lhs_scale = 1, rhs_scale = 1, output_scale = 1;  // kTvm: TVM's float32 steps
  // kTflite: add: lhs / rhs rescale each input, output the sum; multiply: lhs is the product's
  FixedPointMultiplier lhs, rhs, output;
};

QuantizedBinaryParams MakeQuantizedBinaryParams(QuantizedBinaryKind kind, double lhs_scale,
                                                int64_t lhs_zero_point, double rhs_scale,
                                                int64_t rhs_zero_point, double output_scale,
                                                const QuantizedOutput& out,
                                                Rounding rounding = Rounding::kTvm);

/*! \brief Elementwise add / multiply with numpy broadcasting of both shapes to out_shape. */
void QuantizedBinary(const float* lhs, const Shape& lhs_shape, const float* rhs,
                     const Shape& rhs_shape, float* out, const Shape& out_shape,
                     const QuantizedBinaryParams& params);

struct QuantizedPoolParams {
  Pool2dParams pool;
  int64_t input_zero_point = 0;
  float input_scale = 1, output_scale = 1;  // kTvm: TVM's float32 steps
  /*! \brief kTflite: max: one multiplier; avg: the multiplier for a window of n taps at index n. */
  std::vector<FixedPointMultiplier> multipliers;
  QuantizedOutput out;
  Rounding rounding = Rounding::kTvm;
  /*! \brief kTflite avg: MEAN's arithmetic (rescaled sum) instead of AVERAGE_POOL_2D's (the raw
   * values' rounded average; input and output quantization are the same). */
  bool tflite_mean = false;
};

QuantizedPoolParams MakeQuantizedPoolParams(const Pool2dParams& pool, double input_scale,
                                            int64_t input_zero_point, double output_scale,
                                            const QuantizedOutput& out,
                                            Rounding rounding = Rounding::kTvm,
                                            bool tflite_mean = false);

/*! \brief Integer max / average pooling (TVM's window semantics, pool2d.cc); the engine runs
 * NHWC tiles, NCHW tensors are transposed around it. */
void QuantizedPool2d(const float* input, const Shape& in_shape, float* out, const Shape& out_shape,
                     const QuantizedPoolParams& params);

struct LookupTable {
  std::vector<float> values;  // values[q - index_offset] for every input value q
  int64_t index_offset = -128;
};

void ApplyLookupTable(const float* x, int64_t size, const LookupTable& table, float* out);

/*! \brief The 8-bit softmax inputs the kTvm exponent table covers: int8 and uint8, [-128, 255]. */
constexpr int64_t kSoftmaxLowest = -128;
constexpr int64_t kSoftmaxValues = 384;

struct QuantizedSoftmaxParams {
  /*!
   * \brief kTvm: exp(D(q) - D(m)) with TVM's float32 steps (glibc's expf, as its LLVM build calls)
   * for every input q <= the row maximum m, at [(m - kSoftmaxLowest) * kSoftmaxValues + q -
   * kSoftmaxLowest].
   */
  std::vector<float> exp_table;
  float output_scale = 1;
  QuantizedOutput out;
  Rounding rounding = Rounding::kTvm;
  tflite::SoftmaxTables tflite;  // kTflite: the fixed-point tables (output scale 1/256)
};

QuantizedSoftmaxParams MakeQuantizedSoftmaxParams(double input_scale, int64_t input_zero_point,
                                                  double output_scale, const QuantizedOutput& out,
                                                  Rounding rounding = Rounding::kTvm);

/*! \brief Quantized softmax of 8-bit x along `axis` (0 <= axis < rank). */
void QuantizedSoftmax(const float* x, const Shape& shape, int64_t axis,
                      const QuantizedSoftmaxParams& params, float* out);

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_QUANTIZED_OPS_H_
