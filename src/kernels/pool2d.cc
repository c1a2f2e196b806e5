/*!
 * \file kernels/pool2d.cc
 * \brief Max / average 2-D pooling for the pooling engine, following TVM's topi pool_impl_nd.
 *
 * Semantics per spatial axis (extent X, kernel k, stride s, dilation d, padding lo/hi), output o:
 *   - the window taps are start + t * d for t in [0, k), start = o * s - lo;
 *   - only taps inside [0, X) contribute (max: padding acts as the dtype's lowest value, as
 *     in TVM; avg: as 0);
 *   - with ceil_mode TVM adds s - 1 extra tail padding and drops a last window that would start
 *     at or beyond X + lo, so every window starts inside the user-padded input;
 *   - avg divisor, count_include_pad: taps inside [-lo, X + hi) per axis, multiplied (the extra
 *     ceil_mode tail is excluded); otherwise taps inside [0, X), multiplied, at least 1.
 */
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/parallel.h"
#include "kernels/qdq_float32.h"
#include "kernels/quantized_ops.h"
#include "kernels/window.h"

namespace example_npu {
namespace kernels {
namespace {

/*! \brief Per-output-index window facts of one spatial axis, computed once per call. */
struct AxisPlan {
  std::vector<int64_t> start;        // input index of tap 0 (may be negative)
  std::vector<int64_t> tap_lo;       // first tap inside the input
  std::vector<int64_t> tap_hi;       // one past the last tap inside the input
  std::vector<int64_t> padded_taps;  // taps inside the user-padded input
};

AxisPlan PlanAxis(int64_t extent, int64_t out, int64_t k, int64_t s, int64_t d, int64_t pad_lo,
                  int64_t pad_hi) {
  AxisPlan plan;
  plan.start.resize(out);
  plan.tap_lo.resize(out);
  plan.tap_hi.resize(out);
  plan.padded_taps.resize(out);
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * s - pad_lo;
    plan.start[o] = start;
    const Range in_input = ValidRange(start, d, extent, k);
    plan.tap_lo[o] = in_input.begin;
    plan.tap_hi[o] = in_input.end;
    const Range in_padded = ValidRange(start + pad_lo, d, extent + pad_lo + pad_hi, k);
    plan.padded_taps[o] = in_padded.end - in_padded.begin;
  }
  return plan;
}

/*! \brief Average-pool divisor of output (oh, ow). */
inline float Divisor(const AxisPlan& ph, const AxisPlan& pw, int64_t oh, int64_t ow,
                     bool count_include_pad) {
  if (count_include_pad) return static_cast<float>(ph.padded_taps[oh] * pw.padded_taps[ow]);
  const int64_t taps = (ph.tap_hi[oh] - ph.tap_lo[oh]) * (pw.tap_hi[ow] - pw.tap_lo[ow]);
  return static_cast<float>(std::max<int64_t>(taps, 1));
}

/*!
 * \brief TVM's max: `acc > x ? acc : x` (LLVM's ordered compare and select; one maxps). Unlike
 * std::max it lets a NaN x replace the running max, and the next value replace the NaN, so with
 * the taps visited in TVM's order (kh, then kw, padded taps as the lowest value) every NaN and
 * infinity ends up exactly where TVM's LLVM build puts it.
 */
inline float TvmMax(float acc, float x) { return acc > x ? acc : x; }

/*! \brief Whether any of the n floats is NaN (one vectorisable pass). */
bool AnyNaN(const float* data, int64_t n) {
  int32_t found = 0;
  for (int64_t i = 0; i < n; ++i) found |= data[i] != data[i];
  return found != 0;
}

/*!
 * \brief One NCHW plane of pooling in TVM's tap order, every tap bounds-tested: max pooling of
 * planes with NaNs (what PoolPlanes computes for NaN-free planes; its row-then-column order
 * would move NaNs), and any pooling whose row buffer would be larger than the work.
 */
template <bool kIsMax>
void PlaneInTapOrder(const float* in_c, float* out_c, int64_t in_w, const AxisPlan& ph,
                     const AxisPlan& pw, const Pool2dParams& p) {
  const float lowest = p.lowest;
  const int64_t out_h = static_cast<int64_t>(ph.start.size());
  const int64_t out_w = static_cast<int64_t>(pw.start.size());
  for (int64_t oh = 0; oh < out_h; ++oh) {
    for (int64_t ow = 0; ow < out_w; ++ow) {
      float acc = kIsMax ? lowest : 0.0f;
      for (int64_t kh = 0; kh < p.pool_size[0]; ++kh) {
        const bool h_inside = kh >= ph.tap_lo[oh] && kh < ph.tap_hi[oh];
        const int64_t ih = ph.start[oh] + kh * p.dilation[0];
        for (int64_t kw = 0; kw < p.pool_size[1]; ++kw) {
          const bool inside = h_inside && kw >= pw.tap_lo[ow] && kw < pw.tap_hi[ow];
          const int64_t iw = pw.start[ow] + kw * p.dilation[1];
          if (kIsMax) {
            acc = TvmMax(acc, inside ? in_c[ih * in_w + iw] : lowest);
          } else if (inside) {
            acc += in_c[ih * in_w + iw];  // a padded tap adds 0
          }
        }
      }
      out_c[oh * out_w + ow] = kIsMax ? acc : acc / Divisor(ph, pw, oh, ow, p.count_include_pad);
    }
  }
}

/*!
 * \brief NCHW planes [begin, end): per output row, the window's input rows are first reduced
 * elementwise into a padded row buffer (contiguous, vectorised), then each output takes its
 * kernel_w taps from that buffer. The buffer's padding holds the reduction's identity, so the
 * horizontal pass needs no bounds tests; padded taps add 0 to a sum and never win a max.
 */
template <bool kIsMax>
void PoolPlanes(const float* input, float* out, int64_t begin, int64_t end, int64_t in_h,
                int64_t in_w, const AxisPlan& ph, const AxisPlan& pw, const Pool2dParams& p) {
  const int64_t out_h = static_cast<int64_t>(ph.start.size());
  const int64_t out_w = static_cast<int64_t>(pw.start.size());
  const int64_t dh = p.dilation[0];
  const int64_t sw = p.strides[1];
  const int64_t dw = p.dilation[1];
  const int64_t kw = p.pool_size[1];
  const int64_t pad_l = p.padding[1];
  const float init = kIsMax ? p.lowest : 0.0f;
  // Buffer index of the last tap + 1 (saturating: strides and dilation may be 2^31).
  const int64_t span =
      SaturatingAdd(SaturatingAdd(SaturatingMul(out_w - 1, sw), SaturatingMul(kw - 1, dw)), 1);
  const int64_t buffer_size = std::max(span, SaturatingAdd(pad_l, in_w));
  if (!PaddedCopyFits(1, buffer_size, 1, in_w, out_w, kw)) {
    for (int64_t plane = begin; plane < end; ++plane) {
      PlaneInTapOrder<kIsMax>(input + plane * in_h * in_w, out + plane * out_h * out_w, in_w, ph,
                              pw, p);
    }
    return;
  }
  std::vector<float> buffer(buffer_size, init);
  float* __restrict__ row = buffer.data() + pad_l;
  // Average divisor of (oh, ow) = h_counts[oh] * w_counts[ow] (as in Divisor), hoisted per axis.
  std::vector<float> divisors(kIsMax ? 0 : out_w);
  std::vector<int64_t> h_counts(out_h);
  std::vector<int64_t> w_counts(out_w);
  for (int64_t oh = 0; oh < out_h; ++oh) {
    h_counts[oh] = p.count_include_pad ? ph.padded_taps[oh] : ph.tap_hi[oh] - ph.tap_lo[oh];
  }
  for (int64_t ow = 0; ow < out_w; ++ow) {
    w_counts[ow] = p.count_include_pad ? pw.padded_taps[ow] : pw.tap_hi[ow] - pw.tap_lo[ow];
  }
  for (int64_t plane = begin; plane < end; ++plane) {
    const float* in_c = input + plane * in_h * in_w;
    float* out_c = out + plane * out_h * out_w;
    if (kIsMax && AnyNaN(in_c, in_h * in_w)) {
      PlaneInTapOrder<true>(in_c, out_c, in_w, ph, pw, p);
      continue;
    }
    for (int64_t oh = 0; oh < out_h; ++oh) {
      const int64_t kh_lo = ph.tap_lo[oh];
      const int64_t kh_hi = ph.tap_hi[oh];
      if (kh_lo >= kh_hi) {
        std::fill(row, row + in_w, init);
      } else if (kh_hi - kh_lo == 1) {
        const float* only = in_c + (ph.start[oh] + kh_lo * dh) * in_w;
        std::copy(only, only + in_w, row);
      } else {
        const float* __restrict__ r0 = in_c + (ph.start[oh] + kh_lo * dh) * in_w;
        const float* __restrict__ r1 = r0 + dh * in_w;
        for (int64_t i = 0; i < in_w; ++i) row[i] = kIsMax ? std::max(r0[i], r1[i]) : r0[i] + r1[i];
        for (int64_t kh = kh_lo + 2; kh < kh_hi; ++kh) {
          const float* __restrict__ in_row = in_c + (ph.start[oh] + kh * dh) * in_w;
          for (int64_t i = 0; i < in_w; ++i) {
            row[i] = kIsMax ? std::max(row[i], in_row[i]) : row[i] + in_row[i];
          }
        }
      }
      // Horizontal pass one tap at a time: each loop is a (strided) vectorisable stream.
      float* __restrict__ out_row = out_c + oh * out_w;
      const float* __restrict__ buf = buffer.data();
      for (int64_t ow = 0; ow < out_w; ++ow) out_row[ow] = buf[ow * sw];
      for (int64_t t = 1; t < kw; ++t) {
        const float* __restrict__ taps = buf + t * dw;
        for (int64_t ow = 0; ow < out_w; ++ow) {
          out_row[ow] = kIsMax ? std::max(out_row[ow], taps[ow * sw]) : out_row[ow] + taps[ow * sw];
        }
      }
      if (!kIsMax) {
        const int64_t h_taps = h_counts[oh];
        for (int64_t ow = 0; ow < out_w; ++ow) {
          divisors[ow] = static_cast<float>(std::max<int64_t>(h_taps * w_counts[ow], 1));
        }
        for (int64_t ow = 0; ow < out_w; ++ow) out_row[ow] /= divisors[ow];
      }
    }
  }
}

/*!
 * \brief Max over the whole window of an NHWC output pixel that has padded taps: every tap in
 * TVM's order, a padded one as the lowest value (TVM's pad value, which replaces a NaN there).
 */
__attribute__((noinline)) void MaxPixelAllTaps(const float* input, float* out_px, int64_t n,
                                               int64_t in_h, int64_t in_w, int64_t channels,
                                               const AxisPlan& ph, const AxisPlan& pw, int64_t oh,
                                               int64_t ow, const Pool2dParams& p) {
  const float lowest = p.lowest;
  for (int64_t kh = 0; kh < p.pool_size[0]; ++kh) {
    const bool h_inside = kh >= ph.tap_lo[oh] && kh < ph.tap_hi[oh];
    const int64_t ih = ph.start[oh] + kh * p.dilation[0];
    for (int64_t kw = 0; kw < p.pool_size[1]; ++kw) {
      if (!(h_inside && kw >= pw.tap_lo[ow] && kw < pw.tap_hi[ow])) {
        for (int64_t c = 0; c < channels; ++c) out_px[c] = TvmMax(out_px[c], lowest);
        continue;
      }
      const int64_t iw = pw.start[ow] + kw * p.dilation[1];
      const float* in_px = input + ((n * in_h + ih) * in_w + iw) * channels;
      for (int64_t c = 0; c < channels; ++c) out_px[c] = TvmMax(out_px[c], in_px[c]);
    }
  }
}

/*! \brief NHWC rows [begin, end) of (n, oh): per output pixel, the channel loop is innermost. */
template <bool kIsMax>
void PoolPixels(const float* input, float* out, int64_t begin, int64_t end, int64_t in_h,
                int64_t in_w, int64_t channels, const AxisPlan& ph, const AxisPlan& pw,
                const Pool2dParams& p) {
  const int64_t out_h = static_cast<int64_t>(ph.start.size());
  const int64_t out_w = static_cast<int64_t>(pw.start.size());
  const float init = kIsMax ? p.lowest : 0.0f;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / out_h;
    const int64_t oh = r % out_h;
    const bool h_padded = ph.tap_lo[oh] > 0 || ph.tap_hi[oh] < p.pool_size[0];
    for (int64_t ow = 0; ow < out_w; ++ow) {
      float* __restrict__ out_px = out + ((n * out_h + oh) * out_w + ow) * channels;
      std::fill(out_px, out_px + channels, init);
      if (kIsMax && (h_padded || pw.tap_lo[ow] > 0 || pw.tap_hi[ow] < p.pool_size[1])) {
        MaxPixelAllTaps(input, out_px, n, in_h, in_w, channels, ph, pw, oh, ow, p);
        continue;
      }
      // Only taps inside the input: a sum skips padded taps (they add 0).
      for (int64_t kh = ph.tap_lo[oh]; kh < ph.tap_hi[oh]; ++kh) {
        const int64_t ih = ph.start[oh] + kh * p.dilation[0];
        for (int64_t kw = pw.tap_lo[ow]; kw < pw.tap_hi[ow]; ++kw) {
          const int64_t iw = pw.start[ow] + kw * p.dilation[1];
          const float* __restrict__ in_px = input + ((n * in_h + ih) * in_w + iw) * channels;
          for (int64_t c = 0; c < channels; ++c) {
            out_px[c] = kIsMax ? TvmMax(out_px[c], in_px[c]) : out_px[c] + in_px[c];
          }
        }
      }
      if (!kIsMax) {
        const float divisor = Divisor(ph, pw, oh, ow, p.count_include_pad);
        for (int64_t c = 0; c < channels; ++c) out_px[c] /= divisor;
      }
    }
  }
}

/*! \brief Checks a pooling call and plans its two spatial axes. */
std::pair<AxisPlan, AxisPlan> PlanWindows(const Shape& in_shape, const Shape& out_shape,
                                          const Pool2dParams& p) {
  TVM_FFI_ICHECK(in_shape.size() == 4 && out_shape.size() == 4) << "Pool2d: tensors must be 4-D";
  TVM_FFI_ICHECK(p.pool_size[0] >= 1 && p.pool_size[1] >= 1 && p.strides[0] >= 1 &&
                 p.strides[1] >= 1 && p.dilation[0] >= 1 && p.dilation[1] >= 1)
      << "Pool2d: pool_size, strides and dilation must be positive";
  const bool nchw = p.layout == DataLayout::kNCHW;
  const int64_t channels = nchw ? in_shape[1] : in_shape[3];
  const int64_t in_h = nchw ? in_shape[2] : in_shape[1];
  const int64_t in_w = nchw ? in_shape[3] : in_shape[2];
  const int64_t out_h = nchw ? out_shape[2] : out_shape[1];
  const int64_t out_w = nchw ? out_shape[3] : out_shape[2];
  TVM_FFI_ICHECK(out_shape[0] == in_shape[0] && (nchw ? out_shape[1] : out_shape[3]) == channels)
      << "Pool2d: output batch/channels differ from the input";
  TVM_FFI_ICHECK(
      out_h == WindowOutputSize(in_h, p.pool_size[0], p.strides[0], p.dilation[0], p.padding[0],
                                p.padding[2], p.ceil_mode, p.drop_trailing_window) &&
      out_w == WindowOutputSize(in_w, p.pool_size[1], p.strides[1], p.dilation[1], p.padding[1],
                                p.padding[3], p.ceil_mode, p.drop_trailing_window))
      << "Pool2d: output spatial size does not match the attributes";
  return {PlanAxis(in_h, out_h, p.pool_size[0], p.strides[0], p.dilation[0], p.padding[0],
                   p.padding[2]),
          PlanAxis(in_w, out_w, p.pool_size[1], p.strides[1], p.dilation[1], p.padding[1],
                   p.padding[3])};
}

/*! \brief NHWC rows [begin, end) of (n, oh) of Rounding::kTflite pooling (quantized_ops.h). */
template <bool kIsMax>
void TflitePoolPixels(const float* input, float* out, int64_t begin, int64_t end, int64_t in_h,
                      int64_t in_w, int64_t channels, const AxisPlan& ph, const AxisPlan& pw,
                      const QuantizedPoolParams& q) {
  const Pool2dParams& p = q.pool;
  const int64_t out_h = static_cast<int64_t>(ph.start.size());
  const int64_t out_w = static_cast<int64_t>(pw.start.size());
  std::vector<int64_t> acc_buffer(channels);
  int64_t* __restrict__ acc = acc_buffer.data();
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / out_h;
    const int64_t oh = r % out_h;
    for (int64_t ow = 0; ow < out_w; ++ow) {
      std::fill(acc, acc + channels, kIsMax ? std::numeric_limits<int64_t>::min() : 0);
      for (int64_t kh = ph.tap_lo[oh]; kh < ph.tap_hi[oh]; ++kh) {
        const int64_t ih = ph.start[oh] + kh * p.dilation[0];
        for (int64_t kw = pw.tap_lo[ow]; kw < pw.tap_hi[ow]; ++kw) {
          const int64_t iw = pw.start[ow] + kw * p.dilation[1];
          const float* __restrict__ in_px = input + ((n * in_h + ih) * in_w + iw) * channels;
          for (int64_t c = 0; c < channels; ++c) {
            const int64_t v = static_cast<int64_t>(in_px[c]) - q.input_zero_point;
            acc[c] = kIsMax ? std::max(acc[c], v) : acc[c] + v;
          }
        }
      }
      float* __restrict__ out_px = out + ((n * out_h + oh) * out_w + ow) * channels;
      if (kIsMax && (ph.tap_lo[oh] >= ph.tap_hi[oh] || pw.tap_lo[ow] >= pw.tap_hi[ow])) {
        // A max window with no input tap is the lowest value, as padding is in TVM.
        std::fill(out_px, out_px + channels, static_cast<float>(q.out.min));
        continue;
      }
      const int64_t taps = kIsMax ? 0
                           : p.count_include_pad
                               ? ph.padded_taps[oh] * pw.padded_taps[ow]
                               : std::max<int64_t>(1, (ph.tap_hi[oh] - ph.tap_lo[oh]) *
                                                          (pw.tap_hi[ow] - pw.tap_lo[ow]));
      const FixedPointMultiplier m = q.multipliers[taps];
      if (!kIsMax && !q.tflite_mean) {
        // AVERAGE_POOL_2D: the rounded average of the raw values (input and output share their
        // quantization, so it is already in output steps).
        for (int64_t c = 0; c < channels; ++c) {
          const int64_t average = tflite::RoundedAverage(acc[c] + taps * q.input_zero_point, taps);
          out_px[c] = static_cast<float>(std::clamp(average, q.out.min, q.out.max));
        }
        continue;
      }
      // The multiplier checked once per pixel, the channels' rescale inline (it vectorises).
      tflite::CheckInMultiplierRange(m);
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t scaled = tflite::MultiplyByQuantizedMultiplierInRange(acc[c], m.m0, m.shift);
        out_px[c] = static_cast<float>(std::clamp(q.out.zero_point + scaled, q.out.min, q.out.max));
      }
    }
  }
}

}  // namespace

