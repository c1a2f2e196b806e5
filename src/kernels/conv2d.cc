/*!
 * \file kernels/conv2d.cc
 * \brief Direct grouped / dilated / strided 2-D convolution for the matrix engine.
 */
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/conv_internal.h"
#include "kernels/direct_gemm.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "kernels/parallel.h"
#include "kernels/window.h"

namespace example_npu {
namespace kernels {
namespace {

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
 * \brief Writes `len` values into columns [q, q + len) of row p of a packed B panel (kGemmNR-wide
 * slivers of kb rows each): src[t * stride] for t < len, or zeros when src is null.
 */
inline void PutPackedRow(float* dst, int64_t kb, int64_t p, int64_t q, int64_t len,
                         const float* src, int64_t stride) {
  while (len > 0) {
    const int64_t c = q % kGemmNR;
    const int64_t run = std::min(len, kGemmNR - c);
    float* d = dst + (q / kGemmNR) * kb * kGemmNR + p * kGemmNR + c;
    if (src == nullptr) {
      std::fill(d, d + run, 0.0f);
    } else if (stride == 1) {
      std::copy(src, src + run, d);
      src += run;
    } else {
      for (int64_t t = 0; t < run; ++t) d[t] = src[t * stride];
      src += run * stride;
    }
    q += run;
    len -= run;
  }
}

/*!
 * \brief NCHW x OIHW of one (batch, group) as a GEMM: out[co, pixel] = W[co, (ci, kh, kw)] *
 * X[(ci, kh, kw), pixel], where X is the implicit im2col matrix of the input, built panel by
 * panel straight into the packed layout (no im2col buffer).
 */
void ConvGemmNCHW(const float* input, const float* weight, float* out, const ConvGeometry& g,
                  const Conv2dParams& p) {
  const int64_t taps = g.kernel_h * g.kernel_w;
  const int64_t pixels = g.out_h * g.out_w;
  const int64_t depth = g.group_in * taps;
  const bool pointwise = taps == 1 && p.strides[0] == 1 && p.strides[1] == 1 && p.padding[0] == 0 &&
                         p.padding[1] == 0 && g.out_h == g.in_h && g.out_w == g.in_w;
  GemmPackB im2col = [&](int64_t k0, int64_t kb, int64_t j0, int64_t cols, float* dst) {
    for (int64_t pk = 0; pk < kb; ++pk) {
      const int64_t k = k0 + pk;
      const int64_t ci = k / taps;
      const int64_t kh = (k % taps) / g.kernel_w;
      const int64_t kw = k % g.kernel_w;
      const float* in_c = input + ci * g.in_h * g.in_w;
      const int64_t h_off = kh * p.dilation[0] - p.padding[0];
      const int64_t w_off = kw * p.dilation[1] - p.padding[1];
      const Range cols_ok = ValidRange(w_off, p.strides[1], g.in_w, g.out_w);
      // Walk the panel's pixels one output row segment at a time.
      for (int64_t j = j0; j < j0 + cols;) {
        const int64_t oh = j / g.out_w;
        const int64_t ow = j % g.out_w;
        const int64_t seg_end = std::min(g.out_w, ow + (j0 + cols - j));
        const int64_t q = j - j0;
        const int64_t ih = oh * p.strides[0] + h_off;
        if (ih < 0 || ih >= g.in_h) {
          PutPackedRow(dst, kb, pk, q, seg_end - ow, nullptr, 0);
        } else {
          const int64_t lo = std::clamp(cols_ok.begin, ow, seg_end);
          const int64_t hi = std::clamp(cols_ok.end, lo, seg_end);
          PutPackedRow(dst, kb, pk, q, lo - ow, nullptr, 0);
          PutPackedRow(dst, kb, pk, q + lo - ow, hi - lo,
                       in_c + ih * g.in_w + lo * p.strides[1] + w_off, p.strides[1]);
          PutPackedRow(dst, kb, pk, q + hi - ow, seg_end - hi, nullptr, 0);
        }
        j += seg_end - ow;
      }
    }
  };
  GemmProblem gemm{g.group_out,
                   pixels,
                   depth,
                   PackRowMajorA(weight, depth),
                   pointwise ? PackRowMajorB(input, pixels) : im2col,
                   out,
                   pixels};
  Gemm(gemm);
}

/*! \brief Grow-only per-thread scratch (0: padded input, 1: row and tap offsets). */
template <typename T>
T* ConvScratch(int which, size_t elements) {
  thread_local std::vector<T> buffers[2];
  std::vector<T>& buffer = buffers[which];
  if (buffer.size() < elements) buffer.resize(elements);
  return buffer.data();
}

/*!
 * \brief The rows of the implicit im2col matrix of an NHWC convolution gathered into `buffer`
 * (pixel-major, one run of `c` channels per tap, zeros for taps in the padding); `offsets` gets
 * DirectGemm's row and tap offsets into it. Its size is the convolution's own work, pixels x
 * taps x channels, whatever the padding, strides and dilation.
 */
void GatherIm2col(const float* input, const ConvGeometry& g, const Conv2dParams& p, float* buffer,
                  int64_t* offsets) {
  const int64_t c = g.in_channels;
  const int64_t pixels = g.out_h * g.out_w;
  const int64_t taps = g.kernel_h * g.kernel_w;
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const int64_t pixel = oh * g.out_w + ow;
      offsets[pixel] = pixel * taps * c;
      for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
        const int64_t ih = oh * p.strides[0] - p.padding[0] + kh * p.dilation[0];
        for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
          const int64_t iw = ow * p.strides[1] - p.padding[1] + kw * p.dilation[1];
          float* dst = buffer + offsets[pixel] + (kh * g.kernel_w + kw) * c;
          if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) {
            std::fill(dst, dst + c, 0.0f);
          } else {
            std::copy_n(input + (ih * g.in_w + iw) * c, c, dst);
          }
        }
      }
    }
  }
  for (int64_t tap = 0; tap < taps; ++tap) offsets[pixels + tap] = tap * c;
}

