/*!
 * \file kernels/resample.cc
 * \brief resize2d, pad and adaptive average pooling on tiles (see resample.h).
 *
 * Built with -ffp-contract=off: TVM's LLVM build rounds every float32 step of these formulas
 * (its generic x86-64 target has no FMA), so a fused multiply-add here would move a source
 * coordinate across a rounding boundary and pick another pixel.
 */
#include "kernels/resample.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "kernels/parallel.h"

namespace example_npu {
namespace kernels {
namespace {

constexpr int64_t kGrain = 16 * 1024;

/*!
 * \brief The float32 source coordinate of output `x` (topi.image.get_inx). TVM folds its
 * constant ratios in double and emits them as float32 constants; so does this.
 */
float SourceCoordinate(CoordinateMode mode, int64_t in, int64_t out, int64_t x) {
  const float scale = static_cast<float>(static_cast<double>(in) / static_cast<double>(out));
  const float fx = static_cast<float>(x);
  switch (mode) {
    case CoordinateMode::kHalfPixel:
      return (fx + 0.5f) * scale - 0.5f;
    case CoordinateMode::kAlignCorners: {
      const float ratio =
          static_cast<float>(static_cast<double>(in - 1) / static_cast<double>(out - 1));
      return ratio * fx;
    }
    case CoordinateMode::kAsymmetric:
      return scale * fx;
    case CoordinateMode::kPytorchHalfPixel:
      return out > 1 ? (fx + 0.5f) * scale - 0.5f : 0.0f;
    case CoordinateMode::kTfHalfPixelForNn:
      return (fx + 0.5f) * scale;
  }
  return 0.0f;
}

int64_t Clamp(int64_t index, int64_t extent) { return std::clamp<int64_t>(index, 0, extent - 1); }

/*! \brief The input index nearest-neighbour output `x` reads (topi get_closest_index), clamped. */
int64_t NearestIndex(const Resize2dParams& p, int axis, int64_t x) {
  const int64_t in = p.in_size[axis], out = p.out_size[axis];
  // TVM divides integers when an asymmetric floor resize is an integer upscale.
  if (p.mode == CoordinateMode::kAsymmetric && p.rounding == NearestRounding::kFloor &&
      out % in == 0) {
    return Clamp(x / (out / in), in);
  }
  const float c = SourceCoordinate(p.mode, in, out, x);
  float rounded = 0.0f;
  switch (p.rounding) {
    case NearestRounding::kRound:
      rounded = std::nearbyint(c);  // llvm.nearbyint: halves to even
      break;
    case NearestRounding::kFloor:
      rounded = std::floor(c + 1e-5f);
      break;
    case NearestRounding::kCeil:
      rounded = std::ceil(c - 1e-5f);
      break;
    case NearestRounding::kRoundPreferFloor:
      rounded = std::ceil(c - 0.5f);
      break;
    case NearestRounding::kRoundPreferCeil:
      rounded = std::floor(c + 0.5f);
      break;
  }
  return Clamp(static_cast<int64_t>(rounded), in);
}

/*! \brief Bilinear taps of one output index: two clamped input indices and the weight of the
 * second (topi: x_int = floor(in_x), x_lerp = in_x - x_int). */
struct LinearTap {
  int64_t first;
  int64_t second;
  float weight;
};

LinearTap LinearTapOf(const Resize2dParams& p, int axis, int64_t x) {
  const int64_t in = p.in_size[axis];
  const float c = SourceCoordinate(p.mode, in, p.out_size[axis], x);
  const float floor_c = std::floor(c);
  const int64_t base = static_cast<int64_t>(floor_c);
  return LinearTap{Clamp(base, in), Clamp(base + 1, in), c - floor_c};
}

/*! \brief TFLite's integer bilinear taps of one output index: two clamped input indices and the
 * second one's weight in 1/1024ths (negative or above 1024 where the coordinate lies outside
 * [first, second]). */
struct IntegerTap {
  int64_t first;
  int64_t second;
  int64_t weight_1024;
};

/*! \brief The IntegerTap of output `x` (ComputeInterpolationValuesInteger): the source
 * coordinate in 1/1024ths, truncated to the two indices. TFLite reads the truncated indices as
 * they are; they are clamped here so a tile never reads outside the input. */
IntegerTap TfliteIntegerTapOf(const Resize2dParams& p, int axis, int64_t x) {
  const int64_t in = p.in_size[axis], out = p.out_size[axis];
  int64_t scale = ((int64_t{1} << 10) * in + out / 2) / out;
  if (p.mode == CoordinateMode::kAlignCorners && out > 1) {
    scale = ((int64_t{1} << 10) * (in - 1) + (out - 1) / 2) / (out - 1);
  }
  int64_t source = x * scale;
  if (p.mode == CoordinateMode::kHalfPixel) source += scale / 2 - (1 << 9);
  const int64_t first = std::max<int64_t>(source / 1024, 0);  // C division: toward zero
  const int64_t second = std::min<int64_t>((source + 1023) / 1024, in - 1);
  return IntegerTap{Clamp(first, in), Clamp(second, in), source - 1024 * first};
}

/*! \brief TFLite's int8 bilinear of four integer taps with 10-bit weights: the 20-bit weighted
 * sum rounded once, half away from zero (exact in int64). */
inline float TfliteBilinear(float top_left, float top_right, float bottom_left, float bottom_right,
                            int64_t dx, int64_t dy) {
  const int64_t sum = static_cast<int64_t>(top_left) * (1024 - dy) * (1024 - dx) +
                      static_cast<int64_t>(bottom_left) * dy * (1024 - dx) +
                      static_cast<int64_t>(top_right) * (1024 - dy) * dx +
                      static_cast<int64_t>(bottom_right) * dy * dx;
  const int64_t half = sum > 0 ? (int64_t{1} << 19) : -(int64_t{1} << 19);
  return static_cast<float>((sum + half) / (int64_t{1} << 20));
}

/*! \brief TVM's _lerp: a * (1 - t) + b * t, each step rounded. */
inline float Lerp(float a, float b, float t) { return a * (1.0f - t) + b * t; }

struct AxisTaps {
  std::vector<int64_t> first;  // relative to the tile's input box
  std::vector<int64_t> second;
  std::vector<float> weight;         // TVM's bilinear
  std::vector<int64_t> weight_1024;  // TFLite's integer bilinear
};

AxisTaps TapsOfAxis(const Resize2dParams& p, int axis, int64_t out_extent, int64_t in_extent) {
  AxisTaps taps;
  const int64_t base = p.in_begin[axis];
  for (int64_t i = 0; i < out_extent; ++i) {
    const int64_t x = p.out_begin[axis] + i;
    LinearTap tap{0, 0, 0.0f};
    int64_t weight_1024 = 0;
    if (p.method == ResizeMethod::kNearest) {
      tap.first = tap.second = NearestIndex(p, axis, x);
    } else if (p.tflite_integer) {
      const IntegerTap integer = TfliteIntegerTapOf(p, axis, x);
      tap.first = integer.first;
      tap.second = integer.second;
      weight_1024 = integer.weight_1024;
    } else {
      tap = LinearTapOf(p, axis, x);
    }
    TVM_FFI_ICHECK(tap.first >= base && tap.second < base + in_extent)
        << "Resize2d: the input tile does not hold the source of output " << x;
    taps.first.push_back(tap.first - base);
    taps.second.push_back(tap.second - base);
    taps.weight.push_back(tap.weight);
    taps.weight_1024.push_back(weight_1024);
  }
  return taps;
}

}  // namespace

Range ResizeSourceRange(const Resize2dParams& p, int axis, int64_t out_first, int64_t out_end) {
  // Every coordinate mode and rounding is non-decreasing in the output index: the ends decide.
  if (p.method == ResizeMethod::kNearest) {
    return Range{NearestIndex(p, axis, out_first), NearestIndex(p, axis, out_end - 1) + 1};
  }
  if (p.tflite_integer) {
    return Range{TfliteIntegerTapOf(p, axis, out_first).first,
                 TfliteIntegerTapOf(p, axis, out_end - 1).second + 1};
  }
  return Range{LinearTapOf(p, axis, out_first).first, LinearTapOf(p, axis, out_end - 1).second + 1};
}

void Resize2d(const float* input, const Shape& in_shape, float* out, const Shape& out_shape,
              const Resize2dParams& p) {
  TVM_FFI_ICHECK(in_shape.size() == 4 && out_shape.size() == 4) << "Resize2d: 4-D tiles";
  const bool nchw = p.layout == DataLayout::kNCHW;
  const int64_t batch = out_shape[0], channels = nchw ? out_shape[1] : out_shape[3];
  const int64_t ih = nchw ? in_shape[2] : in_shape[1], iw = nchw ? in_shape[3] : in_shape[2];
  const int64_t oh = nchw ? out_shape[2] : out_shape[1], ow = nchw ? out_shape[3] : out_shape[2];
  TVM_FFI_ICHECK(in_shape[0] == batch && (nchw ? in_shape[1] : in_shape[3]) == channels)
      << "Resize2d: batch and channels of the tiles differ";
  const AxisTaps ys = TapsOfAxis(p, 0, oh, ih);
  const AxisTaps xs = TapsOfAxis(p, 1, ow, iw);
  const bool linear = p.method == ResizeMethod::kLinear;
  // Element strides of (n, c, y, x) in both tiles.
  const int64_t in_c = nchw ? ih * iw : 1, in_y = nchw ? iw : iw * channels,
                in_x = nchw ? 1 : channels, in_n = ih * iw * channels;
  const int64_t out_c = nchw ? oh * ow : 1, out_y = nchw ? ow : ow * channels,
                out_x = nchw ? 1 : channels, out_n = oh * ow * channels;
  ParallelFor(batch * oh, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, ow * channels)),
              [&](int64_t begin, int64_t end) {
                for (int64_t row = begin; row < end; ++row) {
                  const int64_t n = row / oh, y = row % oh;
                  const float* top = input + n * in_n + ys.first[y] * in_y;
                  const float* bottom = input + n * in_n + ys.second[y] * in_y;
                  float* dst = out + n * out_n + y * out_y;
                  for (int64_t x = 0; x < ow; ++x) {
                    for (int64_t c = 0; c < channels; ++c) {
                      const int64_t a = xs.first[x] * in_x + c * in_c;
                      const int64_t b = xs.second[x] * in_x + c * in_c;
                      float value = top[a];
                      if (linear && p.tflite_integer) {
                        value = TfliteBilinear(top[a], top[b], bottom[a], bottom[b],
                                               xs.weight_1024[x], ys.weight_1024[y]);
                      } else if (linear) {
                        const float upper = Lerp(top[a], top[b], xs.weight[x]);
                        const float lower = Lerp(bottom[a], bottom[b], xs.weight[x]);
                        value = Lerp(upper, lower, ys.weight[y]);
                      }
                      dst[x * out_x + c * out_c] = value;
                    }
                  }
                }
              });
}