QuantizedPoolParams MakeQuantizedPoolParams(const Pool2dParams& pool, double input_scale,
                                            int64_t input_zero_point, double output_scale,
                                            const QuantizedOutput& out, Rounding rounding,
                                            bool tflite_mean) {
  QuantizedPoolParams q;
  q.pool = pool;
  q.input_zero_point = input_zero_point;
  q.out = out;
  q.rounding = rounding;
  q.tflite_mean = tflite_mean;
  q.input_scale = static_cast<float>(input_scale);
  q.output_scale = static_cast<float>(output_scale);
  if (rounding == Rounding::kTvm) return q;
  const FixedPointMultiplier rescale = QuantizeMultiplier(input_scale / output_scale);
  if (pool.kind == PoolKind::kMax) {
    q.multipliers.push_back(rescale);
  } else {
    const int64_t window = pool.pool_size[0] * pool.pool_size[1];
    for (int64_t taps = 0; taps <= window; ++taps) {
      const int64_t n = std::max<int64_t>(taps, 1);
      q.multipliers.push_back(tflite::MeanMultiplier(rescale, n));
    }
  }
  return q;
}

void QuantizedPool2d(const float* input, const Shape& in_shape, float* out, const Shape& out_shape,
                     const QuantizedPoolParams& params) {
  if (params.rounding == Rounding::kTvm) {
    // TVM's build of the island, step for step: float32 dequantize, its float pooling (Pool2d
    // sums the taps in TVM's order), float32 quantize.
    const Float32Dequantize dequantize{static_cast<float>(params.input_zero_point),
                                       params.input_scale};
    const Float32Quantize quantize(params.output_scale, params.out);
    thread_local std::vector<float> real, pooled;  // reused: a tile's pooling allocates nothing
    real.resize(static_cast<size_t>(NumElements(in_shape)));
    pooled.resize(static_cast<size_t>(NumElements(out_shape)));
    std::transform(input, input + real.size(), real.begin(), dequantize);
    Pool2d(real.data(), in_shape, pooled.data(), out_shape, params.pool);
    std::transform(pooled.begin(), pooled.end(), out, quantize);
    return;
  }
  if (params.pool.layout == DataLayout::kNCHW) {
    // The engine pools NHWC tiles; whole NCHW tensors (untiled reference runs) go through it.
    const std::vector<int64_t> to_nhwc = {0, 2, 3, 1}, to_nchw = {0, 3, 1, 2};
    std::vector<float> in_nhwc(NumElements(in_shape)), out_nhwc(NumElements(out_shape));
    Transpose(input, in_shape, to_nhwc, in_nhwc.data());
    QuantizedPoolParams nhwc = params;
    nhwc.pool.layout = DataLayout::kNHWC;
    const Shape out_nhwc_shape = {out_shape[0], out_shape[2], out_shape[3], out_shape[1]};
    QuantizedPool2d(in_nhwc.data(), {in_shape[0], in_shape[2], in_shape[3], in_shape[1]},
                    out_nhwc.data(), out_nhwc_shape, nhwc);
    Transpose(out_nhwc.data(), out_nhwc_shape, to_nchw, out);
    return;
  }
  const std::pair<AxisPlan, AxisPlan> plans = PlanWindows(in_shape, out_shape, params.pool);
  const AxisPlan& ph = plans.first;
  const AxisPlan& pw = plans.second;
  const int64_t out_h = out_shape[1], out_w = out_shape[2], channels = in_shape[3];
  const bool is_max = params.pool.kind == PoolKind::kMax;
  const int64_t row_work =
      std::max<int64_t>(out_w * channels * params.pool.pool_size[0] * params.pool.pool_size[1], 1);
  ParallelFor(in_shape[0] * out_h, std::max<int64_t>(1, (1 << 16) / row_work),
              [&](int64_t begin, int64_t end) {
                (is_max ? TflitePoolPixels<true>
                        : TflitePoolPixels<false>)(input, out, begin, end, in_shape[1], in_shape[2],
                                                   channels, ph, pw, params);
              });
}

