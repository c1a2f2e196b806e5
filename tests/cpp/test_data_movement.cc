/*!
 * \file tests/cpp/test_data_movement.cc
 * \brief Views and DMA copies through the whole executor, for every dtype they accept: permute,
 * reshape of a transposed view, concat into slices, strided slices and broadcasts, checked
 * against index-by-index references; row gathers by run-time ids (take); plus mean and layer_norm
 * groups; astype of integer tensors to float32 and of float32 to int32 / int64.
 */
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "runtime/executor.h"
#include "test_util.h"

namespace example_npu {
namespace {

using kernels::test_util::Ravel;
using kernels::test_util::Unravel;
using kernels::test_util::ViewOf;

/*! \brief The data-movement graph for `dtype`: x (2, 4, 3), y (2, 2, 3). */
std::string MovementGraph(const std::string& dtype) {
  std::string d = "\"dtype\": \"" + dtype + "\"";
  return R"({"version": 1, "symbol": "moves", "nodes": [
  {"op": "input", "name": "x", "shape": [2, 4, 3], )" +
         d + R"(},
  {"op": "input", "name": "y", "shape": [2, 2, 3], )" +
         d + R"(},
  {"op": "permute_dims", "name": "t", "inputs": [0], "shape": [2, 3, 4], )" +
         d +
         R"(, "attrs": {"axes": [0, 2, 1]}},
  {"op": "reshape", "name": "flat", "inputs": [2], "shape": [2, 12], )" +
         d + R"(},
  {"op": "concat", "name": "cat", "inputs": [0, 1], "shape": [2, 6, 3], )" +
         d +
         R"(, "attrs": {"axis": 1}},
  {"op": "strided_slice", "name": "odd", "inputs": [4], "shape": [2, 3, 2], )" +
         d +
         R"(, "attrs": {"begin": [0, 1, 1], "step": [1, 2, 1]}},
  {"op": "reshape", "name": "odd_flat", "inputs": [5], "shape": [12], )" +
         d + R"(},
  {"op": "strided_slice", "name": "row", "inputs": [1], "shape": [1, 1, 3], )" +
         d +
         R"(, "attrs": {"begin": [1, 0, 0], "step": [1, 1, 1]}},
  {"op": "broadcast_to", "name": "wide", "inputs": [7], "shape": [2, 4, 3], )" +
         d + R"(}],
  "arg_nodes": [0, 1], "heads": [3, 6, 8]})";
}

template <typename T>
void CheckMovement(const std::string& dtype, DLDataType dl) {
  Executor executor(ParseGraph(MovementGraph(dtype)));
  std::vector<T> x(24), y(12);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(static_cast<int>(i) - 11);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<T>(100 + static_cast<int>(i));
  std::vector<T> flat(24), odd(12), wide(24);
  std::vector<int64_t> xs = {2, 4, 3}, ys = {2, 2, 3}, fs = {2, 12}, os = {12}, ws = {2, 4, 3};
  DLTensor in_x = ViewOf(&x, &xs, dl), in_y = ViewOf(&y, &ys, dl),
           out_flat = ViewOf(&flat, &fs, dl), out_odd = ViewOf(&odd, &os, dl),
           out_wide = ViewOf(&wide, &ws, dl);
  executor.Run({&in_x, &in_y}, {&out_flat, &out_odd, &out_wide});
  for (int64_t i = 0; i < 24; ++i) {  // flat[n, c * 4 + h] = x[n, h, c]
    const int64_t n = i / 12, c = (i % 12) / 4, h = i % 4;
    EXPECT_EQ(flat[i], x[Ravel({n, h, c}, xs)]) << dtype << " flat " << i;
  }
  std::vector<int64_t> cat_shape = {2, 6, 3};
  for (int64_t i = 0; i < 12; ++i) {  // odd[n, k, j] = cat[n, 1 + 2k, 1 + j]
    std::vector<int64_t> o = Unravel(i, {2, 3, 2});
    const int64_t row = 1 + 2 * o[1], col = 1 + o[2];
    const T want = row < 4 ? x[Ravel({o[0], row, col}, xs)] : y[Ravel({o[0], row - 4, col}, ys)];
    EXPECT_EQ(odd[i], want) << dtype << " odd " << i;
  }
  for (int64_t i = 0; i < 24; ++i) {  // wide[n, h, c] = y[1, 0, c]
    EXPECT_EQ(wide[i], y[Ravel({1, 0, i % 3}, ys)]) << dtype << " wide " << i;
  }
}

