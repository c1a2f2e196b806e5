/*!
 * \file kernels/near_ties.cc
 * \brief Near-tie outputs of QDQ layers and TVM's float32 result for them (kernels/near_ties.h).
 */
#include "kernels/near_ties.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/qdq_float32.h"

namespace example_npu {
namespace kernels {
namespace {

/*! \brief out[at] = value as `type`. */
void StoreResult(int64_t value, SumsType type, int64_t at, void* out) {
  switch (type) {
    case SumsType::kFloat32:
      static_cast<float*>(out)[at] = static_cast<float>(value);
      return;
    case SumsType::kInt8:
      static_cast<int8_t*>(out)[at] = static_cast<int8_t>(value);
      return;
    case SumsType::kUInt8:
      static_cast<uint8_t*>(out)[at] = static_cast<uint8_t>(value);
      return;
    case SumsType::kInt16:
      static_cast<int16_t*>(out)[at] = static_cast<int16_t>(value);
      return;
  }
}

/*! \brief The float32 sum's last steps: the bias added, then TVM's quantize. */
int64_t QuantizedFloat32Sum(float sum, const Requantization& requant, int64_t channel) {
  const Float32Operands& f = requant.float32;
  if (!f.bias.empty()) sum = sum + f.bias[channel];
  const QuantizedOutput out{requant.output_zero_point, requant.min, requant.max};
  return static_cast<int64_t>(Float32Quantize(f.output_scale, out)(sum));
}

}  // namespace

int64_t NearTieWindow(const Requantization& requant, int64_t channel) {
  const FixedPointMultiplier& m = requant.Multiplier(channel);
  int64_t window = m.shift > kNearTieBits ? int64_t{1} << (m.shift - kNearTieBits) : 1;
  const Float32Operands& f = requant.float32;
  if (!f.bias.empty()) {
    // The bias in accumulator units as TVM adds it, against the integer the NPU adds.
    const double units = static_cast<double>(f.bias[channel]) /
                         (static_cast<double>(f.input_scale) * f.WeightScale(channel));
    const double apart = std::abs(units - static_cast<double>(requant.bias[channel]));
    window += static_cast<int64_t>(std::ceil(std::min(apart, 1.0) * static_cast<double>(m.m0)));
  }
  return std::min(window, int64_t{1} << (m.shift - 1));
}

bool NearTie(int64_t value, const FixedPointMultiplier& m, int64_t window, int64_t zero_point,
             int64_t min, int64_t max) {
  const __int128 one = 1;
  const __int128 rounded = static_cast<__int128>(value) * m.m0 + (one << (m.shift - 1));
  const __int128 quotient = rounded >> m.shift;  // the exact rounding, half up
  const __int128 remainder = rounded - (quotient << m.shift);
  const __int128 near = window;
  // Just past a tie (rounded up from it) the other integer is one below; just short of one, one
  // above.
  __int128 lower;
  if (remainder < near) {
    lower = quotient - 1;
  } else if (remainder >= (one << m.shift) - near) {
    lower = quotient;
  } else {
    return false;
  }
  // Both integers clamp to one value unless the lower lies in [min, max - 1].
  return lower + zero_point >= min && lower + zero_point < max;
}

void FindNearTies(const int64_t* acc, int64_t rows, int64_t channels, const Requantization& requant,
                  std::vector<int64_t>* ties) {
  if (requant.float32.empty()) return;
  thread_local std::vector<int64_t> windows;
  windows.resize(static_cast<size_t>(channels));
  for (int64_t j = 0; j < channels; ++j) windows[j] = NearTieWindow(requant, j);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < channels; ++j) {
      const int64_t value = acc[i * channels + j] + (requant.bias.empty() ? 0 : requant.bias[j]);
      if (NearTie(value, requant.Multiplier(j), windows[j], requant.output_zero_point, requant.min,
                  requant.max)) {
        ties->push_back(i * channels + j);
      }
    }
  }
}

template <typename T>
int64_t Float32MatmulOutput(const T* x, int64_t x_zero_point, const int8_t* w, int64_t ldw,
                            int64_t w_zero_point, int64_t depth, const Requantization& requant,
                            int64_t channel) {
  const Float32Operands& f = requant.float32;
  const Float32Dequantize dx{static_cast<float>(x_zero_point), f.input_scale};
  const Float32Dequantize dw{static_cast<float>(w_zero_point), f.WeightScale(channel)};
  // TVM's legalized matmul: a float32 sum from 0, the products added in order of p.
  float sum = 0.0f;
  for (int64_t p = 0; p < depth; ++p) {
    sum = sum + dx(static_cast<float>(x[p])) * dw(static_cast<float>(w[p * ldw]));
  }
  return QuantizedFloat32Sum(sum, requant, channel);
}