int64_t PadSource(const PadParams& p, size_t dim, int64_t o) {
  const int64_t n = p.in_shape[dim];
  const int64_t i = o - p.before[dim];
  if (p.before[dim] == 0 && p.after[dim] == 0) return i;
  switch (p.mode) {
    case PadMode::kConstant:
      return i >= 0 && i < n ? i : -1;
    case PadMode::kReflect: {
      const int64_t m = n - 1;
      return m - std::llabs(m - std::llabs(i));
    }
    case PadMode::kReplicate:
      return Clamp(i, n);
    case PadMode::kCircular:
      return ((i + n) % n + n) % n;  // floor modulo, as TVM's indexmod
  }
  return -1;
}

Range PadSourceRange(const PadParams& p, size_t dim, int64_t out_first, int64_t out_end) {
  const int64_t n = p.in_shape[dim], before = p.before[dim];
  if (out_end <= out_first) return Range{0, 0};
  if (p.mode == PadMode::kCircular && (p.before[dim] > 0 || p.after[dim] > 0)) {
    // Wrapping: one run of the input unless the outputs cross a period boundary.
    const int64_t first = out_first - before, last = out_end - 1 - before;
    const auto period = [n](int64_t i) { return i >= 0 ? i / n : -((-i + n - 1) / n); };
    if (last - first + 1 >= n || period(first) != period(last)) return Range{0, n};
    return Range{PadSource(p, dim, out_first), PadSource(p, dim, out_end - 1) + 1};
  }
  // The other maps are monotone between the padding's edges: the extremes lie at the ends of
  // the range or at those edges.
  int64_t lo = n, hi = -1;
  for (int64_t o : {out_first, out_end - 1, before - 1, before, before + n - 1, before + n}) {
    if (o < out_first || o >= out_end) continue;
    const int64_t i = PadSource(p, dim, o);
    if (i < 0) continue;
    lo = std::min(lo, i);
    hi = std::max(hi, i);
  }
  return hi < 0 ? Range{0, 0} : Range{lo, hi + 1};
}

