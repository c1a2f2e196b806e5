/*!
 * \file kernels/conv2d.cc
 * \brief Direct grouped / dilated / strided 2-D convolution for the matrix engine.
 */
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/window.h"

namespace example_npu {
namespace kernels {
namespace {

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

ConvGeometry MakeGeometry(const Shape& in_shape, const Shape& weight_shape, const Shape& out_shape,
                          const Conv2dParams& p) {
  TVM_FFI_ICHECK_EQ(in_shape.size(), 4) << "Conv2d: input must be 4-D";
  TVM_FFI_ICHECK_EQ(weight_shape.size(), 4) << "Conv2d: weight must be 4-D";
  TVM_FFI_ICHECK_EQ(out_shape.size(), 4) << "Conv2d: output must be 4-D";
  TVM_FFI_ICHECK(p.groups >= 1 && p.strides[0] >= 1 && p.strides[1] >= 1 && p.dilation[0] >= 1 &&
                 p.dilation[1] >= 1)
      << "Conv2d: groups, strides and dilation must be positive";
  const bool nchw = p.data_layout == DataLayout::kNCHW;
  const bool oihw = p.kernel_layout == KernelLayout::kOIHW;
  ConvGeometry g{};
  g.batch = in_shape[0];
  g.in_channels = nchw ? in_shape[1] : in_shape[3];
  g.in_h = nchw ? in_shape[2] : in_shape[1];
  g.in_w = nchw ? in_shape[3] : in_shape[2];
  g.out_channels = oihw ? weight_shape[0] : weight_shape[3];
  g.group_in = oihw ? weight_shape[1] : weight_shape[2];
  g.kernel_h = oihw ? weight_shape[2] : weight_shape[0];
  g.kernel_w = oihw ? weight_shape[3] : weight_shape[1];
  g.out_h = nchw ? out_shape[2] : out_shape[1];
  g.out_w = nchw ? out_shape[3] : out_shape[2];
  const int64_t out_c = nchw ? out_shape[1] : out_shape[3];

  TVM_FFI_ICHECK(g.in_channels % p.groups == 0 && g.out_channels % p.groups == 0)
      << "Conv2d: channels " << g.in_channels << "/" << g.out_channels
      << " are not divisible by groups " << p.groups;
  TVM_FFI_ICHECK_EQ(g.group_in, g.in_channels / p.groups)
      << "Conv2d: weight input channels must be C_in / groups";
  g.group_out = g.out_channels / p.groups;
  TVM_FFI_ICHECK(out_shape[0] == g.batch && out_c == g.out_channels)
      << "Conv2d: output batch/channels do not match input and weight";
  TVM_FFI_ICHECK(g.out_h == WindowOutputSize(g.in_h, g.kernel_h, p.strides[0], p.dilation[0],
                                             p.padding[0], p.padding[2]) &&
                 g.out_w == WindowOutputSize(g.in_w, g.kernel_w, p.strides[1], p.dilation[1],
                                             p.padding[1], p.padding[3]))
      << "Conv2d: output spatial size does not match the attributes";
  return g;
}

/*!
 * \brief NCHW x OIHW: one output plane at a time, adding each (input channel, tap) as a scaled
 * shifted copy of the input plane, so the inner loop runs along the output width.
 */
void ConvNCHW(const float* input, const float* weight, float* out, const ConvGeometry& g,
              const Conv2dParams& p) {
  const int64_t sh = p.strides[0];
  const int64_t sw = p.strides[1];
  const int64_t in_plane = g.in_h * g.in_w;
  const int64_t out_plane = g.out_h * g.out_w;
  const int64_t taps = g.kernel_h * g.kernel_w;
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t co = 0; co < g.out_channels; ++co) {
      float* out_c = out + (n * g.out_channels + co) * out_plane;
      std::fill(out_c, out_c + out_plane, 0.0f);
      const int64_t first_in = (co / g.group_out) * g.group_in;
      for (int64_t ci = 0; ci < g.group_in; ++ci) {
        const float* in_c = input + (n * g.in_channels + first_in + ci) * in_plane;
        const float* w_c = weight + (co * g.group_in + ci) * taps;
        for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
          const int64_t h_off = kh * p.dilation[0] - p.padding[0];
          const Range rows = ValidRange(h_off, sh, g.in_h, g.out_h);
          for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
            const int64_t w_off = kw * p.dilation[1] - p.padding[1];
            const Range cols = ValidRange(w_off, sw, g.in_w, g.out_w);
            const float wv = w_c[kh * g.kernel_w + kw];
            for (int64_t oh = rows.begin; oh < rows.end; ++oh) {
              const float* in_row = in_c + (oh * sh + h_off) * g.in_w;
              float* out_row = out_c + oh * g.out_w;
              if (sw == 1) {
                for (int64_t ow = cols.begin; ow < cols.end; ++ow) {
                  out_row[ow] += wv * in_row[ow + w_off];
                }
              } else {
                for (int64_t ow = cols.begin; ow < cols.end; ++ow) {
                  out_row[ow] += wv * in_row[ow * sw + w_off];
                }
              }
            }
          }
        }
      }
    }
  }
}

