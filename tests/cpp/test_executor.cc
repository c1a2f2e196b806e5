#include <gtest/gtest.h>
#include <tvm/ffi/error.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/half.h"
#include "runtime/executor.h"

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