TEST(DataMovementTest, ViewsAndCopiesForEveryDtype) {
  CheckMovement<float>("float32", DLDataType{kDLFloat, 32, 1});
  CheckMovement<int8_t>("int8", DLDataType{kDLInt, 8, 1});
  CheckMovement<uint8_t>("uint8", DLDataType{kDLUInt, 8, 1});
  CheckMovement<int16_t>("int16", DLDataType{kDLInt, 16, 1});
  // float16 bit patterns are moved, never converted: integer storage checks that exactly.
  CheckMovement<uint16_t>("float16", DLDataType{kDLFloat, 16, 1});
}

/*!
 * \brief YOLOv5's Focus (space to depth): concat of the four stride-2 slices of x (1, 3, 4, 4),
 * views of one tensor that differ only in their offset, so their loads have equal boxes.
 */
template <typename T>
void CheckSpaceToDepth(const std::string& dtype, DLDataType dl) {
  const std::string d = "\"dtype\": \"" + dtype + "\"";
  std::string nodes = R"({"op": "input", "name": "x", "shape": [1, 3, 4, 4], )" + d + "}";
  const std::vector<std::pair<int, int>> phases = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
  for (const auto& [dh, dw] : phases) {
    nodes += R"(, {"op": "strided_slice", "name": "s)" + std::to_string(dh) + std::to_string(dw) +
             R"(", "inputs": [0], "shape": [1, 3, 2, 2], )" + d +
             R"(, "attrs": {"begin": [0, 0, )" + std::to_string(dh) + ", " + std::to_string(dw) +
             R"(], "step": [1, 1, 2, 2]}})";
  }
  nodes += R"(, {"op": "concat", "name": "cat", "inputs": [1, 2, 3, 4], "shape": [1, 12, 2, 2], )" +
           d + R"(, "attrs": {"axis": 1}})";
  Executor executor(ParseGraph(R"({"version": 1, "symbol": "focus", "nodes": [)" + nodes +
                               R"(], "arg_nodes": [0], "heads": [5]})"));
  std::vector<T> x(48), out(48);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(static_cast<int>(i) - 20);
  std::vector<int64_t> xs = {1, 3, 4, 4}, os = {1, 12, 2, 2};
  DLTensor in = ViewOf(&x, &xs, dl), result = ViewOf(&out, &os, dl);
  executor.Run({&in}, {&result});
  for (int64_t i = 0; i < 48; ++i) {  // out[0, 3k + c, h, w] = x[0, c, 2h + dh_k, 2w + dw_k]
    const std::vector<int64_t> o = Unravel(i, os);
    const auto [dh, dw] = phases[o[1] / 3];
    EXPECT_EQ(out[i], x[Ravel({0, o[1] % 3, 2 * o[2] + dh, 2 * o[3] + dw}, xs)])
        << dtype << " " << i;
  }
}

TEST(DataMovementTest, SlicesOfOneTensorWithEqualBoxesStayApart) {
  CheckSpaceToDepth<float>("float32", DLDataType{kDLFloat, 32, 1});
  CheckSpaceToDepth<int8_t>("int8", DLDataType{kDLInt, 8, 1});
}