template <typename T>
void BreakMatmulTies(const std::vector<int64_t>& ties, const T* x, int64_t x_zero_point,
                     const int8_t* w, int64_t ldw, int64_t w_zero_point, int64_t depth,
                     int64_t channels, const Requantization& requant, void* out, SumsType type,
                     int64_t pixel_stride) {
  for (int64_t tie : ties) {
    const int64_t row = tie / channels, channel = tie % channels;
    const int64_t result = Float32MatmulOutput(x + row * depth, x_zero_point, w + channel, ldw,
                                               w_zero_point, depth, requant, channel);
    StoreResult(result, type, row * pixel_stride + channel, out);
  }
}

template <typename T>
int64_t Float32ConvOutput(const T* input, const Shape& in_shape, int64_t x_zero_point,
                          const int8_t* weight, const Shape& weight_shape, const Shape& out_shape,
                          const Conv2dParams& params, const Requantization& requant, int64_t pixel,
                          int64_t channel) {
  const int64_t h = in_shape[1], w = in_shape[2], c = in_shape[3];
  const int64_t kh = weight_shape[0], kw = weight_shape[1], co = weight_shape[3];
  const int64_t oh = out_shape[1], ow = out_shape[2];
  const int64_t batch = pixel / (oh * ow), oy = pixel / ow % oh, ox = pixel % ow;
  const Float32Operands& f = requant.float32;
  const Float32Dequantize dx{static_cast<float>(x_zero_point), f.input_scale};
  const Float32Dequantize dw{0.0f, f.WeightScale(channel)};
  float sum = 0.0f;
  auto tap = [&](int64_t ky, int64_t kx, int64_t ci) {
    const int64_t iy = oy * params.strides[0] - params.padding[0] + ky * params.dilation[0];
    const int64_t ix = ox * params.strides[1] - params.padding[1] + kx * params.dilation[1];
    if (iy < 0 || iy >= h || ix < 0 || ix >= w) return;
    const float x = dx(static_cast<float>(input[((batch * h + iy) * w + ix) * c + ci]));
    sum = sum + x * dw(static_cast<float>(weight[((ky * kw + kx) * c + ci) * co + channel]));
  };
  if (f.channels_outermost) {
    for (int64_t ci = 0; ci < c; ++ci) {
      for (int64_t ky = 0; ky < kh; ++ky) {
        for (int64_t kx = 0; kx < kw; ++kx) tap(ky, kx, ci);
      }
    }
  } else {
    for (int64_t ky = 0; ky < kh; ++ky) {
      for (int64_t kx = 0; kx < kw; ++kx) {
        for (int64_t ci = 0; ci < c; ++ci) tap(ky, kx, ci);
      }
    }
  }
  return QuantizedFloat32Sum(sum, requant, channel);
}

template <typename T>
void BreakConvTies(const std::vector<int64_t>& ties, const T* input, const Shape& in_shape,
                   int64_t x_zero_point, const int8_t* weight, const Shape& weight_shape,
                   const Shape& out_shape, const Conv2dParams& params,
                   const Requantization& requant, void* out, SumsType type, int64_t pixel_stride) {
  const int64_t channels = out_shape[3];
  for (int64_t tie : ties) {
    const int64_t pixel = tie / channels, channel = tie % channels;
    StoreResult(Float32ConvOutput(input, in_shape, x_zero_point, weight, weight_shape, out_shape,
                                  params, requant, pixel, channel),
                type, pixel * pixel_stride + channel, out);
  }
}

#define EXAMPLE_NPU_NEAR_TIES(T)                                                                   \
  template int64_t Float32MatmulOutput(const T*, int64_t, const int8_t*, int64_t, int64_t,         \
                                       int64_t, const Requantization&, int64_t);                   \
  template void BreakMatmulTies(const std::vector<int64_t>&, const T*, int64_t, const int8_t*,     \
                                int64_t, int64_t, int64_t, int64_t, const Requantization&, void*,  \
                                SumsType, int64_t);                                                \
  template int64_t Float32ConvOutput(const T*, const Shape&, int64_t, const int8_t*, const Shape&, \
                                     const Shape&, const Conv2dParams&, const Requantization&,     \
                                     int64_t, int64_t);                                            \
  template void BreakConvTies(const std::vector<int64_t>&, const T*, const Shape&, int64_t,        \
                              const int8_t*, const Shape&, const Shape&, const Conv2dParams&,      \
                              const Requantization&, void*, SumsType, int64_t);
EXAMPLE_NPU_NEAR_TIES(int8_t)
EXAMPLE_NPU_NEAR_TIES(uint8_t)
EXAMPLE_NPU_NEAR_TIES(int16_t)
#undef EXAMPLE_NPU_NEAR_TIES

}  // namespace kernels
}  // namespace example_npu
