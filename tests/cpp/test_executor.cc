#include <gtest/gtest.h>
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/half.h"
#include "runtime/executor.h"
#include "test_util.h"

namespace example_npu {
namespace {

/*! \brief A DLTensor over caller-owned float storage. */
DLTensor View(std::vector<float>* data, std::vector<int64_t>* shape) {
  DLTensor t{};
  t.data = data->data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape->size());
  t.dtype = DLDataType{kDLFloat, 32, 1};
  t.shape = shape->data();
  return t;
}

// relu -> max_pool2d(2x2, stride 2) -> relu, the specification's MultipleOps region.
const char* kRegion = R"({"version": 1, "symbol": "region", "nodes": [
  {"op": "input", "name": "x", "shape": [1, 1, 4, 4], "dtype": "float32"},
  {"op": "nn.relu", "name": "a", "inputs": [0], "shape": [1, 1, 4, 4], "dtype": "float32"},
  {"op": "nn.max_pool2d", "name": "b", "inputs": [1], "shape": [1, 1, 2, 2], "dtype": "float32",
   "attrs": {"pool_size": [2, 2], "strides": [2, 2], "dilation": [1, 1], "padding": [0, 0, 0, 0],
             "ceil_mode": false, "count_include_pad": false, "layout": "NCHW"}},
  {"op": "nn.relu", "name": "c", "inputs": [2], "shape": [1, 1, 2, 2], "dtype": "float32"}],
  "arg_nodes": [0], "heads": [3, 1]})";

TEST(ExecutorTest, RunsARegionWithIntermediatesAndTwoOutputs) {
  Executor executor(ParseGraph(kRegion));
  std::vector<float> x = {-1, 2, -3, 4, 5, -6, 7, -8, -9, -10, -11, -12, 13, 14, -15, 0.5f};
  std::vector<float> pooled(4, 0.0f), relu(16, 0.0f);
  std::vector<int64_t> x_shape = {1, 1, 4, 4}, pooled_shape = {1, 1, 2, 2};
  DLTensor in = View(&x, &x_shape), out0 = View(&pooled, &pooled_shape),
           out1 = View(&relu, &x_shape);
  executor.Run({&in}, {&out0, &out1});
  EXPECT_EQ(pooled, (std::vector<float>{5, 7, 14, 0.5f}));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(relu[i], std::max(x[i], 0.0f));
}

TEST(ExecutorTest, RejectsWrongShapesAndCounts) {
  Executor executor(ParseGraph(kRegion));
  std::vector<float> x(16), pooled(4), relu(16);
  std::vector<int64_t> wrong = {1, 1, 4, 3}, x_shape = {1, 1, 4, 4}, pooled_shape = {1, 1, 2, 2};
  DLTensor bad_in = View(&x, &wrong), out0 = View(&pooled, &pooled_shape),
           out1 = View(&relu, &x_shape);
  try {
    executor.Run({&bad_in}, {&out0, &out1});
    FAIL();
  } catch (const tvm::ffi::Error& err) {
    EXPECT_EQ(err.kind(), "ValueError");
    EXPECT_NE(std::string(err.message()).find("expected (1, 1, 4, 4)"), std::string::npos);
  }
  DLTensor in = View(&x, &x_shape);
  EXPECT_THROW(executor.Run({&in}, {&out0}), tvm::ffi::Error);
}

TEST(ExecutorTest, HonoursByteOffset) {
  Executor executor(ParseGraph(kRegion));
  std::vector<float> storage(20, -1.0f);
  std::fill(storage.begin() + 4, storage.end(), 3.0f);
  std::vector<float> pooled(4), relu(16);
  std::vector<int64_t> x_shape = {1, 1, 4, 4}, pooled_shape = {1, 1, 2, 2};
  DLTensor in = View(&storage, &x_shape);
  in.byte_offset = 4 * sizeof(float);
  DLTensor out0 = View(&pooled, &pooled_shape), out1 = View(&relu, &x_shape);
  executor.Run({&in}, {&out0, &out1});
  EXPECT_EQ(pooled, (std::vector<float>(4, 3.0f)));
}

}  // namespace
}  // namespace example_npu