TEST(DataMovementTest, MeanAndLayerNormGroups) {
  const char* graph = R"({"version": 1, "symbol": "norm", "nodes": [
    {"op": "input", "name": "x", "shape": [1, 4, 3, 3], "dtype": "float32"},
    {"op": "mean", "name": "m", "inputs": [0], "shape": [1, 4], "dtype": "float32",
     "attrs": {"axes": [2, 3], "keepdims": false}},
    {"op": "input", "name": "g", "shape": [4], "dtype": "float32"},
    {"op": "input", "name": "b", "shape": [4], "dtype": "float32"},
    {"op": "nn.layer_norm", "name": "ln", "inputs": [1, 2, 3], "shape": [1, 4],
     "dtype": "float32", "attrs": {"axes": [-1], "epsilon": 1e-5, "center": true,
     "scale": true}}],
    "arg_nodes": [0, 2, 3], "heads": [1, 4]})";
  Executor executor(ParseGraph(graph));
  std::vector<float> x(36), g = {1, 2, 0.5f, 1}, b = {0, 1, 0, -1}, mean(4), norm(4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 2.5f;
  std::vector<int64_t> xs = {1, 4, 3, 3}, ps = {4}, os = {1, 4};
  const DLDataType f32{kDLFloat, 32, 1};
  DLTensor in_x = ViewOf(&x, &xs, f32), in_g = ViewOf(&g, &ps, f32), in_b = ViewOf(&b, &ps, f32),
           out_m = ViewOf(&mean, &os, f32), out_n = ViewOf(&norm, &os, f32);
  executor.Run({&in_x, &in_g, &in_b}, {&out_m, &out_n});
  std::vector<double> want_mean(4, 0.0);
  for (int c = 0; c < 4; ++c) {
    for (int i = 0; i < 9; ++i) want_mean[c] += x[c * 9 + i];
    want_mean[c] /= 9;
    EXPECT_NEAR(mean[c], want_mean[c], 1e-6);
  }
  double mu = 0, var = 0;
  for (double m : want_mean) mu += m / 4;
  for (double m : want_mean) var += (m - mu) * (m - mu) / 4;
  for (int c = 0; c < 4; ++c) {
    EXPECT_NEAR(norm[c], (want_mean[c] - mu) / std::sqrt(var + 1e-5) * g[c] + b[c], 1e-5);
  }
}

TEST(DataMovementTest, ArgmaxIndicesAreStoredAsInt64) {
  // A segmentation head's per-pixel class: argmax over channels, stored as int64 by the DMA.
  const char* graph = R"({"version": 1, "symbol": "seg", "nodes": [
    {"op": "input", "name": "x", "shape": [1, 5, 6, 7], "dtype": "float32"},
    {"op": "argmax", "name": "cls", "inputs": [0], "shape": [1, 6, 7], "dtype": "int64",
     "attrs": {"axes": [1], "keepdims": false}}],
    "arg_nodes": [0], "heads": [1]})";
  Executor executor(ParseGraph(graph));
  std::vector<float> x(5 * 42);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 11);
  std::vector<int64_t> cls(42, -5), xs = {1, 5, 6, 7}, os = {1, 6, 7};
  DLTensor in_x = ViewOf(&x, &xs, DLDataType{kDLFloat, 32, 1});
  DLTensor out = ViewOf(&cls, &os, DLDataType{kDLInt, 64, 1});
  executor.Run({&in_x}, {&out});
  for (int64_t p = 0; p < 42; ++p) {
    int64_t best = 0;
    for (int64_t c = 1; c < 5; ++c) {
      if (x[c * 42 + p] > x[best * 42 + p]) best = c;  // first index on ties
    }
    EXPECT_EQ(cls[p], best) << p;
  }
}