/*! \brief out[0:n] += x * w[0:n]. */
inline void Axpy(float x, const float* __restrict__ w, float* __restrict__ out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] += x * w[j];
}

/*! \brief out[0:n] += in[0:n] * w[0:n] (depthwise: one weight per channel). */
inline void MulAcc(const float* __restrict__ in, const float* __restrict__ w,
                   float* __restrict__ out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] += in[j] * w[j];
}

/*!
 * \brief NHWC x HWIO: one output pixel at a time; each input channel scales a contiguous HWIO row
 * of output-channel weights, so the inner loop runs along the output channels.
 */
void ConvNHWC(const float* input, const float* weight, float* out, const ConvGeometry& g,
              const Conv2dParams& p) {
  const int64_t groups = p.groups;
  const bool depthwise = g.group_in == 1 && g.group_out == 1;
  const int64_t tap_stride = g.group_in * g.out_channels;
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      const int64_t h_base = oh * p.strides[0] - p.padding[0];
      const Range khs = ValidRange(h_base, p.dilation[0], g.in_h, g.kernel_h);
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        const int64_t w_base = ow * p.strides[1] - p.padding[1];
        const Range kws = ValidRange(w_base, p.dilation[1], g.in_w, g.kernel_w);
        float* out_px = out + ((n * g.out_h + oh) * g.out_w + ow) * g.out_channels;
        std::fill(out_px, out_px + g.out_channels, 0.0f);
        for (int64_t kh = khs.begin; kh < khs.end; ++kh) {
          const int64_t ih = h_base + kh * p.dilation[0];
          for (int64_t kw = kws.begin; kw < kws.end; ++kw) {
            const int64_t iw = w_base + kw * p.dilation[1];
            const float* in_px = input + ((n * g.in_h + ih) * g.in_w + iw) * g.in_channels;
            const float* w_tap = weight + (kh * g.kernel_w + kw) * tap_stride;
            if (depthwise) {
              MulAcc(in_px, w_tap, out_px, g.out_channels);
              continue;
            }
            for (int64_t grp = 0; grp < groups; ++grp) {
              for (int64_t ci = 0; ci < g.group_in; ++ci) {
                Axpy(in_px[grp * g.group_in + ci], w_tap + ci * g.out_channels + grp * g.group_out,
                     out_px + grp * g.group_out, g.group_out);
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace

void Conv2d(const float* input, const Shape& in_shape, const float* weight,
            const Shape& weight_shape, float* out, const Shape& out_shape,
            const Conv2dParams& params) {
  const ConvGeometry g = MakeGeometry(in_shape, weight_shape, out_shape, params);
  if (NumElements(out_shape) == 0) return;
  const bool nchw = params.data_layout == DataLayout::kNCHW;
  const bool oihw = params.kernel_layout == KernelLayout::kOIHW;
  if (nchw == oihw) {
    (nchw ? ConvNCHW : ConvNHWC)(input, weight, out, g, params);
    return;
  }
  // Mixed layouts: repack the (small) weight into the layout matching the data once, so only two
  // loop nests need to be fast.
  std::vector<float> repacked(static_cast<size_t>(NumElements(weight_shape)));
  if (nchw) {
    Transpose(weight, weight_shape, {3, 2, 0, 1}, repacked.data());  // HWIO -> OIHW
    ConvNCHW(input, repacked.data(), out, g, params);
  } else {
    Transpose(weight, weight_shape, {2, 3, 1, 0}, repacked.data());  // OIHW -> HWIO
    ConvNHWC(input, repacked.data(), out, g, params);
  }
}

}  // namespace kernels
}  // namespace example_npu
