/*!
 * \file tests/cpp/test_pool2d.cc
 * \brief Pool2d against a naive reference and against outputs recorded from Apache TVM 0.27
 *        (relax.nn.max_pool2d / avg_pool2d legalised to topi, target llvm).
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

constexpr float kLowest = std::numeric_limits<float>::lowest();

/*!
 * \brief TVM's output extent: floor division, and with ceil_mode s - 1 extra tail padding but no
 * window that would start beyond the user-padded input.
 */
int64_t PoolOut(int64_t x, int64_t k, int64_t s, int64_t d, int64_t lo, int64_t hi, bool ceil) {
  int64_t span = x + lo + hi - (k - 1) * d - 1 + (ceil ? s - 1 : 0);
  if (span < 0) return 0;
  int64_t out = span / s + 1;
  if (ceil && (out - 1) * s >= x + lo) --out;
  return out;
}

struct PoolCase {
  int64_t n, c, h, w;
  Pool2dParams p;

  int64_t OutH() const {
    return PoolOut(h, p.pool_size[0], p.strides[0], p.dilation[0], p.padding[0], p.padding[2],
                   p.ceil_mode);
  }
  int64_t OutW() const {
    return PoolOut(w, p.pool_size[1], p.strides[1], p.dilation[1], p.padding[1], p.padding[3],
                   p.ceil_mode);
  }
  std::string ToString() const {
    std::ostringstream os;
    os << (p.kind == PoolKind::kMax ? "max" : "avg") << " N" << n << " C" << c << " H" << h << " W"
       << w << " k" << p.pool_size[0] << "x" << p.pool_size[1] << " s" << p.strides[0] << ","
       << p.strides[1] << " d" << p.dilation[0] << "," << p.dilation[1] << " p" << p.padding[0]
       << "," << p.padding[1] << "," << p.padding[2] << "," << p.padding[3]
       << " ceil=" << p.ceil_mode << " include_pad=" << p.count_include_pad
       << (p.layout == DataLayout::kNCHW ? " NCHW" : " NHWC");
    return os.str();
  }
};

int64_t Index(const Shape& s, DataLayout layout, int64_t n, int64_t c, int64_t h, int64_t w) {
  return layout == DataLayout::kNCHW ? ((n * s[1] + c) * s[2] + h) * s[3] + w
                                     : ((n * s[1] + h) * s[2] + w) * s[3] + c;
}

Shape LayoutShape(int64_t n, int64_t c, int64_t h, int64_t w, DataLayout layout) {
  return layout == DataLayout::kNCHW ? Shape{n, c, h, w} : Shape{n, h, w, c};
}

/*!
 * \brief Every tap of every window visited with explicit bounds checks. Max ignores taps outside
 * the input (an all-padding window gives the lowest float, as TVM pads with min_value). Average
 * divides by the taps inside the user-padded input [-pad_lo, X + pad_hi) when count_include_pad
 * (the ceil_mode overhang is never counted), else by the in-bounds taps (at least 1).
 */
