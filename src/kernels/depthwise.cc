/*!
 * \file kernels/depthwise.cc
 * \brief Depthwise 2-D convolution (groups == channels, one output channel per group).
 *
 * A depthwise convolution has only kernel_h * kernel_w multiply-adds per output, so it is bound
 * by memory traffic, not arithmetic: both loops below keep the running sums in registers across
 * all taps and write each output once, instead of re-reading the output once per tap.
 */
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
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
 * \brief Channels [c, c + kNV * 8) of kP output pixels that are `pixel_step` input elements
 * apart, over the same taps (tap_in[t] is tap t of the first pixel, tap_w[t] its weights).
 * kP * kNV independent accumulators keep the multiply-add units busy; each weight vector is
 * loaded once for all kP pixels.
 */
template <int kP, int kNV>
EXAMPLE_NPU_INLINE void PixelBlock(const float* const* tap_in, const float* const* tap_w,
                                   int64_t taps, int64_t pixel_step, int64_t c, float* out_px,
                                   int64_t out_step) {
  V8 acc[kP][kNV] = {};
  for (int64_t t = 0; t < taps; ++t) {
    V8 w[kNV];
    for (int v = 0; v < kNV; ++v) w[v] = simd::Load(tap_w[t] + c + v * simd::kLanes);
    const float* in = tap_in[t] + c;
    for (int p = 0; p < kP; ++p) {
      for (int v = 0; v < kNV; ++v) {
        acc[p][v] += simd::Load(in + p * pixel_step + v * simd::kLanes) * w[v];
      }
    }
  }
  for (int p = 0; p < kP; ++p) {
    for (int v = 0; v < kNV; ++v) {
      simd::Store(out_px + p * out_step + c + v * simd::kLanes, acc[p][v]);
    }
  }
}

/*!
 * \brief Every channel of kP pixels (input pixels `pixel_step` apart, output pixels `out_step`
 * apart): two vectors at a time, then one, then scalars.
 */
template <int kP>
void Pixels(const float* const* tap_in, const float* const* tap_w, int64_t taps, int64_t pixel_step,
            int64_t channels, float* out_px, int64_t out_step) {
  const int64_t vec_end = channels - channels % simd::kLanes;
  int64_t c = 0;
  for (; c + 2 * simd::kLanes <= vec_end; c += 2 * simd::kLanes) {
    PixelBlock<kP, 2>(tap_in, tap_w, taps, pixel_step, c, out_px, out_step);
  }
  if (c < vec_end) PixelBlock<kP, 1>(tap_in, tap_w, taps, pixel_step, c, out_px, out_step);
  for (c = vec_end; c < channels; ++c) {
    for (int p = 0; p < kP; ++p) {
      float acc = 0.0f;
      for (int64_t t = 0; t < taps; ++t) acc += tap_in[t][p * pixel_step + c] * tap_w[t][c];
      out_px[p * out_step + c] = acc;
    }
  }
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
  // Buffer extent: whatever the last output's last tap reads, and at least the input itself
  // (DepthwiseConv checked that it is no larger than the work).
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
 * \brief NHWC rows [begin, end) of (n, oh) with an HWIO [kh, kw, 1, C] weight; input and output
 * pixels are addressed through their strides (channels contiguous). Channels go eight to a
 * vector; output pixels whose taps are all inside the row go four at a time (they share the tap
 * pattern, shifted by the stride), edge pixels one at a time over their valid taps.
 */
void DepthwiseRows(const float* input, const PixelStrides& in, const float* weight, float* out,
                   const PixelStrides& out_strides, const ConvGeometry& g, const Conv2dParams& p,
                   bool nonfinite_weights, int64_t begin, int64_t end) {
  const int64_t channels = g.in_channels;
  const int64_t sw = p.strides[1], dw = p.dilation[1];
  std::vector<const float*> tap_in(g.kernel_h * g.kernel_w);
  std::vector<const float*> tap_w(g.kernel_h * g.kernel_w);
  // Output columns whose kernel_w taps all fall inside the input row.
  const int64_t interior_begin = std::min(g.out_w, (p.padding[1] + sw - 1) / sw);
  const int64_t last_tap = (g.kernel_w - 1) * dw;
  const int64_t last_start = g.in_w - 1 - last_tap + p.padding[1];  // of an interior window
  const int64_t interior_end =
      last_start < 0 ? interior_begin
                     : std::max(interior_begin, std::min(g.out_w, last_start / sw + 1));
  const int64_t out_step = out_strides.pixel;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / g.out_h;
    const int64_t oh = r % g.out_h;
    const int64_t h_base = oh * p.strides[0] - p.padding[0];
    const Range khs = ValidRange(h_base, p.dilation[0], g.in_h, g.kernel_h);
    const float* in_batch = input + n * in.batch;
    float* out_row = out + n * out_strides.batch + oh * out_strides.row;
    // The taps of output column ow; returns how many are valid.
    auto gather_taps = [&](int64_t ow) {
      const int64_t w_base = ow * sw - p.padding[1];
      const Range kws = ValidRange(w_base, dw, g.in_w, g.kernel_w);
      int64_t taps = 0;
      for (int64_t kh = khs.begin; kh < khs.end; ++kh) {
        for (int64_t kw = kws.begin; kw < kws.end; ++kw) {
          const int64_t ih = h_base + kh * p.dilation[0];
          tap_in[taps] = in_batch + ih * in.row + (w_base + kw * dw) * in.pixel;
          tap_w[taps++] = weight + (kh * g.kernel_w + kw) * channels;
        }
      }
      return taps;
    };
    const int64_t step = sw * in.pixel;
    int64_t ow = 0;
    for (; ow < interior_begin; ++ow) {
      Pixels<1>(tap_in.data(), tap_w.data(), gather_taps(ow), step, channels,
                out_row + ow * out_step, out_step);
    }
    if (ow + 4 <= interior_end) {
      // Interior blocks share one tap pattern: gather it once, then shift it along the row.
      const int64_t taps = gather_taps(ow);
      for (; ow + 4 <= interior_end; ow += 4) {
        Pixels<4>(tap_in.data(), tap_w.data(), taps, step, channels, out_row + ow * out_step,
                  out_step);
        for (int64_t t = 0; t < taps; ++t) tap_in[t] += 4 * step;
      }
    }
    for (; ow < g.out_w; ++ow) {
      Pixels<1>(tap_in.data(), tap_w.data(), gather_taps(ow), step, channels,
                out_row + ow * out_step, out_step);
    }
    if (!nonfinite_weights) continue;
    // TVM multiplies the zero padding too: 0 * inf and 0 * NaN make those outputs NaN.
    for (ow = 0; ow < g.out_w; ++ow) {
      const Range kws = ValidRange(ow * sw - p.padding[1], dw, g.in_w, g.kernel_w);
      float* out_px = out_row + ow * out_step;
      for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
        for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
          if (kh >= khs.begin && kh < khs.end && kw >= kws.begin && kw < kws.end) continue;
          const float* w = weight + (kh * g.kernel_w + kw) * channels;
          for (int64_t c = 0; c < channels; ++c) {
            if (!std::isfinite(w[c])) out_px[c] = std::numeric_limits<float>::quiet_NaN();
          }
        }
      }
    }
  }
}