TEST(DataMovementTest, GraphsThatDisagreeWithTheirShapesAreRejected) {
  const char* bad_slice = R"({"version": 1, "symbol": "bad", "nodes": [
    {"op": "input", "name": "x", "shape": [4], "dtype": "float32"},
    {"op": "strided_slice", "name": "s", "inputs": [0], "shape": [3], "dtype": "float32",
     "attrs": {"begin": [1], "step": [2]}}], "arg_nodes": [0], "heads": [1]})";
  EXPECT_THROW(ParseGraph(bad_slice), tvm::ffi::Error);
  const char* bad_concat = R"({"version": 1, "symbol": "bad", "nodes": [
    {"op": "input", "name": "x", "shape": [2, 3], "dtype": "float32"},
    {"op": "input", "name": "y", "shape": [3, 3], "dtype": "float32"},
    {"op": "concat", "name": "c", "inputs": [0, 1], "shape": [5, 3], "dtype": "float32",
     "attrs": {"axis": 1}}], "arg_nodes": [0, 1], "heads": [2]})";
  EXPECT_THROW(ParseGraph(bad_concat), tvm::ffi::Error);
  const char* bad_broadcast = R"({"version": 1, "symbol": "bad", "nodes": [
    {"op": "input", "name": "x", "shape": [2, 3], "dtype": "float32"},
    {"op": "broadcast_to", "name": "b", "inputs": [0], "shape": [2, 4], "dtype": "float32"}],
    "arg_nodes": [0], "heads": [1]})";
  EXPECT_THROW(ParseGraph(bad_broadcast), tvm::ffi::Error);
}

/*! \brief take(table (rows, 40) float32, ids (count,) of `id_dtype`) -> (count, 40). */
std::string GatherGraph(int64_t rows, int64_t count, const std::string& id_dtype) {
  const std::string r = std::to_string(rows), c = std::to_string(count);
  return R"({"version": 1, "symbol": "embed", "nodes": [
  {"op": "input", "name": "table", "shape": [)" +
         r + R"(, 40], "dtype": "float32"},
  {"op": "input", "name": "ids", "shape": [)" +
         c + R"(], "dtype": ")" + id_dtype + R"("},
  {"op": "take", "name": "rows", "inputs": [0, 1], "shape": [)" +
         c + R"(, 40], "dtype": "float32"}],
  "arg_nodes": [0, 1], "heads": [2]})";
}

template <typename Id>
void CheckGather(const std::string& id_dtype, DLDataType dl, NPUConfig config) {
  const int64_t rows = 300, count = 700;  // more rows than a tile holds with 16 KB of L1
  Executor executor(ParseGraph(GatherGraph(rows, count, id_dtype)), config);
  std::vector<float> table(rows * 40), out(count * 40, -1.0f);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i) * 0.5f - 7.0f;
  std::vector<Id> ids(count);
  for (int64_t i = 0; i < count; ++i) ids[i] = static_cast<Id>((i * 37 + 11) % rows);
  ids[0] = 0;
  ids[count - 1] = static_cast<Id>(rows - 1);
  std::vector<int64_t> ts = {rows, 40}, is = {count}, os = {count, 40};
  DLTensor in_table = ViewOf(&table, &ts, DLDataType{kDLFloat, 32, 1}),
           in_ids = ViewOf(&ids, &is, dl), result = ViewOf(&out, &os, DLDataType{kDLFloat, 32, 1});
  executor.Run({&in_table, &in_ids}, {&result});
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t j = 0; j < 40; ++j) {
      ASSERT_EQ(out[i * 40 + j], table[static_cast<int64_t>(ids[i]) * 40 + j])
          << id_dtype << " row " << i << " col " << j;
    }
  }
  // Negative ids from the end (the ONNX importer's Gather fix-up) where the node says so.
  std::string from_end = GatherGraph(rows, count, id_dtype);
  const std::string last_node = R"("dtype": "float32"}],)";
  from_end.replace(from_end.find(last_node), last_node.size(),
                   R"("dtype": "float32", "attrs": {"negative_from_end": true}}],)");
  Executor wrapping(ParseGraph(from_end), config);
  ids[1] = static_cast<Id>(-1);
  ids[2] = static_cast<Id>(-rows);
  wrapping.Run({&in_table, &in_ids}, {&result});
  EXPECT_EQ(out[1 * 40 + 3], table[(rows - 1) * 40 + 3]);
  EXPECT_EQ(out[2 * 40 + 3], table[3]);
  ids[2] = static_cast<Id>(-rows - 1);
  EXPECT_THROW(wrapping.Run({&in_table, &in_ids}, {&result}), tvm::ffi::Error);
  ids[1] = ids[2] = 0;
  // An id outside the table is the caller's error, reported, never read.
  for (Id bad : {static_cast<Id>(rows), static_cast<Id>(-1)}) {
    ids[count / 2] = bad;
    EXPECT_THROW(executor.Run({&in_table, &in_ids}, {&result}), tvm::ffi::Error) << bad;
  }
}