std::vector<double> NaivePool(const PoolCase& pc, const std::vector<float>& in) {
  const Pool2dParams& p = pc.p;
  const Shape in_shape = LayoutShape(pc.n, pc.c, pc.h, pc.w, p.layout);
  const Shape out_shape = LayoutShape(pc.n, pc.c, pc.OutH(), pc.OutW(), p.layout);
  std::vector<double> out(NumElements(out_shape));
  for (int64_t n = 0; n < pc.n; ++n) {
    for (int64_t c = 0; c < pc.c; ++c) {
      for (int64_t oh = 0; oh < pc.OutH(); ++oh) {
        for (int64_t ow = 0; ow < pc.OutW(); ++ow) {
          double max_v = kLowest;
          double sum = 0.0;
          int64_t valid = 0;
          int64_t in_padded = 0;
          for (int64_t ky = 0; ky < p.pool_size[0]; ++ky) {
            for (int64_t kx = 0; kx < p.pool_size[1]; ++kx) {
              const int64_t y = oh * p.strides[0] - p.padding[0] + ky * p.dilation[0];
              const int64_t x = ow * p.strides[1] - p.padding[1] + kx * p.dilation[1];
              if (y >= -p.padding[0] && y < pc.h + p.padding[2] && x >= -p.padding[1] &&
                  x < pc.w + p.padding[3]) {
                ++in_padded;
              }
              if (y < 0 || y >= pc.h || x < 0 || x >= pc.w) continue;
              const double v = in[Index(in_shape, p.layout, n, c, y, x)];
              ++valid;
              sum += v;
              max_v = std::max(max_v, v);
            }
          }
          double result = max_v;
          if (p.kind == PoolKind::kAvg) {
            result = sum / static_cast<double>(p.count_include_pad ? in_padded
                                                                   : std::max<int64_t>(valid, 1));
          }
          out[Index(out_shape, p.layout, n, c, oh, ow)] = result;
        }
      }
    }
  }
  return out;
}

void CheckPool(const PoolCase& pc, std::mt19937* rng) {
  const Shape in_shape = LayoutShape(pc.n, pc.c, pc.h, pc.w, pc.p.layout);
  const Shape out_shape = LayoutShape(pc.n, pc.c, pc.OutH(), pc.OutW(), pc.p.layout);
  const std::vector<float> in = RandomVector(NumElements(in_shape), rng);
  std::vector<float> out(NumElements(out_shape), -123.0f);
  Pool2d(in.data(), in_shape, out.data(), out_shape, pc.p);
  ExpectAllClose(out, NaivePool(pc, in), pc.ToString());
}

Pool2dParams MakeParams(PoolKind kind, std::array<int64_t, 2> k, std::array<int64_t, 2> s,
                        std::array<int64_t, 2> d, std::array<int64_t, 4> pad, bool ceil,
                        bool include_pad, DataLayout layout = DataLayout::kNCHW) {
  Pool2dParams p;
  p.kind = kind;
  p.pool_size = k;
  p.strides = s;
  p.dilation = d;
  p.padding = pad;
  p.ceil_mode = ceil;
  p.count_include_pad = include_pad;
  p.layout = layout;
  return p;
}

/*!
 * \brief TVM's max pooling as its LLVM build runs it: acc = lowest, then for every tap in (kh, kw)
 * order, padded taps reading the lowest float, acc = acc > v ? acc : v (an ordered compare and
 * select), so a NaN replaces the running max and the next tap replaces the NaN.
 */
std::vector<float> TvmMaxPool(const PoolCase& pc, const std::vector<float>& in) {
  const Pool2dParams& p = pc.p;
  const Shape in_shape = LayoutShape(pc.n, pc.c, pc.h, pc.w, p.layout);
  const Shape out_shape = LayoutShape(pc.n, pc.c, pc.OutH(), pc.OutW(), p.layout);
  std::vector<float> out(NumElements(out_shape));
  for (int64_t n = 0; n < pc.n; ++n) {
    for (int64_t c = 0; c < pc.c; ++c) {
      for (int64_t oh = 0; oh < pc.OutH(); ++oh) {
        for (int64_t ow = 0; ow < pc.OutW(); ++ow) {
          float acc = kLowest;
          for (int64_t ky = 0; ky < p.pool_size[0]; ++ky) {
            for (int64_t kx = 0; kx < p.pool_size[1]; ++kx) {
              const int64_t y = oh * p.strides[0] - p.padding[0] + ky * p.dilation[0];
              const int64_t x = ow * p.strides[1] - p.padding[1] + kx * p.dilation[1];
              const bool inside = y >= 0 && y < pc.h && x >= 0 && x < pc.w;
              const float v = inside ? in[Index(in_shape, p.layout, n, c, y, x)] : kLowest;
              acc = acc > v ? acc : v;
            }
          }
          out[Index(out_shape, p.layout, n, c, oh, ow)] = acc;
        }
      }
    }
  }
  return out;
}

