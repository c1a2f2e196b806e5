/*!
 * \file kernels/conv_transpose.cc
 * \brief Transposed convolution by output phases (see conv_transpose.h): each output pixel sums
 * only the kernel taps of its phase, never a multiply by an inserted zero.
 */
#include "kernels/conv_transpose.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/parallel.h"

namespace example_npu {
namespace kernels {
namespace {

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

/*! \brief Per output index of one axis: the (tap, input index) pairs that reach it. */
std::vector<std::vector<std::pair<int64_t, int64_t>>> AxisTaps(int64_t out, int64_t in,
                                                               int64_t kernel, int64_t stride,
                                                               int64_t dilation, int64_t origin) {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> taps(out);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t k = 0; k < kernel; ++k) {
      const int64_t t = o + origin - k * dilation;
      if (t < 0 || t % stride != 0 || t / stride >= in) continue;
      taps[o].emplace_back(k, t / stride);
    }
  }
  return taps;
}

/*!
 * \brief The NHWC / HWIO core: out is [n, oh, ow, groups * group_out]. Each output pixel sums
 * (input - zero_point) x weight over its phase's taps in Acc: float for the float op, exact int64
 * for the quantized one (int8 / uint8 / int16 activations, int8 weights). With `accumulate` the
 * sums add to what out holds (the input-channel chunks of one tile).
 */
template <typename In, typename Weight, typename Acc>
void TransposedNhwc(const In* input, const Shape& in, const Weight* weight, const Shape& w,
                    Acc* out, const Shape& o, const ConvTransposeParams& p, Acc zero_point,
                    bool accumulate) {
  const int64_t batch = in[0], ih = in[1], iw = in[2], cin = in[3];
  const int64_t kh = w[0], kw = w[1], group_out = w[3];
  const int64_t oh = o[1], ow = o[2], cout = o[3];
  const int64_t group_in = cin / p.groups;
  TVM_FFI_ICHECK(o[0] == batch && w[2] == cin && cin % p.groups == 0 &&
                 cout == group_out * p.groups)
      << "Conv2dTranspose: the tiles' channels do not agree";
  const auto rows = AxisTaps(oh, ih, kh, p.strides[0], p.dilation[0], p.origin[0]);
  const auto cols = AxisTaps(ow, iw, kw, p.strides[1], p.dilation[1], p.origin[1]);
  const int64_t work_per_row = std::max<int64_t>(1, ow * cout * group_in);
  ParallelFor(batch * oh, std::max<int64_t>(1, 16384 / work_per_row),
              [&](int64_t begin, int64_t end) {
                for (int64_t row = begin; row < end; ++row) {
                  const int64_t n = row / oh, y = row % oh;
                  for (int64_t x = 0; x < ow; ++x) {
                    Acc* acc = out + (row * ow + x) * cout;
                    if (!accumulate) std::fill(acc, acc + cout, Acc{0});
                    for (const auto& [ky, iy] : rows[y]) {
                      for (const auto& [kx, ix] : cols[x]) {
                        const In* pixel = input + ((n * ih + iy) * iw + ix) * cin;
                        const Weight* tap = weight + (ky * kw + kx) * cin * group_out;
                        for (int64_t g = 0; g < p.groups; ++g) {
                          Acc* a = acc + g * group_out;
                          for (int64_t ic = g * group_in; ic < (g + 1) * group_in; ++ic) {
                            const Acc value = static_cast<Acc>(pixel[ic]) - zero_point;
                            const Weight* wr = tap + ic * group_out;
                            for (int64_t oc = 0; oc < group_out; ++oc) {
                              a[oc] += value * static_cast<Acc>(wr[oc]);
                            }
                          }
                        }
                      }
                    }
                  }
                }
              });
}

}  // namespace

