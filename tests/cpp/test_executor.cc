#include <gtest/gtest.h>
#include <tvm/ffi/error.h>

#include <algorithm>
#include <string>
#include <vector>

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