TEST(Pool2dTest, MaxPoolPutsNaNAndInfinityWhereTvmDoes) {
  std::mt19937 rng(17);
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, kLowest, 0.0f};
  for (DataLayout layout : {DataLayout::kNCHW, DataLayout::kNHWC}) {
    for (const auto& pad : {std::array<int64_t, 4>{0, 0, 0, 0}, std::array<int64_t, 4>{1, 2, 2, 1},
                            std::array<int64_t, 4>{3, 0, 0, 3}}) {
      PoolCase pc{2, 9, 7, 8,
                  MakeParams(PoolKind::kMax, {3, 2}, {1, 2}, {1, 1}, pad, false, false, layout)};
      const Shape in_shape = LayoutShape(pc.n, pc.c, pc.h, pc.w, layout);
      const Shape out_shape = LayoutShape(pc.n, pc.c, pc.OutH(), pc.OutW(), layout);
      std::vector<float> in = RandomVector(NumElements(in_shape), &rng);
      for (size_t i = 0; i < in.size(); i += 1 + rng() % 5) in[i] = specials[rng() % 5];
      std::vector<float> out(NumElements(out_shape));
      Pool2d(in.data(), in_shape, out.data(), out_shape, pc.p);
      const std::vector<float> expected = TvmMaxPool(pc, in);
      for (size_t i = 0; i < out.size(); ++i) {
        const bool same = std::isnan(expected[i]) ? std::isnan(out[i]) : out[i] == expected[i];
        EXPECT_TRUE(same) << pc.ToString() << " element " << i << ": " << out[i] << " vs TVM "
                          << expected[i];
      }
    }
  }
}

TEST(Pool2dTest, HandPickedEdgeCases) {
  std::mt19937 rng(31);
  struct Geometry {
    int64_t n, c, h, w;
    std::array<int64_t, 2> k, s, d;
    std::array<int64_t, 4> pad;
  };
  const std::vector<Geometry> geometries = {
      {1, 1, 5, 5, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}},
      {2, 3, 5, 5, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}},
      {1, 2, 6, 7, {3, 3}, {3, 3}, {1, 1}, {1, 1, 0, 0}},
      {1, 3, 16, 16, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}},
      {1, 17, 33, 31, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}},
      {1, 32, 15, 17, {3, 2}, {3, 1}, {2, 2}, {2, 1, 0, 1}},
      {2, 4, 9, 10, {4, 3}, {2, 3}, {2, 1}, {3, 0, 1, 2}},
      {1, 2, 1, 1, {2, 2}, {1, 1}, {2, 2}, {1, 1, 0, 0}},  // every tap is padding
      {1, 2, 4, 4, {3, 3}, {1, 1}, {1, 1}, {3, 3, 3, 3}},  // windows fully in padding
      {1, 5, 7, 7, {7, 7}, {1, 1}, {1, 1}, {0, 0, 0, 0}},  // global window
      {1, 3, 8, 5, {1, 1}, {3, 2}, {1, 1}, {0, 0, 0, 0}},
  };
  for (const Geometry& g : geometries) {
    for (PoolKind kind : {PoolKind::kMax, PoolKind::kAvg}) {
      for (bool ceil : {false, true}) {
        for (bool include_pad : {false, true}) {
          for (DataLayout layout : {DataLayout::kNCHW, DataLayout::kNHWC}) {
            const PoolCase pc{g.n, g.c, g.h, g.w,
                              MakeParams(kind, g.k, g.s, g.d, g.pad, ceil, include_pad, layout)};
            if (pc.OutH() < 1 || pc.OutW() < 1) continue;
            CheckPool(pc, &rng);
          }
        }
      }
    }
  }
}