TEST(DataMovementTest, TakeGathersRowsByRunTimeIds) {
  NPUConfig small;
  small.l1_sram_kb = 16;  // several tiles of ids and rows
  CheckGather<int32_t>("int32", DLDataType{kDLInt, 32, 1}, small);
  CheckGather<int64_t>("int64", DLDataType{kDLInt, 64, 1}, small);
  CheckGather<int64_t>("int64", DLDataType{kDLInt, 64, 1}, NPUConfig());
}

TEST(DataMovementTest, TakeRejectsIdsThatAreNotARankOneIntegerTensor) {
  std::string float_ids = GatherGraph(4, 3, "float32");
  EXPECT_THROW(ParseGraph(float_ids), tvm::ffi::Error);
  std::string matrix_ids = R"({"version": 1, "symbol": "embed", "nodes": [
  {"op": "input", "name": "table", "shape": [4, 8], "dtype": "float32"},
  {"op": "input", "name": "ids", "shape": [2, 3], "dtype": "int64"},
  {"op": "take", "name": "rows", "inputs": [0, 1], "shape": [2, 8], "dtype": "float32"}],
  "arg_nodes": [0, 1], "heads": [2]})";
  EXPECT_THROW(ParseGraph(matrix_ids), tvm::ffi::Error);
}

/*! \brief x (int) [3, 700] -> astype float32, reshaped to [3, 1, 700] (a mask's expand_dims). */
std::string CastGraph(const std::string& dtype) {
  return R"({"version": 1, "symbol": "cast", "nodes": [
  {"op": "input", "name": "x", "shape": [3, 700], "dtype": ")" +
         dtype + R"("},
  {"op": "astype", "name": "f", "inputs": [0], "shape": [3, 700], "dtype": "float32"},
  {"op": "reshape", "name": "m", "inputs": [1], "shape": [3, 1, 700], "dtype": "float32"}],
  "arg_nodes": [0], "heads": [2]})";
}

/*! \brief The float nearest to `v`, ties to even: v is exact in long double (64-bit mantissa on
 * x86), so its one rounding to float is the correctly rounded value. */
template <typename T>
float NearestFloat(T v) {
  return static_cast<float>(static_cast<long double>(v));
}

template <typename T>
void CheckCast(const std::string& dtype, DLDataType dl, NPUConfig config) {
  Executor executor(ParseGraph(CastGraph(dtype)), config);
  std::vector<T> x(2100);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>((static_cast<int64_t>(i) * 37) - 900);
  const std::vector<int64_t> edges = {std::numeric_limits<T>::min(), std::numeric_limits<T>::max(),
                                      0, 1, -1};
  for (size_t i = 0; i < edges.size(); ++i) x[i] = static_cast<T>(edges[i]);
  // Beyond float's 24-bit mantissa: rounded, ties to even.
  if (sizeof(T) >= 4) {
    x[10] = static_cast<T>((1 << 24) + 1);  // tie -> 2^24
    x[11] = static_cast<T>((1 << 24) + 3);  // tie -> 2^24 + 4
    x[12] = static_cast<T>(-(1 << 25) - 3);
  }
  std::vector<float> out(2100, -1.0f);
  std::vector<int64_t> xs = {3, 700}, os = {3, 1, 700};
  DLTensor in = ViewOf(&x, &xs, dl), result = ViewOf(&out, &os, DLDataType{kDLFloat, 32, 1});
  executor.Run({&in}, {&result});
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(out[i], NearestFloat(x[i])) << dtype << " " << i << ": " << +x[i];
  }
  if (sizeof(T) >= 4) {
    EXPECT_EQ(out[10], 16777216.0f);
    EXPECT_EQ(out[11], 16777220.0f);
    EXPECT_EQ(out[12], -33554436.0f);
  }
}