void Pad(const float* input, const Shape& in_shape, float* out, const Shape& out_shape,
         const PadParams& p) {
  const size_t rank = out_shape.size();
  TVM_FFI_ICHECK(rank >= 1 && in_shape.size() == rank && p.in_shape.size() == rank)
      << "Pad: tiles and the tensor must have one rank";
  if (NumElements(out_shape) == 0) return;
  // Per dim and output index of the tile: the input offset of the tile (stride-scaled), or -1.
  const std::vector<int64_t> in_strides = RowMajorStrides(in_shape);
  std::vector<std::vector<int64_t>> offsets(rank);
  for (size_t d = 0; d < rank; ++d) {
    for (int64_t k = 0; k < out_shape[d]; ++k) {
      const int64_t i = PadSource(p, d, p.out_begin[d] + k);
      if (i < 0) {
        offsets[d].push_back(-1);
        continue;
      }
      const int64_t local = i - p.in_begin[d];
      TVM_FFI_ICHECK(local >= 0 && local < in_shape[d])
          << "Pad: the input tile does not hold the source of output " << p.out_begin[d] + k;
      offsets[d].push_back(local * in_strides[d]);
    }
  }
  const int64_t inner = out_shape[rank - 1];
  const int64_t rows = NumElements(out_shape) / inner;
  const std::vector<int64_t>& last = offsets[rank - 1];
  ParallelFor(rows, std::max<int64_t>(1, kGrain / inner), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> index(rank, 0);
    for (int64_t row = begin; row < end; ++row) {
      int64_t rest = row, base = 0;
      bool filled = false;
      for (size_t d = rank - 1; d-- > 0;) {
        const int64_t k = rest % out_shape[d];
        rest /= out_shape[d];
        filled |= offsets[d][k] < 0;
        base += offsets[d][k] < 0 ? 0 : offsets[d][k];
      }
      float* dst = out + row * inner;
      for (int64_t k = 0; k < inner; ++k) {
        dst[k] = filled || last[k] < 0 ? p.value : input[base + last[k]];
      }
    }
  });
}