TEST(Pool2dTest, StridesAndDilationAtTheirLimits) {
  // A row buffer sized by the last window's span would be 2^32 floats here (issue 17): these
  // take the bounds-tested path and compute the few outputs they have.
  std::mt19937 rng(33);
  constexpr int64_t kMax = int64_t{1} << 31;
  for (PoolKind kind : {PoolKind::kMax, PoolKind::kAvg}) {
    for (DataLayout layout : {DataLayout::kNCHW, DataLayout::kNHWC}) {
      CheckPool({1, 2, 1, 3,
                 MakeParams(kind, {3, 2}, {1, kMax}, {kMax, 1}, {kMax, kMax, kMax, kMax}, false,
                            false, layout)},
                &rng);
      CheckPool({1, 3, 2, 2,
                 MakeParams(kind, {2, 2}, {kMax, kMax}, {1, kMax}, {kMax, 1, 0, kMax}, false, true,
                            layout)},
                &rng);
    }
  }
}

TEST(Pool2dTest, MaxPoolStartsAtTheLowestValueOfTheDtype) {
  // TVM pads float16 max pooling with float16's lowest value and starts its reduction there: a
  // window wholly in the padding, or of -inf only, gives -65504 (issue 17: the NPU gave -inf).
  for (DataLayout layout : {DataLayout::kNCHW, DataLayout::kNHWC}) {
    Pool2dParams p =
        MakeParams(PoolKind::kMax, {2, 2}, {2, 2}, {1, 1}, {2, 2, 2, 2}, false, false, layout);
    p.lowest = -65504.0f;
    const PoolCase pc{1, 1, 2, 2, p};
    std::vector<float> in = {-std::numeric_limits<float>::infinity(), -1.0f, 2.0f, 3.0f};
    in[1] = in[0];
    std::vector<float> out(static_cast<size_t>(pc.OutH() * pc.OutW()));
    Pool2d(in.data(), LayoutShape(1, 1, 2, 2, layout), out.data(),
           LayoutShape(1, 1, pc.OutH(), pc.OutW(), layout), p);
    ASSERT_EQ(out.size(), 9u);
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_EQ(out[i], i == 4 ? 3.0f : -65504.0f) << "output " << i;
    }
  }
}

TEST(Pool2dTest, RandomSweep) {
  std::mt19937 rng(32);
  std::uniform_int_distribution<int64_t> extent(1, 20), kernel(1, 4), stride(1, 3), dil(1, 2),
      pad(0, 3), chan(1, 5), coin(0, 1);
  int checked = 0;
  while (checked < 300) {
    const int64_t kh = kernel(rng), kw = kernel(rng);
    Pool2dParams p = MakeParams(coin(rng) ? PoolKind::kMax : PoolKind::kAvg, {kh, kw},
                                {stride(rng), stride(rng)}, {dil(rng), dil(rng)},
                                {pad(rng), pad(rng), pad(rng), pad(rng)}, coin(rng) == 1,
                                coin(rng) == 1, coin(rng) ? DataLayout::kNCHW : DataLayout::kNHWC);
    const PoolCase pc{coin(rng) + 1, chan(rng), extent(rng), extent(rng), p};
    if (pc.OutH() < 1 || pc.OutW() < 1) continue;
    CheckPool(pc, &rng);
    ++checked;
  }
}

/*! \brief Expected values recorded from TVM for a 1x1x5x5 ramp input (0, 1, ..., 24). */
struct GoldenCase {
  Pool2dParams params;
  int64_t out_h, out_w;
  std::vector<float> expected;
};