void Conv2dTranspose(const float* input, const Shape& in_shape, const float* weight,
                     const Shape& weight_shape, float* out, const Shape& out_shape,
                     const ConvTransposeParams& p) {
  TVM_FFI_ICHECK(in_shape.size() == 4 && weight_shape.size() == 4 && out_shape.size() == 4)
      << "Conv2dTranspose: 4-D operands";
  TVM_FFI_ICHECK(p.groups >= 1 && p.strides[0] >= 1 && p.strides[1] >= 1 && p.dilation[0] >= 1 &&
                 p.dilation[1] >= 1)
      << "Conv2dTranspose: groups, strides and dilation must be positive";
  const bool nchw = p.data_layout == DataLayout::kNCHW;
  const bool iohw = p.kernel_layout == TransposedKernelLayout::kIOHW;
  if (!nchw && !iohw) {
    TransposedNhwc(input, in_shape, weight, weight_shape, out, out_shape, p, 0.0f, false);
    return;
  }
  // Whole tensors in Relax's layouts: the core runs on NHWC / HWIO copies.
  std::vector<float> in_nhwc, w_hwio, out_nhwc;
  const float* in_data = input;
  Shape in_nhwc_shape = in_shape;
  if (nchw) {
    in_nhwc.resize(NumElements(in_shape));
    Transpose(input, in_shape, {0, 2, 3, 1}, in_nhwc.data());
    in_data = in_nhwc.data();
    in_nhwc_shape = {in_shape[0], in_shape[2], in_shape[3], in_shape[1]};
  }
  const float* w_data = weight;
  Shape w_hwio_shape = weight_shape;
  if (iohw) {
    w_hwio.resize(NumElements(weight_shape));
    Transpose(weight, weight_shape, {2, 3, 0, 1}, w_hwio.data());
    w_data = w_hwio.data();
    w_hwio_shape = {weight_shape[2], weight_shape[3], weight_shape[0], weight_shape[1]};
  }
  if (!nchw) {
    TransposedNhwc(in_data, in_nhwc_shape, w_data, w_hwio_shape, out, out_shape, p, 0.0f, false);
    return;
  }
  const Shape out_nhwc_shape = {out_shape[0], out_shape[2], out_shape[3], out_shape[1]};
  out_nhwc.resize(NumElements(out_shape));
  TransposedNhwc(in_data, in_nhwc_shape, w_data, w_hwio_shape, out_nhwc.data(), out_nhwc_shape, p,
                 0.0f, false);
  Transpose(out_nhwc.data(), out_nhwc_shape, {0, 3, 1, 2}, out);
}

template <typename In>
void QuantizedConv2dTranspose(const In* input, const Shape& in_shape, int64_t input_zero_point,
                              const int8_t* weight, const Shape& weight_shape, int64_t* acc,
                              const Shape& out_shape, const ConvTransposeParams& p,
                              bool accumulate) {
  TVM_FFI_ICHECK(in_shape.size() == 4 && weight_shape.size() == 4 && out_shape.size() == 4 &&
                 p.data_layout == DataLayout::kNHWC &&
                 p.kernel_layout == TransposedKernelLayout::kHWIO)
      << "QuantizedConv2dTranspose: NHWC / HWIO tiles";
  TransposedNhwc(input, in_shape, weight, weight_shape, acc, out_shape, p, input_zero_point,
                 accumulate);
}

// The activation dtypes of quantized tiles.
template void QuantizedConv2dTranspose(const int8_t*, const Shape&, int64_t, const int8_t*,
                                       const Shape&, int64_t*, const Shape&,
                                       const ConvTransposeParams&, bool);
template void QuantizedConv2dTranspose(const uint8_t*, const Shape&, int64_t, const int8_t*,
                                       const Shape&, int64_t*, const Shape&,
                                       const ConvTransposeParams&, bool);
template void QuantizedConv2dTranspose(const int16_t*, const Shape&, int64_t, const int8_t*,
                                       const Shape&, int64_t*, const Shape&,
                                       const ConvTransposeParams&, bool);

IndexSpan TransposedSourceSpan(int64_t out_first, int64_t out_end, int64_t origin, int64_t stride,
                               int64_t dilation, int64_t kernel) {
  const int64_t low = out_first + origin - (kernel - 1) * dilation;
  const int64_t first = -FloorDiv(-low, stride);  // ceil(low / stride)
  const int64_t last = FloorDiv(out_end - 1 + origin, stride);
  return IndexSpan{first, last + 1};
}

std::vector<TransposedPhase> TransposedPhases(const ConvTransposeParams& p, int64_t out_h,
                                              int64_t out_w, int64_t kernel_h, int64_t kernel_w) {
  // Per axis and residue r of (o + origin) mod stride: its outputs and its taps.
  auto axis = [](int64_t out, int64_t origin, int64_t stride, int64_t dilation, int64_t kernel) {
    std::vector<TransposedPhase> phases(stride, TransposedPhase{0, 0});
    for (int64_t o = 0; o < out; ++o) {
      ++phases[((o + origin) % stride + stride) % stride].pixels;
    }
    for (int64_t k = 0; k < kernel; ++k) ++phases[(k * dilation) % stride].taps;
    return phases;
  };
  const auto ys = axis(out_h, p.origin[0], p.strides[0], p.dilation[0], kernel_h);
  const auto xs = axis(out_w, p.origin[1], p.strides[1], p.dilation[1], kernel_w);
  std::vector<TransposedPhase> phases;
  for (const TransposedPhase& y : ys) {
    for (const TransposedPhase& x : xs) {
      if (y.pixels * x.pixels > 0) phases.push_back({y.pixels * x.pixels, y.taps * x.taps});
    }
  }
  return phases;
}

}  // namespace kernels
}  // namespace example_npu