Range AdaptiveWindow(int64_t o, int64_t in, int64_t out) {
  const int64_t start = o * in / out;
  const int64_t end = (o + 1) * in / out + ((o + 1) * in % out == 0 ? 0 : 1);
  return Range{start, end};
}

Range AdaptiveSourceRange(const AdaptivePoolParams& p, int axis, int64_t out_first,
                          int64_t out_end) {
  return Range{AdaptiveWindow(out_first, p.in_size[axis], p.out_size[axis]).begin,
               AdaptiveWindow(out_end - 1, p.in_size[axis], p.out_size[axis]).end};
}

void AdaptiveAvgPool2d(const float* input, const Shape& in_shape, float* out,
                       const Shape& out_shape, const AdaptivePoolParams& p) {
  TVM_FFI_ICHECK(in_shape.size() == 4 && out_shape.size() == 4) << "AdaptiveAvgPool2d: 4-D tiles";
  const bool nchw = p.layout == DataLayout::kNCHW;
  const int64_t batch = out_shape[0], channels = nchw ? out_shape[1] : out_shape[3];
  const int64_t ih = nchw ? in_shape[2] : in_shape[1], iw = nchw ? in_shape[3] : in_shape[2];
  const int64_t oh = nchw ? out_shape[2] : out_shape[1], ow = nchw ? out_shape[3] : out_shape[2];
  const int64_t in_c = nchw ? ih * iw : 1, in_y = nchw ? iw : iw * channels,
                in_x = nchw ? 1 : channels, in_n = ih * iw * channels;
  const int64_t out_c = nchw ? oh * ow : 1, out_y = nchw ? ow : ow * channels,
                out_x = nchw ? 1 : channels, out_n = oh * ow * channels;
  std::vector<Range> rows(oh), cols(ow);
  for (int64_t y = 0; y < oh; ++y) {
    const Range w = AdaptiveWindow(p.out_begin[0] + y, p.in_size[0], p.out_size[0]);
    rows[y] = Range{w.begin - p.in_begin[0], w.end - p.in_begin[0]};
    TVM_FFI_ICHECK(rows[y].begin >= 0 && rows[y].end <= ih) << "AdaptiveAvgPool2d: input tile";
  }
  for (int64_t x = 0; x < ow; ++x) {
    const Range w = AdaptiveWindow(p.out_begin[1] + x, p.in_size[1], p.out_size[1]);
    cols[x] = Range{w.begin - p.in_begin[1], w.end - p.in_begin[1]};
    TVM_FFI_ICHECK(cols[x].begin >= 0 && cols[x].end <= iw) << "AdaptiveAvgPool2d: input tile";
  }
  ParallelFor(batch * oh, 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / oh, y = row % oh;
      for (int64_t x = 0; x < ow; ++x) {
        // The divisor as TVM builds it: float(1) * float(taps_h) * float(taps_w).
        const float divisor = 1.0f * static_cast<float>(rows[y].end - rows[y].begin) *
                              static_cast<float>(cols[x].end - cols[x].begin);
        for (int64_t c = 0; c < channels; ++c) {
          const float* plane = input + n * in_n + c * in_c;
          float sum = 0.0f;
          for (int64_t i = rows[y].begin; i < rows[y].end; ++i) {
            for (int64_t j = cols[x].begin; j < cols[x].end; ++j) sum += plane[i * in_y + j * in_x];
          }
          out[n * out_n + y * out_y + x * out_x + c * out_c] = sum / divisor;
        }
      }
    }
  });
}

}  // namespace kernels
}  // namespace example_npu