TEST(Pool2dTest, MatchesRecordedTvmOutputs) {
  const PoolKind kAvg = PoolKind::kAvg;
  const PoolKind kMax = PoolKind::kMax;
  const std::vector<GoldenCase> cases = {
      // count_include_pad counts the top/left padding but not the ceil_mode overhang.
      {MakeParams(kAvg, {3, 3}, {2, 2}, {1, 1}, {1, 1, 0, 0}, true, true),
       3,
       3,
       {1.3333334f, 3.0f, 4.0f, 7.0f, 12.0f, 13.5f, 12.0f, 19.5f, 21.0f}},
      {MakeParams(kAvg, {3, 3}, {2, 2}, {1, 1}, {1, 1, 0, 0}, true, false),
       3,
       3,
       {3.0f, 4.5f, 6.0f, 10.5f, 12.0f, 13.5f, 18.0f, 19.5f, 21.0f}},
      {MakeParams(kAvg, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, true, true),
       3,
       3,
       {3.0f, 5.0f, 6.5f, 13.0f, 15.0f, 16.5f, 20.5f, 22.5f, 24.0f}},
      // Bottom/right user padding inside the last window is counted.
      {MakeParams(kAvg, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, true, true),
       3,
       3,
       {1.3333334f, 3.0f, 2.6666667f, 7.0f, 12.0f, 9.0f, 8.0f, 13.0f, 9.333333f}},
      {MakeParams(kMax, {2, 2}, {3, 3}, {1, 1}, {1, 0, 0, 1}, true, false),
       2,
       2,
       {1.0f, 4.0f, 16.0f, 19.0f}},
      {MakeParams(kAvg, {2, 2}, {1, 1}, {2, 2}, {1, 0, 0, 0}, false, false),
       4,
       3,
       {6.0f, 7.0f, 8.0f, 6.0f, 7.0f, 8.0f, 11.0f, 12.0f, 13.0f, 16.0f, 17.0f, 18.0f}},
      // Windows that only see padding produce the lowest float, not -inf or 0.
      {MakeParams(kMax, {2, 2}, {1, 1}, {2, 2}, {3, 3, 0, 0}, false, false),
       6,
       6,
       {kLowest, kLowest, kLowest, kLowest, kLowest, kLowest, kLowest, 0,  1,  2,  3,  4,
        kLowest, 5,       6,       7,       8,       9,       kLowest, 10, 11, 12, 13, 14,
        kLowest, 15,      16,      17,      18,      19,      kLowest, 20, 21, 22, 23, 24}},
  };
  std::vector<float> ramp(25);
  for (int i = 0; i < 25; ++i) ramp[i] = static_cast<float>(i);
  for (const GoldenCase& g : cases) {
    for (DataLayout layout : {DataLayout::kNCHW, DataLayout::kNHWC}) {
      Pool2dParams p = g.params;
      p.layout = layout;
      const PoolCase pc{1, 1, 5, 5, p};
      ASSERT_EQ(pc.OutH(), g.out_h) << pc.ToString();
      ASSERT_EQ(pc.OutW(), g.out_w) << pc.ToString();
      std::vector<float> out(g.out_h * g.out_w);
      // With one channel the NCHW and NHWC buffers hold the same values in the same order.
      Pool2d(ramp.data(), LayoutShape(1, 1, 5, 5, layout), out.data(),
             LayoutShape(1, 1, g.out_h, g.out_w, layout), p);
      ExpectAllClose(out, g.expected, pc.ToString(), 1e-6, 0.0);
    }
  }
}

TEST(Pool2dTest, RejectsInconsistentShapes) {
  std::vector<float> buf(256, 0.0f);
  Pool2dParams p = MakeParams(PoolKind::kMax, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, false, false);
  EXPECT_THROW(Pool2d(buf.data(), {1, 1, 5, 5}, buf.data(), {1, 1, 3, 3}, p), tvm::ffi::Error);
  p.ceil_mode = true;
  Pool2d(buf.data(), {1, 1, 5, 5}, buf.data() + 64, {1, 1, 3, 3}, p);
  EXPECT_THROW(Pool2d(buf.data(), {1, 1, 5, 5}, buf.data(), {1, 2, 3, 3}, p), tvm::ffi::Error);
}

}  // namespace
}  // namespace kernels
}  // namespace example_npu
