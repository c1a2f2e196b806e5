/*!
 * \file tests/cpp/test_topk.cc
 * \brief topk: the partial-selection kernel against its stable-sort reference (every axis, k,
 * largest / smallest, rows full of ties, infinities and signed zeros), and whole graphs of a
 * values node and an indices node (int32 / int64) through the executor.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compiler/fusion.h"
#include "kernels/topk.h"
#include "runtime/executor.h"
#include "test_util.h"

namespace example_npu {
namespace {

using kernels::Shape;
using kernels::TopkParams;
using kernels::test_util::RandomVector;
using kernels::test_util::ViewOf;

Shape OutShape(Shape shape, const TopkParams& p) {
  shape[p.axis] = p.k;
  return shape;
}

/*! \brief Kernel and reference agree bit for bit (values compared as bit patterns: -0.0). */
void ExpectKernelEqualsReference(const std::vector<float>& x, const Shape& shape,
                                 const TopkParams& p) {
  const int64_t size = kernels::NumElements(OutShape(shape, p));
  std::vector<float> got(size, 7.0f), want(size, -7.0f);
  kernels::Topk(x.data(), shape, p, got.data());
  kernels::TopkReference(x.data(), shape, p, want.data());
  ASSERT_EQ(std::memcmp(got.data(), want.data(), size * sizeof(float)), 0)
      << "axis " << p.axis << " k " << p.k << " largest " << p.largest << " indices " << p.indices;
}

TEST(TopkTest, KernelEqualsStableSortOnEveryAxisWithTies) {
  std::mt19937 rng(21);
  const Shape shape = {3, 9, 4, 5};
  std::vector<float> x = RandomVector(kernels::NumElements(shape), &rng, -3.0f, 3.0f);
  std::vector<float> ties = x;
  for (float& v : ties) v = std::round(v);  // 7 distinct values: many ties per row
  for (const auto* data : {&x, &ties}) {
    for (int64_t axis = 0; axis < 4; ++axis) {
      for (int64_t k : {int64_t{1}, int64_t{2}, shape[axis]}) {
        for (bool largest : {true, false}) {
          for (bool indices : {true, false}) {
            ExpectKernelEqualsReference(*data, shape, TopkParams{axis, k, largest, indices});
          }
        }
      }
    }
  }
}

TEST(TopkTest, TiesGoToTheLowerIndexAndSpecialValuesOrderAsFloats) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> row = {1.0f, -inf, 0.0f, inf, -0.0f, 1.0f, inf, -inf};
  const Shape shape = {1, 8};
  std::vector<float> idx(4), val(4);
  kernels::Topk(row.data(), shape, TopkParams{1, 4, true, true}, idx.data());
  EXPECT_EQ(idx, (std::vector<float>{3, 6, 0, 5}));
  kernels::Topk(row.data(), shape, TopkParams{1, 4, false, true}, idx.data());
  EXPECT_EQ(idx, (std::vector<float>{1, 7, 2, 4}));  // 0.0 == -0.0: the lower index first
  kernels::Topk(row.data(), shape, TopkParams{1, 4, false, false}, val.data());
  EXPECT_FALSE(std::signbit(val[2]));
  EXPECT_TRUE(std::signbit(val[3]));
  for (bool largest : {true, false}) {
    for (int64_t k = 1; k <= 8; ++k) {
      ExpectKernelEqualsReference(row, shape, TopkParams{1, k, largest, false});
      ExpectKernelEqualsReference(row, shape, TopkParams{1, k, largest, true});
    }
  }
}

TEST(TopkTest, ChunksStreamedInIndexOrderSelectAsTheWholeRow) {
  std::mt19937 rng(8);
  const Shape shape = {2, 50, 3};
  std::vector<float> x = RandomVector(kernels::NumElements(shape), &rng, -2.0f, 2.0f);
  for (float& v : x) v = std::round(v * 2.0f);  // ties across chunk borders
  for (int64_t k : {int64_t{1}, int64_t{4}, int64_t{9}}) {
    for (bool largest : {true, false}) {
      const TopkParams whole{1, k, largest, false};
      std::vector<float> running(2 * 2 * k * 3);
      for (int64_t first = 0; first < 50; first += 12) {  // chunks of 12, the last of 2
        const int64_t m = std::min<int64_t>(12, 50 - first);
        const Shape chunk_shape = {2, m, 3};
        std::vector<float> chunk(2 * m * 3);
        for (int64_t o = 0; o < 2; ++o) {
          for (int64_t j = 0; j < m * 3; ++j) chunk[o * m * 3 + j] = x[o * 150 + first * 3 + j];
        }
        kernels::TopkSelect(chunk.data(), chunk_shape, whole, first, first > 0, running.data());
      }
      for (bool indices : {false, true}) {
        TopkParams p = whole;
        p.indices = indices;
        std::vector<float> got(2 * k * 3), want(2 * k * 3);
        kernels::TopkEmit(running.data(), Shape{2, 2 * k, 3}, p, got.data());
        kernels::TopkReference(x.data(), shape, p, want.data());
        EXPECT_EQ(got, want) << "k " << k << " largest " << largest << " indices " << indices;
      }
    }
  }
}

