/*!
 * \file tests/cpp/test_support.cc
 * \brief Checked arithmetic and the untrusted-JSON front door (support/).
 */
#include <gtest/gtest.h>
#include <tvm/ffi/error.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "support/checked_math.h"
#include "support/json_input.h"
#include "test_util.h"

namespace example_npu {
namespace {

using kernels::test_util::ExpectValueError;

TEST(CheckedMathTest, ExactResultsOrAValueErrorNamingTheQuantity) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(checked::Mul(3037000499, 3037000499, "x"), 9223372030926249001);
  EXPECT_EQ(checked::Add(kMax - 1, 1, "x"), kMax);
  EXPECT_EQ(checked::Sub(-kMax, 1, "x"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(checked::Product({}, "x"), 1);
  EXPECT_EQ(checked::Product({2, 3, 7}, "x"), 42);
  ExpectValueError([] { checked::Mul(3037000500, 3037000500, "tensor bytes"); }, "tensor bytes");
  ExpectValueError([&] { checked::Add(kMax, 1, "cycle count"); }, "cycle count");
  ExpectValueError([] { checked::Product({1 << 30, 1 << 30, 1 << 30}, "elements"); }, "elements");
}

TEST(CheckedMathTest, DoublesConvertOnlyWhenTheyFit) {
  EXPECT_EQ(checked::ToInt64(12.9, "x"), 12);
  EXPECT_EQ(checked::ToInt64(-9223372036854774784.0, "x"), -9223372036854774784);
  const double inf = std::numeric_limits<double>::infinity();
  for (double bad : {std::nan(""), inf, -inf, 9223372036854775808.0, 1e300}) {
    ExpectValueError([bad] { checked::ToInt64(bad, "DMA cycles"); }, "DMA cycles");
  }
}

TEST(JsonInputTest, NestingIsLimitedBeforeTheRecursiveParserRuns) {
  const std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_NO_THROW(ParseUntrustedJson(ok, "doc"));
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  ExpectValueError([&] { ParseUntrustedJson(deep, "doc"); }, "deeper than 32");
  // Brackets inside strings (with escaped quotes) are text, not nesting.
  const std::string text = "{\"a\": \"" + std::string(1000, '[') + "\\\"" + "\"}";
  EXPECT_NO_THROW(ParseUntrustedJson(text, "doc"));
}

TEST(JsonInputTest, InvalidUtf8IsAValueErrorWithItsOffset) {
  EXPECT_TRUE(IsValidUtf8("plain \xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80"));
  for (const char* bad :
       {"\xff", "\xc3\x28", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe4\xb8"}) {
    EXPECT_FALSE(IsValidUtf8(bad)) << Printable(bad);
  }
  ExpectValueError([] { ParseUntrustedJson("{\"ke\xffy\": 1}", "graph"); }, "UTF-8 (byte 4)");
  ExpectValueError([] { ParseUntrustedJson("{\"key\": ", "graph"); }, "not valid JSON");
}

TEST(JsonInputTest, PrintableEscapesBytesAndCutsLongText) {
  EXPECT_EQ(Printable("relu"), "relu");
  EXPECT_EQ(Printable("a\xff\n"), "a\\xff\\x0a");
  EXPECT_EQ(Printable(std::string(100, 'x'), 8), "xxxxxxxx...");
}

}  // namespace
}  // namespace example_npu