/*!
 * \brief NHWC x HWIO of one image: out[pixel, co] = X[pixel, (kh, kw, ci)] * W[(kh, kw, ci), co].
 * HWIO is already that [depth, C_out] matrix and each row of the implicit im2col matrix X is one
 * run of contiguous input channels per tap, so DirectGemm reads both in place: only a padded
 * input (when the convolution pads) is copied, or, when that copy would be larger than the
 * convolution's work (huge padding, strides or dilation), the im2col rows themselves.
 */
void ConvDirectNHWC(const float* input, const float* weight, float* out, const ConvGeometry& g,
                    const Conv2dParams& p) {
  const int64_t c = g.in_channels;
  const bool padded = p.padding[0] || p.padding[1] || p.padding[2] || p.padding[3];
  const int64_t pixels = g.out_h * g.out_w;
  const int64_t taps = g.kernel_h * g.kernel_w;
  const int64_t hp = SaturatingAdd(SaturatingAdd(g.in_h, p.padding[0]), p.padding[2]);
  const int64_t wp = SaturatingAdd(SaturatingAdd(g.in_w, p.padding[1]), p.padding[3]);
  int64_t* offsets = ConvScratch<int64_t>(1, static_cast<size_t>(pixels + taps));
  const float* src = input;
  const bool gathered = padded && !PaddedCopyFits(hp, wp, g.in_h, g.in_w, pixels, taps);
  if (gathered) {
    float* buffer = ConvScratch<float>(0, static_cast<size_t>(pixels * taps * c));
    GatherIm2col(input, g, p, buffer, offsets);
    src = buffer;
  } else {
    if (padded) {
      // Zeros written only where the padding is (the rows above and below, each row's ends).
      float* buffer = ConvScratch<float>(0, static_cast<size_t>(hp * wp * c));
      const int64_t row = wp * c, left = p.padding[1] * c, right = p.padding[3] * c;
      std::fill_n(buffer, p.padding[0] * row, 0.0f);
      for (int64_t h = 0; h < g.in_h; ++h) {
        float* dst = buffer + (h + p.padding[0]) * row;
        std::fill_n(dst, left, 0.0f);
        std::copy_n(input + h * g.in_w * c, g.in_w * c, dst + left);
        std::fill_n(dst + left + g.in_w * c, right, 0.0f);
      }
      std::fill_n(buffer + (p.padding[0] + g.in_h) * row, p.padding[2] * row, 0.0f);
      src = buffer;
    }
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        offsets[oh * g.out_w + ow] = (oh * p.strides[0] * wp + ow * p.strides[1]) * c;
      }
    }
    for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
      for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
        offsets[pixels + kh * g.kernel_w + kw] = (kh * p.dilation[0] * wp + kw * p.dilation[1]) * c;
      }
    }
  }
  DirectRows rows;
  rows.row_offsets = offsets;
  rows.segment_offsets = offsets + pixels;
  rows.segments = taps;
  rows.depth = g.group_in;
  // With one group, the taps along a kernel row lie next to each other (dilation 1: the next
  // tap is the next pixel's channels) and gathered rows are whole runs, so a kernel row, or a
  // whole gathered row, is one segment: the same products in the same order, in fewer, longer
  // runs (a 16 x 16 patch embedding of 3 channels: 16 runs of 48 instead of 256 of 3).
  if (p.groups == 1 && gathered) {
    rows.segments = 1;
    rows.depth = taps * c;
  } else if (p.groups == 1 && p.dilation[1] == 1) {
    for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
      offsets[pixels + kh] = offsets[pixels + kh * g.kernel_w];
    }
    rows.segments = g.kernel_h;
    rows.depth = g.kernel_w * c;
  }
  for (int64_t grp = 0; grp < p.groups; ++grp) {
    DirectGemm(pixels, g.group_out, src + grp * g.group_in, rows, weight + grp * g.group_out,
               g.out_channels, out + grp * g.group_out, g.out_channels, false);
  }
}

