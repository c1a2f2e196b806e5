/*!
 * \file tests/cpp/test_conv2d.cc
 * \brief Conv2d against a naive per-output-element reference, all four layout combinations.
 */
#include <gtest/gtest.h>
#include <tvm/ffi/error.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "test_util.h"

namespace example_npu {
namespace kernels {
namespace {

using test_util::ExpectAllClose;
using test_util::RandomVector;

/*! \brief Layout-independent description of one convolution. */
struct ConvCase {
  int64_t n, c_in, h, w, c_out, kh, kw;
  std::array<int64_t, 2> strides;
  std::array<int64_t, 4> padding;  // top, left, bottom, right
  std::array<int64_t, 2> dilation;
  int64_t groups;

  int64_t OutH() const {
    return (h + padding[0] + padding[2] - (kh - 1) * dilation[0] - 1) / strides[0] + 1;
  }
  int64_t OutW() const {
    return (w + padding[1] + padding[3] - (kw - 1) * dilation[1] - 1) / strides[1] + 1;
  }
  Conv2dParams Params(DataLayout data_layout, KernelLayout kernel_layout) const {
    Conv2dParams p;
    p.strides = strides;
    p.padding = padding;
    p.dilation = dilation;
    p.groups = groups;
    p.data_layout = data_layout;
    p.kernel_layout = kernel_layout;
    return p;
  }
  std::string ToString() const {
    std::ostringstream os;
    os << "N" << n << " C" << c_in << " H" << h << " W" << w << " O" << c_out << " K" << kh << "x"
       << kw << " s" << strides[0] << "," << strides[1] << " p" << padding[0] << "," << padding[1]
       << "," << padding[2] << "," << padding[3] << " d" << dilation[0] << "," << dilation[1]
       << " g" << groups;
    return os.str();
  }
};

Shape DataShape(int64_t n, int64_t c, int64_t h, int64_t w, DataLayout layout) {
  return layout == DataLayout::kNCHW ? Shape{n, c, h, w} : Shape{n, h, w, c};
}

int64_t DataIndex(const Shape& s, DataLayout layout, int64_t n, int64_t c, int64_t h, int64_t w) {
  return layout == DataLayout::kNCHW ? ((n * s[1] + c) * s[2] + h) * s[3] + w
                                     : ((n * s[1] + h) * s[2] + w) * s[3] + c;
}

Shape WeightShape(const ConvCase& c, KernelLayout layout) {
  const int64_t in_per_group = c.c_in / c.groups;
  return layout == KernelLayout::kOIHW ? Shape{c.c_out, in_per_group, c.kh, c.kw}
                                       : Shape{c.kh, c.kw, in_per_group, c.c_out};
}

int64_t WeightIndex(const Shape& s, KernelLayout layout, int64_t o, int64_t i, int64_t kh,
                    int64_t kw) {
  return layout == KernelLayout::kOIHW ? ((o * s[1] + i) * s[2] + kh) * s[3] + kw
                                       : ((kh * s[1] + kw) * s[2] + i) * s[3] + o;
}

/*!
 * \brief Each output element summed straight from the definition: window taps that fall outside
 * the input read 0 (zero padding, multiplied like any tap, as TVM does: 0 * inf is NaN); output
 * channel o of group o / (C_out / groups) reads that group's input channels.
 */
std::vector<double> NaiveConv(const ConvCase& c, const std::vector<float>& in, DataLayout dl,
                              const std::vector<float>& wt, KernelLayout kl) {
  const Shape in_shape = DataShape(c.n, c.c_in, c.h, c.w, dl);
  const Shape w_shape = WeightShape(c, kl);
  const Shape out_shape = DataShape(c.n, c.c_out, c.OutH(), c.OutW(), dl);
  const int64_t in_per_group = c.c_in / c.groups;
  const int64_t out_per_group = c.c_out / c.groups;
  std::vector<double> out(NumElements(out_shape));
  for (int64_t n = 0; n < c.n; ++n) {
    for (int64_t o = 0; o < c.c_out; ++o) {
      const int64_t group = o / out_per_group;
      for (int64_t oh = 0; oh < c.OutH(); ++oh) {
        for (int64_t ow = 0; ow < c.OutW(); ++ow) {
          double acc = 0.0;
          for (int64_t i = 0; i < in_per_group; ++i) {
            for (int64_t ky = 0; ky < c.kh; ++ky) {
              for (int64_t kx = 0; kx < c.kw; ++kx) {
                const int64_t y = oh * c.strides[0] - c.padding[0] + ky * c.dilation[0];
                const int64_t x = ow * c.strides[1] - c.padding[1] + kx * c.dilation[1];
                const bool inside = y >= 0 && y < c.h && x >= 0 && x < c.w;
                const double v =
                    inside ? in[DataIndex(in_shape, dl, n, group * in_per_group + i, y, x)] : 0.0;
                acc += v * wt[WeightIndex(w_shape, kl, o, i, ky, kx)];
              }
            }
          }
          out[DataIndex(out_shape, dl, n, o, oh, ow)] = acc;
        }
      }
    }
  }
  return out;
}

void CheckConv(const ConvCase& c, std::mt19937* rng) {
  for (DataLayout dl : {DataLayout::kNCHW, DataLayout::kNHWC}) {
    for (KernelLayout kl : {KernelLayout::kOIHW, KernelLayout::kHWIO}) {
      const Shape in_shape = DataShape(c.n, c.c_in, c.h, c.w, dl);
      const Shape w_shape = WeightShape(c, kl);
      const Shape out_shape = DataShape(c.n, c.c_out, c.OutH(), c.OutW(), dl);
      const std::vector<float> in = RandomVector(NumElements(in_shape), rng);
      const std::vector<float> wt = RandomVector(NumElements(w_shape), rng);
      std::vector<float> out(NumElements(out_shape), -123.0f);
      const Conv2dParams p = c.Params(dl, kl);
      Conv2d(in.data(), in_shape, wt.data(), w_shape, out.data(), out_shape, p);
      const double reduction = static_cast<double>(c.c_in / c.groups * c.kh * c.kw);
      ExpectAllClose(out, NaiveConv(c, in, dl, wt, kl),
                     c.ToString() + (dl == DataLayout::kNCHW ? " NCHW" : " NHWC") +
                         (kl == KernelLayout::kOIHW ? "/OIHW" : "/HWIO"),
                     1e-5, 1e-5 * std::sqrt(reduction));
    }
  }
}

TEST(Conv2dTest, NaNAndInfinityAsTvmIncludingPaddingTimesInfiniteWeights) {
  // Regular, grouped and depthwise; NHWC / HWIO depthwise is the vector engine's own loop.
  std::mt19937 rng(23);
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 0.0f};
  const ConvCase cases[] = {
      {1, 4, 7, 6, 6, 3, 3, {1, 1}, {1, 2, 2, 0}, {1, 1}, 1},
      {2, 16, 6, 9, 16, 3, 3, {1, 2}, {2, 1, 1, 2}, {1, 1}, 16},
      {1, 6, 5, 5, 6, 2, 3, {2, 1}, {1, 1, 1, 1}, {1, 2}, 3},
  };
  for (const ConvCase& c : cases) {
    for (DataLayout dl : {DataLayout::kNCHW, DataLayout::kNHWC}) {
      const KernelLayout kl = dl == DataLayout::kNCHW ? KernelLayout::kOIHW : KernelLayout::kHWIO;
      const Shape in_shape = DataShape(c.n, c.c_in, c.h, c.w, dl);
      const Shape w_shape = WeightShape(c, kl);
      const Shape out_shape = DataShape(c.n, c.c_out, c.OutH(), c.OutW(), dl);
      std::vector<float> in = RandomVector(NumElements(in_shape), &rng);
      std::vector<float> wt = RandomVector(NumElements(w_shape), &rng);
      for (size_t i = 0; i < in.size(); i += 7 + rng() % 40) in[i] = specials[rng() % 4];
      for (size_t i = 0; i < wt.size(); i += 5 + rng() % 20) wt[i] = specials[rng() % 4];
      std::vector<float> out(NumElements(out_shape));
      const Conv2dParams p = c.Params(dl, kl);
      Conv2d(in.data(), in_shape, wt.data(), w_shape, out.data(), out_shape, p);
      const std::vector<double> expected = NaiveConv(c, in, dl, wt, kl);
      int64_t nan = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        nan += std::isnan(expected[i]);
        if (std::isnan(expected[i]) || std::isinf(expected[i])) {
          EXPECT_TRUE(std::isnan(expected[i]) ? std::isnan(out[i]) : out[i] == expected[i])
              << c.ToString() << " element " << i << ": " << out[i] << " vs " << expected[i];
        } else {
          EXPECT_NEAR(out[i], expected[i], 1e-4 * (1 + std::abs(expected[i]))) << c.ToString();
        }
      }
      EXPECT_GT(nan, 0) << c.ToString();
    }
  }
}

TEST(Conv2dTest, NhwcSumsEachOutputInTapOrderBitForBit) {
  // The NHWC kernel reads a kernel row's taps (or a gathered row) as one run: the products must
  // still be summed one multiply-add at a time in (kh, kw, ci) order, as per tap. Checked bit for
  // bit against that chain of fused multiply-adds (the kernel's arithmetic on CPUs with FMA, as
  // every AVX2 and AVX-512 one has): unpadded, padded through the copy, padded through the
  // gathered rows, and dilated.
  std::mt19937 rng(25);
  const ConvCase cases[] = {
      {1, 3, 32, 32, 20, 16, 16, {16, 16}, {0, 0, 0, 0}, {1, 1}, 1},
      {1, 5, 9, 8, 17, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {1, 4, 2, 2, 16, 3, 3, {1, 1}, {40, 40, 40, 40}, {1, 1}, 1},
      {1, 6, 9, 9, 16, 3, 2, {1, 2}, {1, 0, 2, 1}, {2, 1}, 1},
      {1, 6, 9, 9, 16, 2, 3, {1, 1}, {0, 0, 0, 0}, {1, 2}, 1},
  };
  for (const ConvCase& c : cases) {
    const Shape in_shape = DataShape(c.n, c.c_in, c.h, c.w, DataLayout::kNHWC);
    const Shape w_shape = WeightShape(c, KernelLayout::kHWIO);
    const Shape out_shape = DataShape(c.n, c.c_out, c.OutH(), c.OutW(), DataLayout::kNHWC);
    const std::vector<float> in = RandomVector(NumElements(in_shape), &rng);
    const std::vector<float> wt = RandomVector(NumElements(w_shape), &rng);
    std::vector<float> out(NumElements(out_shape));
    Conv2d(in.data(), in_shape, wt.data(), w_shape, out.data(), out_shape,
           c.Params(DataLayout::kNHWC, KernelLayout::kHWIO));
    for (int64_t oh = 0; oh < c.OutH(); ++oh) {
      for (int64_t ow = 0; ow < c.OutW(); ++ow) {
        for (int64_t o = 0; o < c.c_out; ++o) {
          float acc = 0.0f;
          for (int64_t ky = 0; ky < c.kh; ++ky) {
            for (int64_t kx = 0; kx < c.kw; ++kx) {
              const int64_t y = oh * c.strides[0] - c.padding[0] + ky * c.dilation[0];
              const int64_t x = ow * c.strides[1] - c.padding[1] + kx * c.dilation[1];
              const bool inside = y >= 0 && y < c.h && x >= 0 && x < c.w;
              for (int64_t i = 0; i < c.c_in; ++i) {
                const float v = inside ? in[DataIndex(in_shape, DataLayout::kNHWC, 0, i, y, x)] : 0;
                acc = std::fma(v, wt[WeightIndex(w_shape, KernelLayout::kHWIO, o, i, ky, kx)], acc);
              }
            }
          }
          ASSERT_EQ(out[DataIndex(out_shape, DataLayout::kNHWC, 0, o, oh, ow)], acc)
              << c.ToString() << " at " << oh << "," << ow << "," << o;
        }
      }
    }
  }
}

TEST(Conv2dTest, AttributesAtTheirLimitsAllocateOnlyTheWork) {
  // Padding, strides and dilation are valid up to 2^31 each. The padded copy of a 1-pixel input
  // padded by 2^31 on both sides was sized h_p * w_p * c (wrapping to 0: a wild write), or was
  // 16 GiB for a 2x1x3x1 weight dilated by 2^31 (fuzz findings of issue 17); every layout now
  // computes these few outputs from what it reads, checked against the definition.
  std::mt19937 rng(24);
  constexpr int64_t kMax = int64_t{1} << 31;
  const std::vector<ConvCase> cases = {
      {1, 1, 1, 1, 2, 3, 1, {1, 1}, {kMax, 0, kMax, 0}, {kMax, 1}, 1},
      {1, 2, 1, 1, 4, 3, 1, {kMax, kMax}, {kMax, kMax, kMax, kMax}, {1, 1}, 1},
      {1, 4, 2, 3, 4, 3, 3, {kMax, 1}, {kMax, 1, kMax, 1}, {kMax, 1}, 4},
      {1, 4, 1, 2, 6, 2, 2, {kMax - 1, 3}, {kMax, 2, kMax - 1, 2}, {kMax, 2}, 2},
  };
  for (const ConvCase& c : cases) CheckConv(c, &rng);
}

TEST(Conv2dTest, PlainConvolutionSizes) {
  std::mt19937 rng(21);
  const std::vector<ConvCase> cases = {
      {1, 3, 5, 5, 4, 3, 3, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {1, 1, 1, 1, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {2, 16, 8, 8, 32, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {1, 32, 9, 9, 33, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {1, 3, 33, 32, 5, 5, 5, {3, 3}, {2, 0, 1, 3}, {1, 1}, 1},
      {1, 4, 16, 17, 8, 3, 2, {2, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {1, 2, 31, 15, 3, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
  };
  for (const ConvCase& c : cases) CheckConv(c, &rng);
}

TEST(Conv2dTest, StridesPaddingDilation) {
  std::mt19937 rng(22);
  const std::vector<ConvCase> cases = {
      {2, 3, 7, 9, 4, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1},
      {1, 3, 11, 10, 2, 3, 3, {3, 2}, {0, 2, 1, 0}, {1, 1}, 1},
      {1, 2, 6, 6, 3, 3, 3, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1},
      {1, 2, 9, 12, 2, 3, 2, {2, 3}, {1, 0, 2, 3}, {2, 1}, 1},
      {1, 1, 3, 3, 1, 3, 3, {1, 1}, {3, 3, 3, 3}, {1, 1}, 1},  // corners see only padding
      {1, 2, 4, 4, 2, 5, 5, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1},  // kernel wider than the input
      {1, 3, 5, 18, 2, 2, 3, {1, 2}, {0, 1, 0, 1}, {2, 2}, 1},
  };
  for (const ConvCase& c : cases) CheckConv(c, &rng);
}

TEST(Conv2dTest, GroupedAndDepthwise) {
  std::mt19937 rng(23);
  const std::vector<ConvCase> cases = {
      {2, 4, 7, 9, 6, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 2},
      {1, 8, 16, 16, 8, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 8},   // depthwise
      {1, 8, 17, 15, 16, 3, 3, {1, 2}, {0, 1, 2, 1}, {2, 2}, 8},  // depth multiplier 2
      {2, 6, 12, 10, 9, 2, 3, {2, 3}, {1, 2, 0, 1}, {2, 1}, 3},
      {1, 33, 5, 6, 33, 3, 3, {2, 1}, {1, 0, 1, 2}, {1, 1}, 33},
      {1, 4, 6, 6, 2, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2},
  };
  for (const ConvCase& c : cases) CheckConv(c, &rng);
}

TEST(Conv2dTest, SizesCrossingGemmBlocksAndVectorWidths) {
  // Reductions over 256 (several depth blocks), more than 512 output pixels (several column
  // panels), depthwise rows wider than four vectors with a scalar tail, and a batch of two.
  std::mt19937 rng(24);
  const std::vector<ConvCase> cases = {
      {1, 40, 26, 27, 20, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {2, 300, 5, 7, 13, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {1, 19, 9, 45, 19, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 19},
      {2, 40, 11, 37, 40, 5, 5, {1, 1}, {2, 1, 2, 3}, {1, 2}, 40},
  };
  for (const ConvCase& c : cases) CheckConv(c, &rng);
}

TEST(Conv2dTest, StridedDepthwiseNhwcEqualsDenseCopies) {
  // The views are channel slices of wider tensors: pixel strides larger than the channel count.
  std::mt19937 rng(25);
  for (const ConvCase& c :
       std::vector<ConvCase>{{1, 16, 6, 58, 16, 3, 3, {1, 1}, {0, 1, 0, 1}, {1, 1}, 16},
                             {2, 24, 9, 11, 24, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 2}, 24},
                             {1, 19, 7, 30, 19, 5, 3, {1, 3}, {2, 0, 2, 1}, {1, 1}, 19}}) {
    const Conv2dParams p = c.Params(DataLayout::kNHWC, KernelLayout::kHWIO);
    const Shape in_shape = DataShape(c.n, c.c_in, c.h, c.w, DataLayout::kNHWC);
    const Shape w_shape = WeightShape(c, KernelLayout::kHWIO);
    const Shape out_shape = DataShape(c.n, c.c_out, c.OutH(), c.OutW(), DataLayout::kNHWC);
    ASSERT_TRUE(IsDepthwiseNhwc(in_shape, w_shape, p));
    const std::vector<float> in = RandomVector(NumElements(in_shape), &rng);
    const std::vector<float> w = RandomVector(NumElements(w_shape), &rng);
    std::vector<float> expected(NumElements(out_shape));
    Conv2d(in.data(), in_shape, w.data(), w_shape, expected.data(), out_shape, p);
    // Embed the input at channel 5 of a 3x wider tensor; write the output at channel 3 of one.
    const int64_t wide_in = 3 * c.c_in, wide_out = 3 * c.c_out;
    std::vector<float> big_in(c.n * c.h * c.w * wide_in, 99.0f);
    for (int64_t px = 0; px < c.n * c.h * c.w; ++px) {
      std::copy_n(&in[px * c.c_in], c.c_in, &big_in[px * wide_in + 5]);
    }
    std::vector<float> big_out(c.n * c.OutH() * c.OutW() * wide_out, -7.0f);
    DepthwiseConvStrided(&big_in[5], in_shape, {c.h * c.w * wide_in, c.w * wide_in, wide_in},
                         w.data(), w_shape, &big_out[3], out_shape,
                         {c.OutH() * c.OutW() * wide_out, c.OutW() * wide_out, wide_out}, p);
    for (int64_t px = 0; px < c.n * c.OutH() * c.OutW(); ++px) {
      for (int64_t ch = 0; ch < wide_out; ++ch) {
        const float got = big_out[px * wide_out + ch];
        if (ch >= 3 && ch < 3 + c.c_out) {
          ASSERT_EQ(got, expected[px * c.c_out + ch - 3]) << "pixel " << px << " channel " << ch;
        } else {
          ASSERT_EQ(got, -7.0f) << "wrote outside the view at pixel " << px;
        }
      }
    }
  }
}

TEST(Conv2dTest, KnownValues) {
  // 3x3 ramp, 2x2 kernel [[1, 2], [3, 4]]: cross-correlation, not convolution (no kernel flip).
  const std::vector<float> in = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> wt = {1, 2, 3, 4};
  std::vector<float> out(4);
  Conv2d(in.data(), {1, 1, 3, 3}, wt.data(), {1, 1, 2, 2}, out.data(), {1, 1, 2, 2}, {});
  EXPECT_EQ(out, (std::vector<float>{27, 37, 57, 67}));
}

TEST(Conv2dTest, RejectsInconsistentShapes) {
  std::vector<float> buf(1024, 0.0f);
  Conv2dParams p;
  // Weight input channels must be C_in / groups.
  EXPECT_THROW(
      Conv2d(buf.data(), {1, 4, 5, 5}, buf.data(), {2, 3, 3, 3}, buf.data(), {1, 2, 3, 3}, p),
      tvm::ffi::Error);
  // Output spatial size inconsistent with the attributes.
  EXPECT_THROW(
      Conv2d(buf.data(), {1, 4, 5, 5}, buf.data(), {2, 4, 3, 3}, buf.data(), {1, 2, 4, 4}, p),
      tvm::ffi::Error);
  p.groups = 3;
  EXPECT_THROW(
      Conv2d(buf.data(), {1, 4, 5, 5}, buf.data(), {3, 1, 3, 3}, buf.data(), {1, 3, 3, 3}, p),
      tvm::ffi::Error);
}

}  // namespace
}  // namespace kernels
}  // namespace example_npu