void Pool2d(const float* input, const Shape& in_shape, float* out, const Shape& out_shape,
            const Pool2dParams& params) {
  const auto& p = params;
  const std::pair<AxisPlan, AxisPlan> plans = PlanWindows(in_shape, out_shape, p);
  const AxisPlan& ph = plans.first;
  const AxisPlan& pw = plans.second;
  const bool nchw = p.layout == DataLayout::kNCHW;
  const int64_t batch = in_shape[0];
  const int64_t channels = nchw ? in_shape[1] : in_shape[3];
  const int64_t in_h = nchw ? in_shape[2] : in_shape[1];
  const int64_t in_w = nchw ? in_shape[3] : in_shape[2];
  const int64_t out_h = nchw ? out_shape[2] : out_shape[1];
  const int64_t out_w = nchw ? out_shape[3] : out_shape[2];
  const bool is_max = p.kind == PoolKind::kMax;
  // Parallel over planes (NCHW) or output rows (NHWC); a chunk should hold ~64K input reads.
  const int64_t taps = p.pool_size[0] * p.pool_size[1];
  if (nchw) {
    const int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(in_h * in_w, 1));
    ParallelFor(batch * channels, grain, [&](int64_t begin, int64_t end) {
      (is_max ? PoolPlanes<true> : PoolPlanes<false>)(input, out, begin, end, in_h, in_w, ph, pw,
                                                      p);
    });
  } else {
    const int64_t row_work = std::max<int64_t>(out_w * channels * taps, 1);
    ParallelFor(batch * out_h, std::max<int64_t>(1, (1 << 16) / row_work),
                [&](int64_t begin, int64_t end) {
                  (is_max ? PoolPixels<true> : PoolPixels<false>)(input, out, begin, end, in_h,
                                                                  in_w, channels, ph, pw, p);
                });
  }
}

}  // namespace kernels
}  // namespace example_npu