/*! \brief Any non-depthwise convolution: NCHW one GEMM per (batch, group) with batches over
 * threads, NHWC in place image by image (the kernel splits its rows over the threads). */
void ConvGemm(const float* input, const float* weight, float* out, const ConvGeometry& g,
              const Conv2dParams& p) {
  const int64_t in_image = g.in_channels * g.in_h * g.in_w;
  const int64_t out_image = g.out_channels * g.out_h * g.out_w;
  if (p.data_layout == DataLayout::kNHWC) {
    for (int64_t n = 0; n < g.batch; ++n) {
      ConvDirectNHWC(input + n * in_image, weight, out + n * out_image, g, p);
    }
    return;
  }
  const int64_t groups = p.groups;
  const int64_t macs = g.group_out * g.out_h * g.out_w * g.group_in * g.kernel_h * g.kernel_w;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(macs, 1));
  ParallelFor(g.batch * groups, grain, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / groups;
      const int64_t grp = item % groups;
      const int64_t plane = g.in_h * g.in_w;
      ConvGemmNCHW(input + n * in_image + grp * g.group_in * plane,
                   weight + grp * g.group_out * g.group_in * g.kernel_h * g.kernel_w,
                   out + n * out_image + grp * g.group_out * g.out_h * g.out_w, g, p);
    }
  });
}

}  // namespace

void Conv2d(const float* input, const Shape& in_shape, const float* weight,
            const Shape& weight_shape, float* out, const Shape& out_shape,
            const Conv2dParams& params) {
  const ConvGeometry g = MakeGeometry(in_shape, weight_shape, out_shape, params);
  if (NumElements(out_shape) == 0) return;
  const bool nchw = params.data_layout == DataLayout::kNCHW;
  const bool oihw = params.kernel_layout == KernelLayout::kOIHW;
  const bool depthwise = g.group_in == 1 && g.group_out == 1;
  auto run = depthwise ? DepthwiseConv : ConvGemm;
  if (nchw == oihw) {
    run(input, weight, out, g, params);
    return;
  }
  // Mixed layouts: repack the (small) weight into the layout matching the data once, so only two
  // loop nests need to be fast.
  std::vector<float> repacked(static_cast<size_t>(NumElements(weight_shape)));
  if (nchw) {
    Transpose(weight, weight_shape, {3, 2, 0, 1}, repacked.data());  // HWIO -> OIHW
    run(input, repacked.data(), out, g, params);
  } else {
    Transpose(weight, weight_shape, {2, 3, 1, 0}, repacked.data());  // OIHW -> HWIO
    run(input, repacked.data(), out, g, params);
  }
}

bool IsDepthwiseNhwc(const Shape& in_shape, const Shape& weight_shape, const Conv2dParams& params) {
  return params.data_layout == DataLayout::kNHWC && params.kernel_layout == KernelLayout::kHWIO &&
         in_shape.size() == 4 && weight_shape.size() == 4 && params.groups == in_shape[3] &&
         weight_shape[2] == 1 && weight_shape[3] == params.groups;
}

void DepthwiseConvStrided(const float* input, const Shape& in_shape, const PixelStrides& in_strides,
                          const float* weight, const Shape& weight_shape, float* out,
                          const Shape& out_shape, const PixelStrides& out_strides,
                          const Conv2dParams& params) {
  TVM_FFI_ICHECK(IsDepthwiseNhwc(in_shape, weight_shape, params))
      << "DepthwiseConvStrided: not a depthwise NHWC / HWIO convolution";
  const ConvGeometry g = MakeGeometry(in_shape, weight_shape, out_shape, params);
  if (NumElements(out_shape) == 0) return;
  DepthwiseNhwc(input, in_strides, weight, out, out_strides, g, params);
}

}  // namespace kernels
}  // namespace example_npu