namespace example_npu {
namespace {

TEST(ExecutorTest, Float16GraphsAccumulateInFloat32AndRoundEachResult) {
  // y = reshape(x, (4,)) * c with c a float16 constant.
  Executor executor(ParseGraph(R"({"version": 1, "symbol": "h", "nodes": [
    {"op": "input", "name": "x", "shape": [2, 2], "dtype": "float16"},
    {"op": "const", "name": "c", "shape": [4], "dtype": "float16"},
    {"op": "reshape", "name": "r", "inputs": [0], "shape": [4], "dtype": "float16"},
    {"op": "multiply", "name": "y", "inputs": [2, 1], "shape": [4], "dtype": "float16"}],
    "arg_nodes": [0], "heads": [3]})"));
  const uint16_t one = 0x3c00, third = 0x3555;  // 1.0 and the float16 nearest 1/3
  std::vector<uint16_t> x = {one, third, 0xc000, 0x0000}, c = {third, third, third, one}, y(4);
  std::vector<int64_t> x_shape = {2, 2}, c_shape = {4};
  DLTensor in{x.data(), {kDLCPU, 0}, 2, {kDLFloat, 16, 1}, x_shape.data(), nullptr, 0};
  DLTensor out{y.data(), {kDLCPU, 0}, 1, {kDLFloat, 16, 1}, c_shape.data(), nullptr, 0};
  struct HalfAlloc {
    std::vector<uint16_t>* src;
    void AllocData(DLTensor* t) { t->data = src->data(); }
    void FreeData(DLTensor*) {}
  };
  executor.SetConstants({tvm::ffi::Tensor::FromNDAlloc(
      HalfAlloc{&c}, tvm::ffi::Shape({4}), DLDataType{kDLFloat, 16, 1}, DLDevice{kDLCPU, 0})});
  executor.Run({&in}, {&out});
  const float third_f = kernels::HalfToFloat(third);
  EXPECT_EQ(y[0], third);
  EXPECT_EQ(y[1], kernels::FloatToHalf(third_f * third_f));
  EXPECT_EQ(y[2], kernels::FloatToHalf(-2.0f * third_f));
  EXPECT_EQ(y[3], 0x0000);
}

}  // namespace
}  // namespace example_npu

