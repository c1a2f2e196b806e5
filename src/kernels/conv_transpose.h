/*!
 * \file kernels/conv_transpose.h
 * \brief Transposed 2-D convolution on the matrix engine, as stride_h x stride_w phases.
 *
 * TVM's conv2d_transpose (topi group_conv2d_transpose_nchw) dilates the input with stride - 1
 * zeros between pixels and runs a convolution over it: three of four multiplies of a stride-2
 * layer are by inserted zeros. The NPU instead splits the output into its stride^2 phases
 * (sub-pixel decomposition): the outputs o with (o + origin) mod stride == r are one small
 * convolution of the undilated input with the kernel taps k where (r - k * dilation) mod stride
 * == 0. Every multiply is a real one; the phases are independent GEMMs.
 */
#ifndef EXAMPLE_NPU_KERNELS_CONV_TRANSPOSE_H_
#define EXAMPLE_NPU_KERNELS_CONV_TRANSPOSE_H_

#include <array>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace example_npu {
namespace kernels {

/*! \brief Weight layouts: IOHW is Relax's (in channels, out channels / groups, kh, kw); HWIO is
 * how tiles hold it (kh, kw, in channels, out channels / groups). */
enum class TransposedKernelLayout { kIOHW, kHWIO };

/*!
 * \brief A transposed convolution (of a whole tensor or of a tile): output index o reads input
 * index i through kernel tap k when o + origin == i * stride + k * dilation. For the whole tensor
 * origin is the padding before (top, left); a tile's origin is relative to its own boxes.
 */
struct ConvTransposeParams {
  std::array<int64_t, 2> strides{1, 1};
  std::array<int64_t, 2> dilation{1, 1};
  std::array<int64_t, 2> origin{0, 0};
  int64_t groups = 1;
  DataLayout data_layout = DataLayout::kNCHW;
  TransposedKernelLayout kernel_layout = TransposedKernelLayout::kIOHW;
};

/*!
 * \brief out = conv2d_transpose(input, weight): input / out 4-D in data_layout, weight 4-D in
 * kernel_layout with its in-channel extent equal to the input's. Outputs no input pixel reaches
 * are 0.
 */
void Conv2dTranspose(const float* input, const Shape& in_shape, const float* weight,
                     const Shape& weight_shape, float* out, const Shape& out_shape,
                     const ConvTransposeParams& params);

/*!
 * \brief The quantized op on NHWC input / HWIO int8 weight tiles: acc (+)= the exact integer sums
 * of (input - input_zero_point) x weight over each output pixel's taps (accumulators in int64, so
 * no sum of int8 x int8 products can overflow); outputs no input pixel reaches get 0 (+ nothing).
 * In is int8_t, uint8_t or int16_t (instantiated in conv_transpose.cc); the emulator's quantized
 * step picks it from the tile's dtype.
 */
template <typename In>
void QuantizedConv2dTranspose(const In* input, const Shape& in_shape, int64_t input_zero_point,
                              const int8_t* weight, const Shape& weight_shape, int64_t* acc,
                              const Shape& out_shape, const ConvTransposeParams& params,
                              bool accumulate);

/*! \brief Input indices [begin, end) of one axis read by outputs [out_first, out_end), before
 * clipping to the input: i with out_first + origin - (kernel - 1) * dilation <= i * stride and
 * i * stride <= out_end - 1 + origin. */
struct IndexSpan {
  int64_t begin;
  int64_t end;
};
IndexSpan TransposedSourceSpan(int64_t out_first, int64_t out_end, int64_t origin, int64_t stride,
                               int64_t dilation, int64_t kernel);

/*! \brief One phase of a tile: its output pixels and the kernel taps each of them uses. */
struct TransposedPhase {
  int64_t pixels;
  int64_t taps;
};

/*!
 * \brief The stride_h x stride_w phases of an out_h x out_w tile (a phase with no pixels is left
 * out; one with no taps has outputs of 0 and needs no GEMM). Border pixels whose taps fall off
 * the input still run the phase's full GEMM, as a matrix engine would.
 */
std::vector<TransposedPhase> TransposedPhases(const ConvTransposeParams& params, int64_t out_h,
                                              int64_t out_w, int64_t kernel_h, int64_t kernel_w);

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_CONV_TRANSPOSE_H_
