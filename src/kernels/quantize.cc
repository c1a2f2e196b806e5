#include "kernels/quantize.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <cmath>

namespace example_npu {
namespace kernels {

FixedPointMultiplier QuantizeMultiplier(double real) {
  TVM_FFI_ICHECK(real > 0 && std::isfinite(real)) << "requantization multiplier must be positive";
  int exponent = 0;
  const double fraction = std::frexp(real, &exponent);  // real = fraction * 2^exponent
  int64_t m0 = static_cast<int64_t>(std::llround(fraction * (1LL << 31)));
  if (m0 == (1LL << 31)) {
    m0 /= 2;
    ++exponent;
  }
  const int64_t shift = 31 - exponent;
  TVM_FFI_ICHECK(shift >= 1 && shift <= 62)
      << "requantization multiplier " << real << " is outside [2^-31, 2^30)";
  return FixedPointMultiplier{m0, shift};
}

int64_t RoundHalfEven(double value) { return static_cast<int64_t>(std::nearbyint(value)); }

void Requantize(const int64_t* acc, int64_t size, int64_t channels, int64_t channel_offset,
                const Requantization& r, float* out) {
  const bool per_channel = r.multipliers.size() > 1;
  for (int64_t i = 0; i < size; ++i) {
    const int64_t c = channel_offset + i % channels;
    const FixedPointMultiplier& m = r.multipliers[per_channel ? c : 0];
    const int64_t value = acc[i] + (r.bias.empty() ? 0 : r.bias[c]);
    // 128-bit product: int16 activations give accumulators beyond 32 bits.
    const __int128 product = static_cast<__int128>(value) * m.m0;
    const int64_t scaled =
        static_cast<int64_t>((product + (static_cast<__int128>(1) << (m.shift - 1))) >> m.shift);
    out[i] = static_cast<float>(std::clamp(r.output_zero_point + scaled, r.min, r.max));
  }
}

void QuantizedMatmul(const float* lhs, int64_t lhs_zero_point, const float* rhs, int64_t m,
                     int64_t k, int64_t n, int64_t* acc) {
  std::vector<int64_t> row(n);
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0);
    for (int64_t p = 0; p < k; ++p) {
      const int64_t a = static_cast<int64_t>(lhs[i * k + p]) - lhs_zero_point;
      if (a == 0) continue;
      const float* b = rhs + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += a * static_cast<int64_t>(b[j]);
    }
    std::copy(row.begin(), row.end(), acc + i * n);
  }
}

void QuantizedConv2d(const float* input, const Shape& in_shape, int64_t input_zero_point,
                     const float* weight, const Shape& weight_shape, int64_t* acc,
                     const Shape& out_shape, const Conv2dParams& p) {
  TVM_FFI_ICHECK(p.data_layout == DataLayout::kNHWC && p.kernel_layout == KernelLayout::kHWIO)
      << "QuantizedConv2d runs on NHWC tiles";
  const int64_t batch = in_shape[0], h = in_shape[1], w = in_shape[2], c = in_shape[3];
  const int64_t kh = weight_shape[0], kw = weight_shape[1], ci = weight_shape[2];
  const int64_t oh = out_shape[1], ow = out_shape[2], co = out_shape[3];
  const int64_t out_per_group = co / p.groups;
  TVM_FFI_ICHECK_EQ(ci * p.groups, c) << "QuantizedConv2d: groups do not match the channels";
  for (int64_t nb = 0; nb < batch; ++nb) {
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t x = 0; x < ow; ++x) {
        int64_t* out = acc + ((nb * oh + y) * ow + x) * co;
        std::fill(out, out + co, 0);
        for (int64_t ky = 0; ky < kh; ++ky) {
          const int64_t iy = y * p.strides[0] - p.padding[0] + ky * p.dilation[0];
          if (iy < 0 || iy >= h) continue;
          for (int64_t kx = 0; kx < kw; ++kx) {
            const int64_t ix = x * p.strides[1] - p.padding[1] + kx * p.dilation[1];
            if (ix < 0 || ix >= w) continue;
            const float* pixel = input + ((nb * h + iy) * w + ix) * c;
            const float* taps = weight + (ky * kw + kx) * ci * co;
            for (int64_t o = 0; o < co; ++o) {
              const int64_t group = o / out_per_group;
              int64_t sum = 0;
              for (int64_t i = 0; i < ci; ++i) {
                sum += (static_cast<int64_t>(pixel[group * ci + i]) - input_zero_point) *
                       static_cast<int64_t>(taps[i * co + o]);
              }
              out[o] += sum;
            }
          }
        }
      }
    }
  }
}

void Quantize(const float* x, int64_t size, float scale, int64_t zero_point, int64_t lo, int64_t hi,
              float* out) {
  // float32 throughout, as Relax computes it; clamping in float keeps huge inputs defined.
  const float low = static_cast<float>(lo), high = static_cast<float>(hi);
  for (int64_t i = 0; i < size; ++i) {
    const float q = std::nearbyint(x[i] / scale) + static_cast<float>(zero_point);
    out[i] = std::min(std::max(q, low), high);
  }
}

void Dequantize(const float* q, int64_t size, float scale, int64_t zero_point, float* out) {
  for (int64_t i = 0; i < size; ++i) {
    out[i] = scale * static_cast<float>(static_cast<int64_t>(q[i]) - zero_point);
  }
}

}  // namespace kernels
}  // namespace example_npu