namespace example_npu {
namespace {

using kernels::test_util::ViewOf;

/*! \brief Caller-owned storage as a constant tensor. */
template <typename T>
tvm::ffi::Tensor Constant(std::vector<T>* data, const std::vector<int64_t>& shape,
                          DLDataType dtype) {
  struct Alloc {
    std::vector<T>* src;
    void AllocData(DLTensor* t) { t->data = src->data(); }
    void FreeData(DLTensor*) {}
  };
  return tvm::ffi::Tensor::FromNDAlloc(Alloc{data}, tvm::ffi::Shape(shape), dtype,
                                       DLDevice{kDLCPU, 0});
}

tvm::ffi::Tensor FloatConstant(std::vector<float>* data, const std::vector<int64_t>& shape) {
  return Constant(data, shape, DLDataType{kDLFloat, 32, 1});
}

TEST(ExecutorTest, MatmulOfAConstantAndASlicedInputStagesTheWholeInput) {
  // Issue 17: matmul(constant [64, 1], x[:, 16:22]) staged the rhs in L2, sized by the slice (24
  // bytes) while the staging DMA copies the whole sliced tensor (128 bytes): a heap overflow
  // with right numbers. The area is now sized by what is staged, and checked at compile time.
  Executor executor(ParseGraph(R"({"version": 1, "symbol": "f", "nodes": [
    {"op": "input", "name": "x", "shape": [1, 32], "dtype": "float32"},
    {"op": "strided_slice", "name": "s", "inputs": [0], "shape": [1, 6], "dtype": "float32",
     "attrs": {"begin": [0, 16], "step": [1, 1]}},
    {"op": "const", "name": "w", "shape": [64, 1], "dtype": "float32"},
    {"op": "matmul", "name": "y", "inputs": [2, 1], "shape": [64, 6], "dtype": "float32"}],
    "arg_nodes": [0], "heads": [3]})"));
  std::vector<float> x(32), w(64), y(64 * 6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * static_cast<float>(i) - 3.0f;
  std::vector<int64_t> x_shape = {1, 32}, y_shape = {64, 6};
  executor.SetConstants({FloatConstant(&w, {64, 1})});
  DLTensor in = ViewOf(&x, &x_shape, {kDLFloat, 32, 1}),
           out = ViewOf(&y, &y_shape, {kDLFloat, 32, 1});
  executor.Run({&in}, {&out});
  for (int64_t r = 0; r < 64; ++r) {
    for (int64_t c = 0; c < 6; ++c) EXPECT_EQ(y[r * 6 + c], w[r] * x[16 + c]) << r << ", " << c;
  }
}

TEST(ExecutorTest, BatchNormFusedAfterAMergedMatmulReadsItsParametersAlongTheChannel) {
  // Issue 17: matmul -> matmul by a constant [1, 3] -> batch_norm(axis=1) of [2, 1, 3]. The
  // second matmul merges its batch into rows, so the tile's dim 1 has extent 2: the fused
  // batch_norm read two channels of its one-element parameters (NaN, inf or garbage per run).
  // The axis now comes from the parameter tiles, which the merge moved with the data.
  const char* graph = R"({"version": 1, "symbol": "f", "nodes": [
    {"op": "input", "name": "x", "shape": [2, 1, 4], "dtype": "float32"},
    {"op": "const", "name": "w1", "shape": [4, 1], "dtype": "float32"},
    {"op": "matmul", "name": "m1", "inputs": [0, 1], "shape": [2, 1, 1], "dtype": "float32"},
    {"op": "const", "name": "w2", "shape": [1, 3], "dtype": "float32"},
    {"op": "matmul", "name": "m2", "inputs": [2, 3], "shape": [2, 1, 3], "dtype": "float32"},
    {"op": "const", "name": "g", "shape": [1], "dtype": "float32"},
    {"op": "const", "name": "b", "shape": [1], "dtype": "float32"},
    {"op": "const", "name": "mu", "shape": [1], "dtype": "float32"},
    {"op": "const", "name": "var", "shape": [1], "dtype": "float32"},
    {"op": "nn.batch_norm", "name": "bn", "inputs": [4, 5, 6, 7, 8], "shape": [2, 1, 3],
     "dtype": "float32", "attrs": {"axis": 1, "epsilon": 0.001, "center": true, "scale": true}}],
    "arg_nodes": [0], "heads": [9]})";
  std::vector<float> x = {1, 2, 3, 4, -1, 0.5f, 2, -2}, w1 = {1, -1, 0.5f, 2}, w2 = {1, 2, -3};
  std::vector<float> g = {1.5f}, b = {-0.25f}, mu = {0.5f}, var = {4.0f};
  std::vector<int64_t> x_shape = {2, 1, 4}, y_shape = {2, 1, 3};
  for (int run = 0; run < 3; ++run) {  // fresh executors: the defect read uninitialised memory
    Executor executor(ParseGraph(graph));
    executor.SetConstants({FloatConstant(&w1, {4, 1}), FloatConstant(&w2, {1, 3}),
                           FloatConstant(&g, {1}), FloatConstant(&b, {1}), FloatConstant(&mu, {1}),
                           FloatConstant(&var, {1})});
    std::vector<float> y(6);
    DLTensor in = ViewOf(&x, &x_shape, {kDLFloat, 32, 1});
    DLTensor out = ViewOf(&y, &y_shape, {kDLFloat, 32, 1});
    executor.Run({&in}, {&out});
    for (int64_t n = 0; n < 2; ++n) {
      float dot = 0;
      for (int64_t k = 0; k < 4; ++k) dot += x[n * 4 + k] * w1[k];
      for (int64_t c = 0; c < 3; ++c) {
        const double normalised = (dot * w2[c] - mu[0]) / std::sqrt(var[0] + 0.001);
        EXPECT_NEAR(y[n * 3 + c], normalised * g[0] + b[0], 1e-5) << "run " << run;
      }
    }
  }
}

