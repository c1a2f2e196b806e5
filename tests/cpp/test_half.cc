#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/half.h"

namespace example_npu {
namespace kernels {
namespace {

TEST(HalfTest, EveryHalfRoundTripsExactly) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const float f = HalfToFloat(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f))));
    } else {
      EXPECT_EQ(FloatToHalf(f), h) << "bits " << bits;
    }
  }
}

TEST(HalfTest, KnownValues) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x7c00), std::numeric_limits<float>::infinity());
}

TEST(HalfTest, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1.0).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between odd 0x3c01 and even 0x3c02.
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  // Subnormal ties: 0.5 and 1.5 units of 2^-24.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(FloatToHalf(3 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(FloatToHalf(-std::ldexp(1.0f, -25) * 1.5f), 0x8001);
}

TEST(HalfTest, OverflowAndSpecials) {
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);  // below the halfway point to 65536
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // halfway rounds to even: infinity
  EXPECT_EQ(FloatToHalf(-1e9f), 0xfc00);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
}

TEST(HalfTest, RoundToHalfMatchesTheStoreAndLoad) {
  float values[] = {0.1f, -3.14159f, 70000.0f, 1e-7f};
  RoundToHalf(values, 4);
  EXPECT_EQ(values[0], HalfToFloat(FloatToHalf(0.1f)));
  EXPECT_EQ(values[1], -3.140625f);
  EXPECT_TRUE(std::isinf(values[2]));
  EXPECT_EQ(values[3], HalfToFloat(FloatToHalf(1e-7f)));
}

}  // namespace
}  // namespace kernels
}  // namespace example_npu