TEST(TopkTest, RowsLongerThanL1StreamThroughInChunks) {
  // 3 rows of 6000 float32 (24 KB each) on a 16 KB L1: each row streams in chunks.
  // The values carry a fused negation.
  const std::string graph = R"({"version": 1, "symbol": "long", "nodes": [
    {"op": "input", "name": "x", "shape": [3, 6000], "dtype": "float32"},
    {"op": "topk", "name": "v", "inputs": [0], "shape": [3, 40], "dtype": "float32",
     "attrs": {"axis": 1, "k": 40, "largest": false, "output": "values"}},
    {"op": "negative", "name": "n", "inputs": [1], "shape": [3, 40], "dtype": "float32"},
    {"op": "topk", "name": "i", "inputs": [0], "shape": [3, 40], "dtype": "int64",
     "attrs": {"axis": 1, "k": 40, "largest": false, "output": "indices"}}],
    "arg_nodes": [0], "heads": [2, 3]})";
  NPUConfig config;
  config.l1_sram_kb = 16;
  Executor executor(ParseGraph(graph), config);
  std::mt19937 rng(3);
  std::vector<float> x = RandomVector(3 * 6000, &rng, -8.0f, 8.0f);
  for (float& v : x) v = std::round(v * 8.0f);  // 129 values: ties everywhere
  std::vector<float> values(120);
  std::vector<int64_t> indices(120);
  std::vector<int64_t> xs = {3, 6000}, os = {3, 40};
  DLTensor in = ViewOf(&x, &xs, DLDataType{kDLFloat, 32, 1});
  DLTensor out_v = ViewOf(&values, &os, DLDataType{kDLFloat, 32, 1});
  DLTensor out_i = ViewOf(&indices, &os, DLDataType{kDLInt, 64, 1});
  executor.Run({&in}, {&out_v, &out_i});
  std::vector<float> want_v(120), want_i(120);
  kernels::TopkReference(x.data(), xs, TopkParams{1, 40, false, false}, want_v.data());
  kernels::TopkReference(x.data(), xs, TopkParams{1, 40, false, true}, want_i.data());
  for (int64_t j = 0; j < 120; ++j) {
    EXPECT_EQ(values[j], -want_v[j]) << j;
    EXPECT_EQ(indices[j], static_cast<int64_t>(want_i[j])) << j;
  }
}

TEST(TopkTest, GraphStoresValuesAndInt32Int64IndicesOfAWideRow) {
  // A detection head's class scores: the best 5 of 300 per box, along a middle axis so the
  // rows are strided; the values node carries a fused scale by a second input.
  const std::string graph = R"({"version": 1, "symbol": "head", "nodes": [
    {"op": "input", "name": "x", "shape": [2, 300, 6], "dtype": "float32"},
    {"op": "input", "name": "s", "shape": [2, 5, 6], "dtype": "float32"},
    {"op": "topk", "name": "v", "inputs": [0], "shape": [2, 5, 6], "dtype": "float32",
     "attrs": {"axis": -2, "k": 5, "largest": true, "output": "values"}},
    {"op": "multiply", "name": "v2", "inputs": [2, 1], "shape": [2, 5, 6], "dtype": "float32"},
    {"op": "topk", "name": "i64", "inputs": [0], "shape": [2, 5, 6], "dtype": "int64",
     "attrs": {"axis": 1, "k": 5, "largest": true, "output": "indices"}},
    {"op": "topk", "name": "i32", "inputs": [0], "shape": [2, 5, 6], "dtype": "int32",
     "attrs": {"axis": 1, "k": 5, "largest": false, "output": "indices"}}],
    "arg_nodes": [0, 1], "heads": [3, 4, 5]})";
  Executor executor(ParseGraph(graph));
  std::mt19937 rng(5);
  std::vector<float> x = RandomVector(2 * 300 * 6, &rng, -4.0f, 4.0f);
  for (float& v : x) v = std::round(v * 4.0f) / 4.0f;  // 33 values over 300: ties
  std::vector<float> s = RandomVector(60, &rng);
  std::vector<float> values(60);
  std::vector<int64_t> i64(60, -1);
  std::vector<int32_t> i32(60, -1);
  std::vector<int64_t> xs = {2, 300, 6}, os = {2, 5, 6};
  DLTensor in_x = ViewOf(&x, &xs, DLDataType{kDLFloat, 32, 1});
  DLTensor in_s = ViewOf(&s, &os, DLDataType{kDLFloat, 32, 1});
  DLTensor out_v = ViewOf(&values, &os, DLDataType{kDLFloat, 32, 1});
  DLTensor out_i64 = ViewOf(&i64, &os, DLDataType{kDLInt, 64, 1});
  DLTensor out_i32 = ViewOf(&i32, &os, DLDataType{kDLInt, 32, 1});
  executor.Run({&in_x, &in_s}, {&out_v, &out_i64, &out_i32});
  std::vector<float> want_v(60), want_hi(60), want_lo(60);
  kernels::TopkReference(x.data(), xs, TopkParams{1, 5, true, false}, want_v.data());
  kernels::TopkReference(x.data(), xs, TopkParams{1, 5, true, true}, want_hi.data());
  kernels::TopkReference(x.data(), xs, TopkParams{1, 5, false, true}, want_lo.data());
  for (int64_t i = 0; i < 60; ++i) {
    EXPECT_EQ(values[i], want_v[i] * s[i]) << i;
    EXPECT_EQ(i64[i], static_cast<int64_t>(want_hi[i])) << i;
    EXPECT_EQ(i32[i], static_cast<int32_t>(want_lo[i])) << i;
  }
}

