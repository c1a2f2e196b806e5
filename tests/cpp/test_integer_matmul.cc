// A qnn.matmul with a float32 result (graph/qnn_attrs.cc, ParseIntegerSumAttrs): onnxruntime's
// MatMulInteger and its cast. Every output is float32 of the exact integer sum of (x - zero
// point) * w, the zero point read from an input when the op runs (one program for every value),
// tiled for a roomy and a small L1 (the weight split over tiles); what it cannot mean is refused.
#include <gtest/gtest.h>
#include <tvm/ffi/error.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "graph_test_util.h"
#include "runtime/executor.h"

namespace example_npu {
namespace {

using kernels::test_util::ExpectValueError;
using kernels::test_util::ViewOf;

std::string IntegerMatmul(int64_t depth, const std::string& extra_attrs = "") {
  const std::string k = std::to_string(depth);
  return R"({"version": 1, "symbol": "mmi", "nodes": [
  {"op": "input", "name": "x", "shape": [2, 3, )" +
         k + R"(], "dtype": "uint8"},
  {"op": "input", "name": "zp", "shape": [], "dtype": "uint8"},
  {"op": "const", "name": "w", "shape": [)" +
         k + R"(, 40], "dtype": "int8"},
  {"op": "qnn.matmul", "name": "m", "inputs": [0, 2], "shape": [2, 3, 40], "dtype": "float32",
   "attrs": {"input_zero_point_node": 1)" +
         extra_attrs + R"(}}],
  "arg_nodes": [0, 1], "heads": [3]})";
}

tvm::ffi::Tensor Weight(std::vector<int8_t>* w, int64_t depth) {
  struct Borrowed {
    std::vector<int8_t>* data;
    void AllocData(DLTensor* t) { t->data = data->data(); }
    void FreeData(DLTensor*) {}
  };
  return tvm::ffi::Tensor::FromNDAlloc(Borrowed{w}, tvm::ffi::Shape({depth, 40}),
                                       DLDataType{kDLInt, 8, 1}, DLDevice{kDLCPU, 0});
}

TEST(IntegerMatmulTest, ExactSumsAsFloat32ForEachRunTimeZeroPoint) {
  // 700 x 255 x 127 reaches 2.3e7 > 2^24: the larger sums round to float32 (half to even).
  const int64_t depth = 700;
  std::mt19937 rng(3);
  std::vector<uint8_t> x(2 * 3 * depth);
  std::vector<int8_t> w(depth * 40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = i < x.size() / 2 ? 255 : rng() % 256;
  for (size_t i = 0; i < w.size(); ++i) w[i] = i % 40 < 4 ? 127 : static_cast<int8_t>(rng());
  for (const NPUConfig& config : {NPUConfig(), test_util::SmallL1()}) {
    const Graph graph = ParseGraph(IntegerMatmul(depth));
    EXPECT_TRUE(graph.runtime_param_inputs.empty()) << "no program per zero point";
    Executor executor(ParseGraph(IntegerMatmul(depth)), config);
    executor.SetConstants({Weight(&w, depth)});
    for (uint8_t zero_point : {uint8_t{0}, uint8_t{131}, uint8_t{255}, uint8_t{0}}) {
      std::vector<float> y(2 * 3 * 40);
      std::vector<int64_t> x_shape = {2, 3, depth}, scalar = {}, y_shape = {2, 3, 40};
      DLTensor tx = ViewOf(&x, &x_shape, {kDLUInt, 8, 1});
      std::vector<uint8_t> zp = {zero_point};
      DLTensor tz = ViewOf(&zp, &scalar, {kDLUInt, 8, 1});
      DLTensor ty = ViewOf(&y, &y_shape, {kDLFloat, 32, 1});
      executor.Run({&tx, &tz}, {&ty});
      for (int64_t row = 0; row < 6; ++row) {
        for (int64_t n = 0; n < 40; ++n) {
          int64_t sum = 0;
          for (int64_t k = 0; k < depth; ++k) {
            sum += (int64_t{x[row * depth + k]} - zero_point) * w[k * 40 + n];
          }
          ASSERT_EQ(y[row * 40 + n], static_cast<float>(sum))
              << "row " << row << " column " << n << " zero point " << int{zero_point};
        }
      }
    }
  }
}

TEST(IntegerMatmulTest, RefusesWhatAnExactSumCannotMean) {
  ExpectValueError([] { ParseGraph(IntegerMatmul(64, R"(, "input_scale": 0.5)")); },
                   "takes no input_scale");
  ExpectValueError([] { ParseGraph(IntegerMatmul(64, R"(, "bias": [1.0])")); }, "takes no bias");
  // 65,794 x 255 x 128 passes 2^31: TVM's int32 sum could wrap where the NPU's would not.
  ExpectValueError([] { ParseGraph(IntegerMatmul(65794)); }, "can leave int32");
  ParseGraph(IntegerMatmul(65793));
  // The zero point's node: an input of one element of the activation's dtype.
  std::string constant = IntegerMatmul(64);
  constant.replace(constant.find(R"("input_zero_point_node": 1)"), 26,
                   R"("input_zero_point_node": 2)");
  ExpectValueError([&] { ParseGraph(constant); }, "must be a one-element uint8 input");
  std::string negative = IntegerMatmul(64);
  negative.replace(negative.find(R"("input_zero_point_node": 1)"), 26,
                   R"("input_zero_point_node": -1)");
  ExpectValueError([&] { ParseGraph(negative); }, "is not a node id");
  ExpectValueError([] { ParseGraph(IntegerMatmul(64, R"(, "input_zero_point": 3)")); },
                   "input_zero_point and input_zero_point_node");
  // A rank-0 activation: the shape check's error (its depth is read only with a rank).
  std::string scalar = IntegerMatmul(64);
  scalar.replace(scalar.find("[2, 3, 64]"), 10, "[]");
  ExpectValueError([&] { ParseGraph(scalar); }, "rank >= 1");
  std::string wide = IntegerMatmul(64);
  wide.replace(wide.find(R"("dtype": "uint8"})"), 17, R"("dtype": "int16"})");
  EXPECT_THROW(ParseGraph(wide), tvm::ffi::Error);
}

}  // namespace
}  // namespace example_npu
