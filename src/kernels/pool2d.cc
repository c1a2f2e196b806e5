/*!
 * \file kernels/pool2d.cc
 * \brief Max / average 2-D pooling for the pooling engine, following TVM's topi pool_impl_nd.
 *
 * Semantics per spatial axis (extent X, kernel k, stride s, dilation d, padding lo/hi), output o:
 *   - the window taps are start + t * d for t in [0, k), start = o * s - lo;
 *   - only taps inside [0, X) contribute (max: padding acts as the lowest float; avg: as 0);
 *   - with ceil_mode TVM adds s - 1 extra tail padding and drops a last window that would start
 *     at or beyond X + lo, so every window starts inside the user-padded input;
 *   - avg divisor, count_include_pad: taps inside [-lo, X + hi) per axis, multiplied (the extra
 *     ceil_mode tail is excluded); otherwise taps inside [0, X), multiplied, at least 1.
 */
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/kernels.h"
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

/*! \brief NCHW: one (n, c) plane at a time, each window reduced with scalar loops. */
template <bool kIsMax>
void PoolPlanes(const float* input, float* out, int64_t planes, int64_t in_h, int64_t in_w,
                const AxisPlan& ph, const AxisPlan& pw, const Pool2dParams& p) {
  const int64_t out_h = static_cast<int64_t>(ph.start.size());
  const int64_t out_w = static_cast<int64_t>(pw.start.size());
  const int64_t dh = p.dilation[0];
  const int64_t dw = p.dilation[1];
  for (int64_t plane = 0; plane < planes; ++plane) {
    const float* in_c = input + plane * in_h * in_w;
    float* out_c = out + plane * out_h * out_w;
    for (int64_t oh = 0; oh < out_h; ++oh) {
      for (int64_t ow = 0; ow < out_w; ++ow) {
        float acc = kIsMax ? std::numeric_limits<float>::lowest() : 0.0f;
        for (int64_t kh = ph.tap_lo[oh]; kh < ph.tap_hi[oh]; ++kh) {
          const float* in_row = in_c + (ph.start[oh] + kh * dh) * in_w;
          for (int64_t kw = pw.tap_lo[ow]; kw < pw.tap_hi[ow]; ++kw) {
            const float v = in_row[pw.start[ow] + kw * dw];
            acc = kIsMax ? std::max(acc, v) : acc + v;
          }
        }
        out_c[oh * out_w + ow] = kIsMax ? acc : acc / Divisor(ph, pw, oh, ow, p.count_include_pad);
      }
    }
  }
}

/*! \brief NHWC: one output pixel at a time with the channel loop innermost (contiguous). */
template <bool kIsMax>
void PoolPixels(const float* input, float* out, int64_t batch, int64_t in_h, int64_t in_w,
                int64_t channels, const AxisPlan& ph, const AxisPlan& pw, const Pool2dParams& p) {
  const int64_t out_h = static_cast<int64_t>(ph.start.size());
  const int64_t out_w = static_cast<int64_t>(pw.start.size());
  const float init = kIsMax ? std::numeric_limits<float>::lowest() : 0.0f;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t oh = 0; oh < out_h; ++oh) {
      for (int64_t ow = 0; ow < out_w; ++ow) {
        float* out_px = out + ((n * out_h + oh) * out_w + ow) * channels;
        std::fill(out_px, out_px + channels, init);
        for (int64_t kh = ph.tap_lo[oh]; kh < ph.tap_hi[oh]; ++kh) {
          const int64_t ih = ph.start[oh] + kh * p.dilation[0];
          for (int64_t kw = pw.tap_lo[ow]; kw < pw.tap_hi[ow]; ++kw) {
            const int64_t iw = pw.start[ow] + kw * p.dilation[1];
            const float* in_px = input + ((n * in_h + ih) * in_w + iw) * channels;
            for (int64_t c = 0; c < channels; ++c) {
              out_px[c] = kIsMax ? std::max(out_px[c], in_px[c]) : out_px[c] + in_px[c];
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
}

}  // namespace

void Pool2d(const float* input, const Shape& in_shape, float* out, const Shape& out_shape,
            const Pool2dParams& params) {
  TVM_FFI_ICHECK(in_shape.size() == 4 && out_shape.size() == 4) << "Pool2d: tensors must be 4-D";
  const auto& p = params;
  TVM_FFI_ICHECK(p.pool_size[0] >= 1 && p.pool_size[1] >= 1 && p.strides[0] >= 1 &&
                 p.strides[1] >= 1 && p.dilation[0] >= 1 && p.dilation[1] >= 1)
      << "Pool2d: pool_size, strides and dilation must be positive";
  const bool nchw = p.layout == DataLayout::kNCHW;
  const int64_t batch = in_shape[0];
  const int64_t channels = nchw ? in_shape[1] : in_shape[3];
  const int64_t in_h = nchw ? in_shape[2] : in_shape[1];
  const int64_t in_w = nchw ? in_shape[3] : in_shape[2];
  const int64_t out_h = nchw ? out_shape[2] : out_shape[1];
  const int64_t out_w = nchw ? out_shape[3] : out_shape[2];
  TVM_FFI_ICHECK(out_shape[0] == batch && (nchw ? out_shape[1] : out_shape[3]) == channels)
      << "Pool2d: output batch/channels differ from the input";
  TVM_FFI_ICHECK(out_h == WindowOutputSize(in_h, p.pool_size[0], p.strides[0], p.dilation[0],
                                           p.padding[0], p.padding[2], p.ceil_mode) &&
                 out_w == WindowOutputSize(in_w, p.pool_size[1], p.strides[1], p.dilation[1],
                                           p.padding[1], p.padding[3], p.ceil_mode))
      << "Pool2d: output spatial size does not match the attributes";

  const AxisPlan ph = PlanAxis(in_h, out_h, p.pool_size[0], p.strides[0], p.dilation[0],
                               p.padding[0], p.padding[2]);
  const AxisPlan pw = PlanAxis(in_w, out_w, p.pool_size[1], p.strides[1], p.dilation[1],
                               p.padding[1], p.padding[3]);
  const bool is_max = p.kind == PoolKind::kMax;
  if (nchw) {
    (is_max ? PoolPlanes<true> : PoolPlanes<false>)(input, out, batch * channels, in_h, in_w, ph,
                                                    pw, p);
  } else {
    (is_max ? PoolPixels<true> : PoolPixels<false>)(input, out, batch, in_h, in_w, channels, ph, pw,
                                                    p);
  }
}

}  // namespace kernels
}  // namespace example_npu
