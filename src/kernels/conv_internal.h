/*!
 * \file kernels/conv_internal.h
 * \brief Pieces shared by the convolution kernels (conv2d.cc, depthwise.cc); not a public API.
 */
#ifndef EXAMPLE_NPU_KERNELS_CONV_INTERNAL_H_
#define EXAMPLE_NPU_KERNELS_CONV_INTERNAL_H_

#include <cstdint>

#include "kernels/kernels.h"

namespace example_npu {
namespace kernels {

/*! \brief Sizes of one convolution, independent of the memory layouts. */
struct ConvGeometry {
  int64_t batch;
  int64_t in_channels;
  int64_t in_h;
  int64_t in_w;
  int64_t out_channels;
  int64_t kernel_h;
  int64_t kernel_w;
  int64_t out_h;
  int64_t out_w;
  int64_t group_in;   // input channels per group
  int64_t group_out;  // output channels per group
};

/*!
 * \brief Depthwise convolution (one input and one output channel per group), with the weight in
 * the layout matching the data (OIHW for NCHW, HWIO for NHWC). Parallel over planes or rows.
 */
void DepthwiseConv(const float* input, const float* weight, float* out, const ConvGeometry& g,
                   const Conv2dParams& p);

/*! \brief Depthwise NHWC convolution with strided input and output pixels (see kernels.h). */
void DepthwiseNhwc(const float* input, const PixelStrides& in_strides, const float* weight,
                   float* out, const PixelStrides& out_strides, const ConvGeometry& g,
                   const Conv2dParams& p);

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_CONV_INTERNAL_H_