TEST(DataMovementTest, AstypeConvertsIntegersToTheNearestFloat) {
  NPUConfig small;
  small.l1_sram_kb = 16;  // several tiles
  CheckCast<int64_t>("int64", DLDataType{kDLInt, 64, 1}, small);
  CheckCast<int64_t>("int64", DLDataType{kDLInt, 64, 1}, NPUConfig());
  CheckCast<int32_t>("int32", DLDataType{kDLInt, 32, 1}, small);
  CheckCast<int16_t>("int16", DLDataType{kDLInt, 16, 1}, small);
  CheckCast<int8_t>("int8", DLDataType{kDLInt, 8, 1}, small);
}

TEST(DataMovementTest, AstypeRefusesFloatToFloatAndIntegerToInteger) {
  EXPECT_THROW(ParseGraph(CastGraph("float32")), tvm::ffi::Error);
  std::string to_int = CastGraph("int64");
  const std::string result = R"("shape": [3, 700], "dtype": "float32"})";
  to_int.replace(to_int.find(result), result.size(), R"("shape": [3, 700], "dtype": "int32"})");
  EXPECT_THROW(ParseGraph(to_int), tvm::ffi::Error);
}

/*! \brief x (float32) [3, 700] -> astype `dtype`: truncated toward zero, as TVM casts. */
std::string TruncGraph(const std::string& dtype) {
  return R"({"version": 1, "symbol": "trunc", "nodes": [
  {"op": "input", "name": "x", "shape": [3, 700], "dtype": "float32"},
  {"op": "astype", "name": "i", "inputs": [0], "shape": [3, 700], "dtype": ")" +
         dtype + R"("}], "arg_nodes": [0], "heads": [1]})";
}

template <typename T>
void CheckTrunc(const std::string& dtype, DLDataType dl) {
  NPUConfig small;
  small.l1_sram_kb = 16;  // several tiles
  Executor executor(ParseGraph(TruncGraph(dtype)), small);
  std::vector<float> x(2100);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = (static_cast<float>(i) - 1050.0f) * 1.37f;  // whole and fractional, both signs
  }
  x[0] = 16777216.0f;
  x[1] = -0.99f;
  x[2] = 2.5f;
  std::vector<T> out(2100, -7);
  std::vector<int64_t> shape = {3, 700};
  DLTensor in = ViewOf(&x, &shape, DLDataType{kDLFloat, 32, 1}), result = ViewOf(&out, &shape, dl);
  executor.Run({&in}, {&result});
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(out[i], static_cast<T>(std::trunc(static_cast<double>(x[i])))) << dtype << " " << i;
  }
  EXPECT_EQ(out[1], 0);
  EXPECT_EQ(out[2], 2);
}

TEST(DataMovementTest, AstypeOfFloat32ToAnIndexTypeTruncatesTowardZero) {
  CheckTrunc<int32_t>("int32", DLDataType{kDLInt, 32, 1});
  CheckTrunc<int64_t>("int64", DLDataType{kDLInt, 64, 1});
  std::string to_int8 = TruncGraph("int8");
  EXPECT_THROW(ParseGraph(to_int8), tvm::ffi::Error);  // quantize's job, with its rounding
}

}  // namespace
}  // namespace example_npu