TEST(ExecutorTest, RuntimeParametersThatAreNaNOrChangeAreBoundEachTime) {
  // Issue 17: the programs compiled per runtime-parameter set were cached in a map keyed by
  // doubles, where NaN is equivalent to every key: a NaN scale returned the previous call's
  // output. Keys are now the values' bits; a NaN scale is refused like a bound one.
  Executor executor(ParseGraph(R"({"version": 1, "symbol": "f", "nodes": [
    {"op": "input", "name": "x", "shape": [1, 2, 2, 2], "dtype": "int8"},
    {"op": "input", "name": "w", "shape": [2, 2, 1, 1], "dtype": "int8"},
    {"op": "input", "name": "s", "shape": [2], "dtype": "float32"},
    {"op": "qnn.conv2d", "name": "c", "inputs": [0, 1], "shape": [1, 2, 2, 2], "dtype": "int8",
     "attrs": {"strides": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": 1,
               "data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "NCHW",
               "input_scale": 0.5, "input_zero_point": 0, "weight_scales": {"arg": 2},
               "output_scale": 1.0, "output_zero_point": 0}}],
    "arg_nodes": [0, 1, 2], "heads": [3]})"));
  std::vector<int8_t> x = {1, 2, 3, 4, 5, 6, 7, 8}, w = {1, 0, 0, 1}, y(8);
  std::vector<int64_t> x_shape = {1, 2, 2, 2}, w_shape = {2, 2, 1, 1}, s_shape = {2};
  DLTensor in = ViewOf(&x, &x_shape, {kDLInt, 8, 1}), weight = ViewOf(&w, &w_shape, {kDLInt, 8, 1});
  DLTensor out = ViewOf(&y, &x_shape, {kDLInt, 8, 1});
  auto run = [&](std::vector<float> scales) {
    DLTensor s = ViewOf(&scales, &s_shape, {kDLFloat, 32, 1});
    executor.Run({&in, &weight, &s}, {&out});
    return y;
  };
  // y = round(x * 0.5 * scale / 1.0): the identity weight picks each channel's own x.
  EXPECT_EQ(run({2.0f, 2.0f}), x);
  EXPECT_EQ(run({4.0f, 2.0f}), (std::vector<int8_t>{2, 4, 6, 8, 5, 6, 7, 8}));
  for (float bad : {std::nanf(""), -std::nanf(""), 0.0f, -0.0f}) {
    try {
      run({bad, 2.0f});
      ADD_FAILURE() << "scale " << bad << " was accepted";
    } catch (const tvm::ffi::Error& err) {
      EXPECT_EQ(err.kind(), "ValueError") << err.message();
    }
  }
  EXPECT_EQ(run({2.0f, 2.0f}), x);
}

TEST(ExecutorTest, IntegerWeightsAreRepackedWhenConstantsAreRebound) {
  // The emulator keeps constant int8 weights packed for the dot-product unit: rebinding the
  // constants (other contents at the same address, then another address) must not reuse them.
  constexpr int64_t kChannels = 16;
  Executor executor(ParseGraph(R"({"version": 1, "symbol": "f", "nodes": [
    {"op": "input", "name": "x", "shape": [1, 16, 3, 3], "dtype": "int8"},
    {"op": "const", "name": "w", "shape": [16, 16, 1, 1], "dtype": "int8"},
    {"op": "qnn.conv2d", "name": "c", "inputs": [0, 1], "shape": [1, 16, 3, 3], "dtype": "int8",
     "attrs": {"strides": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": 1,
               "data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "NCHW",
               "input_scale": 1.0, "input_zero_point": 0, "weight_scales": [1.0],
               "output_scale": 1.0, "output_zero_point": 0}}],
    "arg_nodes": [0], "heads": [2]})"));
  std::vector<int8_t> x(kChannels * 9), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int8_t>(static_cast<int>(i % 97) - 48);
  std::vector<int64_t> shape = {1, kChannels, 3, 3};
  DLTensor in = ViewOf(&x, &shape, {kDLInt, 8, 1}), out = ViewOf(&y, &shape, {kDLInt, 8, 1});
  // A permutation of the channels as a 1x1 convolution: output o = input perm[o].
  auto permutation = [](bool reversed) {
    std::vector<int8_t> w(kChannels * kChannels, 0);
    for (int64_t o = 0; o < kChannels; ++o)
      w[o * kChannels + (reversed ? kChannels - 1 - o : o)] = 1;
    return w;
  };
  auto expected = [&](bool reversed) {
    std::vector<int8_t> e(x.size());
    for (int64_t o = 0; o < kChannels; ++o) {
      const int64_t from = reversed ? kChannels - 1 - o : o;
      std::copy_n(x.begin() + from * 9, 9, e.begin() + o * 9);
    }
    return e;
  };
  const std::vector<int64_t> w_shape = {kChannels, kChannels, 1, 1};
  std::vector<int8_t> w = permutation(false);
  executor.SetConstants({Constant(&w, w_shape, {kDLInt, 8, 1})});
  executor.Run({&in}, {&out});
  EXPECT_EQ(y, expected(false));
  executor.Run({&in}, {&out});  // the packing kept from the first run
  EXPECT_EQ(y, expected(false));
  w = permutation(true);  // same storage, new contents
  executor.SetConstants({Constant(&w, w_shape, {kDLInt, 8, 1})});
  executor.Run({&in}, {&out});
  EXPECT_EQ(y, expected(true));
  std::vector<int8_t> other = permutation(false);
  executor.SetConstants({Constant(&other, w_shape, {kDLInt, 8, 1})});
  executor.Run({&in}, {&out});
  EXPECT_EQ(y, expected(false));
}

}  // namespace
}  // namespace example_npu