/*!
 * \brief NCHW planes [begin, end) with every tap bounds-tested: for geometries whose padded
 * plane (DepthwisePlanes) would be larger than the work. Padded taps add weight * 0, as in
 * DepthwisePlanes and TVM (a non-finite weight makes them NaN).
 */
void DepthwisePlanesTested(const float* input, const float* weight, float* out,
                           const ConvGeometry& g, const Conv2dParams& p, int64_t begin,
                           int64_t end) {
  const int64_t taps = g.kernel_h * g.kernel_w;
  for (int64_t plane = begin; plane < end; ++plane) {
    const float* in_c = input + plane * g.in_h * g.in_w;
    const float* w = weight + (plane % g.out_channels) * taps;
    float* out_c = out + plane * g.out_h * g.out_w;
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        float acc = 0.0f;
        for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
          const int64_t ih = oh * p.strides[0] - p.padding[0] + kh * p.dilation[0];
          for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
            const int64_t iw = ow * p.strides[1] - p.padding[1] + kw * p.dilation[1];
            const bool inside = ih >= 0 && ih < g.in_h && iw >= 0 && iw < g.in_w;
            acc += w[kh * g.kernel_w + kw] * (inside ? in_c[ih * g.in_w + iw] : 0.0f);
          }
        }
        out_c[oh * g.out_w + ow] = acc;
      }
    }
  }
}

PixelStrides DenseNhwc(int64_t h, int64_t w, int64_t c) {
  return PixelStrides{h * w * c, w * c, c};
}

}  // namespace

void DepthwiseConv(const float* input, const float* weight, float* out, const ConvGeometry& g,
                   const Conv2dParams& p) {
  if (p.data_layout == DataLayout::kNCHW) {
    const int64_t taps = g.kernel_h * g.kernel_w;
    const int64_t plane_work = std::max<int64_t>(g.out_h * g.out_w * taps, 1);
    // DepthwisePlanes' padded plane: what the last output's last tap reads, at least the input.
    const int64_t buf_h = std::max(
        (g.out_h - 1) * p.strides[0] + (g.kernel_h - 1) * p.dilation[0] + 1, p.padding[0] + g.in_h);
    const int64_t buf_w = std::max(
        (g.out_w - 1) * p.strides[1] + (g.kernel_w - 1) * p.dilation[1] + 1, p.padding[1] + g.in_w);
    const auto planes = PaddedCopyFits(buf_h, buf_w, g.in_h, g.in_w, g.out_h * g.out_w, taps)
                            ? DepthwisePlanes
                            : DepthwisePlanesTested;
    ParallelFor(g.batch * g.in_channels, std::max<int64_t>(1, (1 << 16) / plane_work),
                [&](int64_t begin, int64_t end) { planes(input, weight, out, g, p, begin, end); });
  } else {
    DepthwiseNhwc(input, DenseNhwc(g.in_h, g.in_w, g.in_channels), weight, out,
                  DenseNhwc(g.out_h, g.out_w, g.out_channels), g, p);
  }
}

void DepthwiseNhwc(const float* input, const PixelStrides& in_strides, const float* weight,
                   float* out, const PixelStrides& out_strides, const ConvGeometry& g,
                   const Conv2dParams& p) {
  const int64_t row_work = std::max<int64_t>(g.out_w * g.in_channels * g.kernel_h * g.kernel_w, 1);
  const int64_t weights = g.kernel_h * g.kernel_w * g.in_channels;
  const bool nonfinite_weights =
      std::any_of(weight, weight + weights, [](float w) { return !std::isfinite(w); });
  ParallelFor(g.batch * g.out_h, std::max<int64_t>(1, (1 << 16) / row_work),
              [&](int64_t begin, int64_t end) {
                DepthwiseRows(input, in_strides, weight, out, out_strides, g, p, nonfinite_weights,
                              begin, end);
              });
}

}  // namespace kernels
}  // namespace example_npu