TEST(TopkTest, ValuesAndIndicesOfOneSelectionShareAGroup) {
  // v and i: the same selection (one group, i its side output); j selects the smallest.
  const Graph graph = ParseGraph(R"({"version": 1, "symbol": "pair", "nodes": [
    {"op": "input", "name": "x", "shape": [4, 9], "dtype": "float32"},
    {"op": "topk", "name": "v", "inputs": [0], "shape": [4, 3], "dtype": "float32",
     "attrs": {"axis": -1, "k": 3, "largest": true, "output": "values"}},
    {"op": "nn.relu", "name": "r", "inputs": [1], "shape": [4, 3], "dtype": "float32"},
    {"op": "topk", "name": "j", "inputs": [0], "shape": [4, 3], "dtype": "int32",
     "attrs": {"axis": 1, "k": 3, "largest": false, "output": "indices"}},
    {"op": "topk", "name": "i", "inputs": [0], "shape": [4, 3], "dtype": "int64",
     "attrs": {"axis": 1, "k": 3, "largest": true, "output": "indices"}}],
    "arg_nodes": [0], "heads": [2, 3, 4]})");
  const std::vector<FusedGroup> groups = FuseGraph(graph);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].anchor, 1);
  EXPECT_EQ(groups[0].chain, std::vector<int64_t>{2});
  EXPECT_EQ(groups[0].side_output, 4);
  EXPECT_EQ(groups[1].anchor, 3);
  EXPECT_EQ(groups[1].side_output, -1);
}

TEST(TopkTest, GraphsWithBadKOrIndexDtypeAreRejected) {
  auto graph = [](const std::string& k, const std::string& dtype, const std::string& output) {
    return R"({"version": 1, "symbol": "bad", "nodes": [
      {"op": "input", "name": "x", "shape": [2, 4], "dtype": "float32"},
      {"op": "topk", "name": "t", "inputs": [0], "shape": [2, )" +
           k + R"(], "dtype": ")" + dtype + R"(", "attrs": {"axis": 1, "k": )" + k +
           R"(, "largest": true, "output": ")" + output +
           R"("}}], "arg_nodes": [0], "heads": [1]})";
  };
  EXPECT_NO_THROW(ParseGraph(graph("4", "int64", "indices")));
  EXPECT_THROW(ParseGraph(graph("5", "int64", "indices")), tvm::ffi::Error);
  EXPECT_THROW(ParseGraph(graph("0", "float32", "values")), tvm::ffi::Error);
  EXPECT_THROW(ParseGraph(graph("2", "float32", "indices")), tvm::ffi::Error);
  EXPECT_THROW(ParseGraph(graph("2", "int64", "values")), tvm::ffi::Error);
  EXPECT_THROW(ParseGraph(graph("2", "float32", "both")), tvm::ffi::Error);
  std::string bad_axis = graph("2", "int64", "indices");
  bad_axis.replace(bad_axis.find("\"axis\": 1"), 10, "\"axis\": 2");
  EXPECT_THROW(ParseGraph(bad_axis), tvm::ffi::Error);
  std::string long_axis = graph("2", "int64", "indices");
  long_axis.replace(long_axis.find("[2, 4]"), 6, "[1, 16777217]");
  long_axis.replace(long_axis.find("[2, 2]"), 6, "[1, 2]");  // a valid shape otherwise
  EXPECT_THROW(ParseGraph(long_axis), tvm::ffi::Error);
}

}  // namespace
}  // namespace example_npu
