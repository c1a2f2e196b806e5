/*!
 * \file kernels/depthwise.cc
 * \brief Depthwise 2-D convolution (groups == channels, one output channel per group).
 *
 * A depthwise convolution has only kernel_h * kernel_w multiply-adds per output, so it is bound
 * by memory traffic, not arithmetic: both loops below keep the running sums in registers across
 * all taps and write each output once, instead of re-reading the output once per tap.
 */
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/conv_internal.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"
#include "kernels/window.h"

namespace example_npu {
namespace kernels {
namespace {

using simd::V8;

/*!
 * \brief kNV * 8 adjacent outputs of one stride-1 row, summed over all taps. Several independent
 * accumulators hide the multiply-add latency that a single running sum per 8 outputs would expose.
 */
template <int kNV>
EXAMPLE_NPU_INLINE void RowBlock(const float* rows, int64_t buf_w, const float* w, int64_t kernel_h,
                                 int64_t kernel_w, int64_t dh, int64_t dw, float* out, int64_t ow) {
  V8 acc[kNV] = {};
  for (int64_t kh = 0; kh < kernel_h; ++kh) {
    const float* src = rows + kh * dh * buf_w + ow;
    for (int64_t kw = 0; kw < kernel_w; ++kw) {
      const V8 wv = simd::Splat(w[kh * kernel_w + kw]);
      for (int v = 0; v < kNV; ++v) acc[v] += wv * simd::Load(src + kw * dw + v * simd::kLanes);
    }
  }
  for (int v = 0; v < kNV; ++v) simd::Store(out + v * simd::kLanes, acc[v]);
}

/*!
 * \brief kNV * 8 channels of one NHWC output pixel over its valid taps (tap_in[t] is the input
 * pixel of tap t, tap_w[t] its weight row), with independent accumulators as above.
 */
template <int kNV>
EXAMPLE_NPU_INLINE void ChannelBlock(const float* const* tap_in, const float* const* tap_w,
                                     int64_t taps, int64_t c, float* out_px) {
  V8 acc[kNV] = {};
  for (int64_t t = 0; t < taps; ++t) {
    for (int v = 0; v < kNV; ++v) {
      const int64_t cv = c + v * simd::kLanes;
      acc[v] += simd::Load(tap_in[t] + cv) * simd::Load(tap_w[t] + cv);
    }
  }
  for (int v = 0; v < kNV; ++v) simd::Store(out_px + c + v * simd::kLanes, acc[v]);
}

/*!
 * \brief NCHW planes [begin, end). Each plane is copied into a zero-bordered buffer so every tap
 * of every output is in bounds; then, with stride 1, eight adjacent outputs of a row are one
 * vector and each tap is one unaligned load and one multiply-add.
 */
void DepthwisePlanes(const float* input, const float* weight, float* out, const ConvGeometry& g,
                     const Conv2dParams& p, int64_t begin, int64_t end) {
  const int64_t sh = p.strides[0], sw = p.strides[1];
  const int64_t dh = p.dilation[0], dw = p.dilation[1];
  const int64_t pt = p.padding[0], pl = p.padding[1];
  // Buffer extent: whatever the last output's last tap reads, and at least the input itself.
  const int64_t buf_h = std::max((g.out_h - 1) * sh + (g.kernel_h - 1) * dh + 1, pt + g.in_h);
  const int64_t buf_w = std::max((g.out_w - 1) * sw + (g.kernel_w - 1) * dw + 1, pl + g.in_w);
  std::vector<float> padded(buf_h * buf_w, 0.0f);  // borders stay zero; the interior is rewritten
  const int64_t taps = g.kernel_h * g.kernel_w;
  const int64_t vec_end = sw == 1 ? g.out_w - g.out_w % simd::kLanes : 0;
  for (int64_t plane = begin; plane < end; ++plane) {
    const float* in_c = input + plane * g.in_h * g.in_w;
    for (int64_t ih = 0; ih < g.in_h; ++ih) {
      std::copy(in_c + ih * g.in_w, in_c + (ih + 1) * g.in_w, &padded[(ih + pt) * buf_w + pl]);
    }
    const float* w = weight + (plane % g.out_channels) * taps;
    float* out_c = out + plane * g.out_h * g.out_w;
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      const float* rows = padded.data() + oh * sh * buf_w;
      float* out_row = out_c + oh * g.out_w;
      int64_t ow = 0;
      for (; ow + 4 * simd::kLanes <= vec_end; ow += 4 * simd::kLanes) {
        RowBlock<4>(rows, buf_w, w, g.kernel_h, g.kernel_w, dh, dw, out_row + ow, ow);
      }
      // 1 to 3 vectors left: one block with that many accumulators (not 1 at a time, which
      // would serialise on the add latency).
      switch ((vec_end - ow) / simd::kLanes) {
        case 3:
          RowBlock<3>(rows, buf_w, w, g.kernel_h, g.kernel_w, dh, dw, out_row + ow, ow);
          break;
        case 2:
          RowBlock<2>(rows, buf_w, w, g.kernel_h, g.kernel_w, dh, dw, out_row + ow, ow);
          break;
        case 1:
          RowBlock<1>(rows, buf_w, w, g.kernel_h, g.kernel_w, dh, dw, out_row + ow, ow);
          break;
        default:
          break;
      }
      for (ow = vec_end; ow < g.out_w; ++ow) {
        float acc = 0.0f;
        for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
          const float* src = rows + kh * dh * buf_w + ow * sw;
          for (int64_t kw = 0; kw < g.kernel_w; ++kw) acc += w[kh * g.kernel_w + kw] * src[kw * dw];
        }
        out_row[ow] = acc;
      }
    }
  }
}

/*!
 * \brief NHWC rows [begin, end) of (n, oh) with an HWIO [kh, kw, 1, C] weight: per output pixel,
 * channels go eight to a vector and the valid taps accumulate in registers.
 */
void DepthwiseRows(const float* input, const float* weight, float* out, const ConvGeometry& g,
                   const Conv2dParams& p, int64_t begin, int64_t end) {
  const int64_t channels = g.in_channels;
  const int64_t vec_end = channels - channels % simd::kLanes;
  std::vector<const float*> tap_in(g.kernel_h * g.kernel_w);
  std::vector<const float*> tap_w(g.kernel_h * g.kernel_w);
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / g.out_h;
    const int64_t oh = r % g.out_h;
    const int64_t h_base = oh * p.strides[0] - p.padding[0];
    const Range khs = ValidRange(h_base, p.dilation[0], g.in_h, g.kernel_h);
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const int64_t w_base = ow * p.strides[1] - p.padding[1];
      const Range kws = ValidRange(w_base, p.dilation[1], g.in_w, g.kernel_w);
      float* out_px = out + ((n * g.out_h + oh) * g.out_w + ow) * channels;
      int64_t taps = 0;
      for (int64_t kh = khs.begin; kh < khs.end; ++kh) {
        for (int64_t kw = kws.begin; kw < kws.end; ++kw) {
          const int64_t ih = h_base + kh * p.dilation[0];
          const int64_t iw = w_base + kw * p.dilation[1];
          tap_in[taps] = input + ((n * g.in_h + ih) * g.in_w + iw) * channels;
          tap_w[taps++] = weight + (kh * g.kernel_w + kw) * channels;
        }
      }
      int64_t c = 0;
      for (; c + 4 * simd::kLanes <= vec_end; c += 4 * simd::kLanes) {
        ChannelBlock<4>(tap_in.data(), tap_w.data(), taps, c, out_px);
      }
      for (; c < vec_end; c += simd::kLanes) {
        ChannelBlock<1>(tap_in.data(), tap_w.data(), taps, c, out_px);
      }
      for (c = vec_end; c < channels; ++c) {
        float acc = 0.0f;
        for (int64_t t = 0; t < taps; ++t) acc += tap_in[t][c] * tap_w[t][c];
        out_px[c] = acc;
      }
    }
  }
}

}  // namespace

void DepthwiseConv(const float* input, const float* weight, float* out, const ConvGeometry& g,
                   const Conv2dParams& p) {
  const int64_t taps = g.kernel_h * g.kernel_w;
  if (p.data_layout == DataLayout::kNCHW) {
    const int64_t plane_work = std::max<int64_t>(g.out_h * g.out_w * taps, 1);
    ParallelFor(
        g.batch * g.in_channels, std::max<int64_t>(1, (1 << 16) / plane_work),
        [&](int64_t begin, int64_t end) { DepthwisePlanes(input, weight, out, g, p, begin, end); });
  } else {
    const int64_t row_work = std::max<int64_t>(g.out_w * g.in_channels * taps, 1);
    ParallelFor(
        g.batch * g.out_h, std::max<int64_t>(1, (1 << 16) / row_work),
        [&](int64_t begin, int64_t end) { DepthwiseRows(input, weight, out, g, p, begin, end); });
  }
}

}  // namespace kernels
}  // namespace example_npu
