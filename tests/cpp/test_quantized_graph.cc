// A graph of integer glue ops (uint8 activations) parsed, compiled for a roomy and a tiny L1,
// and executed by the Executor: every integer equals the untiled whole-tensor evaluation of the
// same kernels, and the profile counts each op's group on its engine.
#include <gtest/gtest.h>
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "runtime/executor.h"
#include "sim/engines.h"
#include "sim/timing.h"

namespace example_npu {
namespace {

std::string Table() {
  std::string table;
  for (int v = 0; v < 256; ++v) table += (v ? "," : "") + std::to_string(255 - v / 2);
  return table;
}

std::string GlueGraph() {
  const std::string pool =
      R"("strides": [2, 2], "dilation": [1, 1], "ceil_mode": false, "layout": "NCHW",)";
  const std::string q = R"("input_scale": 0.02, "input_zero_point": 3,)";
  return std::string(R"({"version": 1, "symbol": "glue", "nodes": [
  {"op": "input", "name": "x", "shape": [1, 6, 10, 10], "dtype": "uint8"},
  {"op": "input", "name": "y", "shape": [1, 6, 1, 1], "dtype": "uint8"},
  {"op": "qnn.requantize", "name": "r", "inputs": [0], "shape": [1, 6, 10, 10], "dtype": "uint8",
   "attrs": {)") +
         q + R"( "output_scale": 0.03, "output_zero_point": 100, "min_value": 0.0}},
  {"op": "qnn.multiply", "name": "m", "inputs": [2, 1], "shape": [1, 6, 10, 10], "dtype": "uint8",
   "attrs": {"lhs_scale": 0.03, "lhs_zero_point": 100, "rhs_scale": 0.01, "rhs_zero_point": 128,
             "output_scale": 0.004, "output_zero_point": 120}},
  {"op": "qnn.max_pool2d", "name": "mp", "inputs": [3], "shape": [1, 6, 5, 5], "dtype": "uint8",
   "attrs": {"pool_size": [3, 3], "padding": [1, 1, 1, 1], "count_include_pad": false, )" +
         pool + R"( "input_scale": 0.004, "input_zero_point": 120,
             "output_scale": 0.004, "output_zero_point": 120}},
  {"op": "qnn.avg_pool2d", "name": "ap", "inputs": [3], "shape": [1, 6, 5, 5], "dtype": "uint8",
   "attrs": {"pool_size": [2, 2], "padding": [0, 0, 0, 0], "count_include_pad": false, )" +
         pool + R"( "input_scale": 0.004, "input_zero_point": 120,
             "output_scale": 0.003, "output_zero_point": 110}},
  {"op": "qnn.concat", "name": "c", "inputs": [4, 5], "shape": [1, 12, 5, 5], "dtype": "uint8",
   "attrs": {"axis": 1, "input_scales": [0.004, 0.003], "input_zero_points": [120, 110],
             "output_scale": 0.004, "output_zero_point": 120}},
  {"op": "qnn.lut", "name": "t", "inputs": [6], "shape": [1, 12, 5, 5], "dtype": "uint8",
   "attrs": {"index_offset": 0, "table": [)" +
         Table() + R"(]}},
  {"op": "qnn.softmax", "name": "s", "inputs": [7], "shape": [1, 12, 5, 5], "dtype": "uint8",
   "attrs": {"axis": 1, "input_scale": 0.05, "input_zero_point": 128,
             "output_scale": 0.00390625, "output_zero_point": 0}},
  {"op": "qnn.add", "name": "a", "inputs": [8, 7], "shape": [1, 12, 5, 5], "dtype": "uint8",
   "attrs": {"lhs_scale": 0.00390625, "lhs_zero_point": 0, "rhs_scale": 0.05,
             "rhs_zero_point": 128, "output_scale": 0.05, "output_zero_point": 100}}],
  "arg_nodes": [0, 1], "heads": [9, 6]})";
}

DLTensor View(std::vector<uint8_t>* data, std::vector<int64_t>* shape) {
  DLTensor t{};
  t.data = data->data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape->size());
  t.dtype = DLDataType{kDLUInt, 8, 1};
  t.shape = shape->data();
  return t;
}

/*! \brief Every node on whole tensors (integers held as floats), no tiling. */
std::vector<std::vector<float>> Untiled(const Graph& graph,
                                        const std::vector<std::vector<uint8_t>>& inputs) {
  std::vector<std::vector<float>> values(graph.nodes.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    values[graph.arg_nodes[i]].assign(inputs[i].begin(), inputs[i].end());
  }
  for (size_t id = 0; id < graph.nodes.size(); ++id) {
    const Node& node = graph.nodes[id];
    if (node.kind != NodeKind::kOp) continue;
    std::vector<OperandF32> operands;
    for (int64_t input : node.inputs) {
      operands.push_back(OperandF32{values[input].data(), &graph.nodes[input].shape});
    }
    values[id].resize(kernels::NumElements(node.shape));
    RunOp(node.op, node.attrs, operands, values[id].data(), node.shape);
  }
  return values;
}

TEST(QuantizedGraphTest, TiledIntegerOpsEqualTheUntiledKernels) {
  const Graph graph = ParseGraph(GlueGraph());
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::vector<uint8_t>> inputs = {std::vector<uint8_t>(600), std::vector<uint8_t>(6)};
  for (auto& input : inputs) {
    for (uint8_t& v : input) v = static_cast<uint8_t>(byte(rng));
  }
  const std::vector<std::vector<float>> reference = Untiled(graph, inputs);
  NPUConfig tiny;
  tiny.l1_sram_kb = 1;
  tiny.tile_height = 8;
  tiny.tile_width = 8;
  for (const NPUConfig& config : {NPUConfig(), tiny}) {
    Executor executor(ParseGraph(GlueGraph()), config);
    std::vector<int64_t> x_shape = {1, 6, 10, 10}, y_shape = {1, 6, 1, 1};
    std::vector<int64_t> out_shape = {1, 12, 5, 5};
    std::vector<uint8_t> sum(300), joined(300);
    DLTensor x = View(&inputs[0], &x_shape), y = View(&inputs[1], &y_shape);
    DLTensor out0 = View(&sum, &out_shape), out1 = View(&joined, &out_shape);
    executor.Run({&x, &y}, {&out0, &out1});
    EXPECT_EQ(std::vector<float>(sum.begin(), sum.end()), reference[9]) << config.l1_sram_kb;
    EXPECT_EQ(std::vector<float>(joined.begin(), joined.end()), reference[6]);
    const Profile profile = Simulate(executor.program());
    int64_t tiles = 0;
    for (const GroupProfile& group : profile.groups) {
      EXPECT_GT(group.end, group.start) << group.name;
      tiles += group.tiles;
    }
    EXPECT_EQ(profile.groups.size(), 8u);  // one group per integer op
    if (config.l1_sram_kb == 1) EXPECT_GT(tiles, 8);
  }
}

/*! \brief The glue graph with TFLite's arithmetic on every qnn op (the average pool then keeps
 * its input's quantization, as TFLite's AVERAGE_POOL_2D does). */
std::string TfliteGlueGraph() {
  std::string graph = GlueGraph();
  for (size_t at = graph.find(R"("attrs": {)"); at != std::string::npos;
       at = graph.find(R"("attrs": {)", at + 1)) {
    graph.insert(at + 10, R"("rounding": "tflite", )");
  }
  const std::string avg_output = R"("output_scale": 0.003, "output_zero_point": 110)";
  graph.replace(graph.find(avg_output), avg_output.size(),
                R"("output_scale": 0.004, "output_zero_point": 120)");
  const std::string concat_scales =
      R"("input_scales": [0.004, 0.003], "input_zero_points": [120, 110])";
  graph.replace(graph.find(concat_scales), concat_scales.size(),
                R"("input_scales": [0.004, 0.004], "input_zero_points": [120, 120])");
  return graph;
}

TEST(QuantizedGraphTest, TfliteRoundingTiledEqualsUntiledAndDiffersFromTheDefault) {
  const Graph tflite = ParseGraph(TfliteGlueGraph());
  std::mt19937 rng(12);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::vector<uint8_t>> inputs = {std::vector<uint8_t>(600), std::vector<uint8_t>(6)};
  for (auto& input : inputs) {
    for (uint8_t& v : input) v = static_cast<uint8_t>(byte(rng));
  }
  const std::vector<std::vector<float>> reference = Untiled(tflite, inputs);
  NPUConfig tiny;
  tiny.l1_sram_kb = 1;
  tiny.tile_height = 8;
  tiny.tile_width = 8;
  for (const NPUConfig& config : {NPUConfig(), tiny}) {
    Executor executor(ParseGraph(TfliteGlueGraph()), config);
    std::vector<int64_t> x_shape = {1, 6, 10, 10}, y_shape = {1, 6, 1, 1};
    std::vector<int64_t> out_shape = {1, 12, 5, 5};
    std::vector<uint8_t> sum(300), joined(300);
    DLTensor x = View(&inputs[0], &x_shape), y = View(&inputs[1], &y_shape);
    DLTensor out0 = View(&sum, &out_shape), out1 = View(&joined, &out_shape);
    executor.Run({&x, &y}, {&out0, &out1});
    EXPECT_EQ(std::vector<float>(sum.begin(), sum.end()), reference[9]) << config.l1_sram_kb;
    EXPECT_EQ(std::vector<float>(joined.begin(), joined.end()), reference[6]);
  }
  // The requantize -> multiply chain alone already rounds differently somewhere.
  std::string tvm_graph = TfliteGlueGraph();
  for (size_t at = tvm_graph.find("tflite"); at != std::string::npos;
       at = tvm_graph.find("tflite", at)) {
    tvm_graph.replace(at, 6, "tvm");
  }
  const std::vector<std::vector<float>> tvm = Untiled(ParseGraph(tvm_graph), inputs);
  EXPECT_NE(tvm[3], reference[3]);
}

TEST(QuantizedGraphTest, TfliteRoundingRejectsWhatTfliteCannotMean) {
  auto expect_error = [](std::string graph, const std::string& from, const std::string& to,
                         const std::string& message) {
    graph.replace(graph.find(from), from.size(), to);
    try {
      ParseGraph(graph);
      FAIL() << "accepted: " << to;
    } catch (const tvm::ffi::Error& err) {
      EXPECT_EQ(err.kind(), "ValueError");
      EXPECT_NE(std::string(err.message()).find(message), std::string::npos) << err.message();
    }
  };
  const std::string graph = TfliteGlueGraph();
  expect_error(graph, R"("rounding": "tflite")", R"("rounding": "gemmlowp")",
               "must be \"tvm\" or \"tflite\"");
  expect_error(graph, R"("output_scale": 0.00390625, "output_zero_point": 0)",
               R"("output_scale": 0.004, "output_zero_point": 0)", "output scale 1/256");
  expect_error(graph, R"("output_scale": 0.004, "output_zero_point": 120}},
  {"op": "qnn.concat")",
               R"("output_scale": 0.005, "output_zero_point": 120}},
  {"op": "qnn.concat")",
               "same input and output scale");
}

TEST(QuantizedGraphTest, RejectsTablesThatDoNotMatchTheInputType) {
  std::string graph = GlueGraph();
  graph.replace(graph.find(R"("index_offset": 0)"), 17, R"("index_offset": -128)");
  try {
    ParseGraph(graph);
    FAIL() << "a uint8 input with an int8 table offset was accepted";
  } catch (const tvm::ffi::Error& err) {
    EXPECT_EQ(err.kind(), "ValueError");
    EXPECT_NE(std::string(err.message()).find("256-entry table"), std::string::npos);
  }
}

}  // namespace
}  // namespace example_npu

namespace example_npu {
namespace {

// qnn.requantize whose scales and zero points are call arguments ({"arg": node id}).
const char* kRuntimeParams = R"({"version": 1, "symbol": "rp", "nodes": [
  {"op": "input", "name": "x", "shape": [2, 5], "dtype": "int8"},
  {"op": "input", "name": "s", "shape": [], "dtype": "float32"},
  {"op": "input", "name": "z", "shape": [], "dtype": "int8"},
  {"op": "qnn.requantize", "name": "r", "inputs": [0], "shape": [2, 5], "dtype": "int8",
   "attrs": {"input_scale": {"arg": 1}, "input_zero_point": {"arg": 2},
             "output_scale": 0.5, "output_zero_point": 0}}],
  "arg_nodes": [0, 1, 2], "heads": [3]})";

TEST(RuntimeParamsTest, QuantizationParametersBindAtRunTime) {
  const Graph graph = ParseGraph(kRuntimeParams);
  EXPECT_EQ(graph.runtime_param_inputs, (std::vector<int64_t>{1, 2}));
  Executor executor(ParseGraph(kRuntimeParams));
  std::vector<int8_t> x = {-10, -3, 0, 1, 2, 3, 4, 5, 100, 127}, y(10);
  std::vector<int64_t> x_shape = {2, 5}, scalar = {};
  auto tensor = [](void* data, std::vector<int64_t>* shape, DLDataType dtype) {
    DLTensor t{};
    t.data = data;
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape->size());
    t.dtype = dtype;
    t.shape = shape->data();
    return t;
  };
  for (const auto& [scale, zero_point] : {std::pair<float, int8_t>{1.0f, 0}, {0.25f, 2}}) {
    float s = scale;
    int8_t z = zero_point;
    DLTensor tx = tensor(x.data(), &x_shape, {kDLInt, 8, 1});
    DLTensor ts = tensor(&s, &scalar, {kDLFloat, 32, 1});
    DLTensor tz = tensor(&z, &scalar, {kDLInt, 8, 1});
    DLTensor ty = tensor(y.data(), &x_shape, {kDLInt, 8, 1});
    executor.Run({&tx, &ts, &tz}, {&ty});
    for (size_t i = 0; i < x.size(); ++i) {
      // (x - z) * s / 0.5 (exact for these values), rounded half to even as TVM's quantize.
      const double real = (x[i] - z) * static_cast<double>(scale) / 0.5;
      const double expected = std::clamp(std::nearbyint(real), -128.0, 127.0);
      EXPECT_EQ(y[i], expected) << "scale " << scale << " element " << i;
    }
  }
}

/*! \brief A 1 KB L1 with 8 x 8 tiles: every op splits into many tiles. */
NPUConfig TinyL1() {
  NPUConfig tiny;
  tiny.l1_sram_kb = 1;
  tiny.tile_height = 8;
  tiny.tile_width = 8;
  return tiny;
}

/*! \brief qnn.lut from int8 to float32 (canonicalize_qdq's float tables, such as a model's
 * output tanh): each output is the table entry of its input, float32 bits as given (values with
 * no short decimal form included), tiled or not; a table entry float32 cannot hold is refused. */
TEST(QuantizedGraphTest, FloatTableLooksUpExactFloat32Values) {
  std::vector<float> table(256);
  std::string entries;
  for (int v = 0; v < 256; ++v) {
    table[v] = std::tanh(static_cast<float>(v) / 37.0f) + std::ldexp(1.0f, -23) * (v % 3);
    char text[40];
    // %.17g of the float widened to double writes the float32 value exactly, as the Python
    // codegen does; fewer digits name a nearby double, which the parser refuses.
    std::snprintf(text, sizeof(text), "%s%.17g", v ? "," : "", static_cast<double>(table[v]));
    entries += text;
  }
  const std::string graph = R"({"version": 1, "symbol": "float_lut", "nodes": [
  {"op": "input", "name": "x", "shape": [3, 40], "dtype": "int8"},
  {"op": "qnn.lut", "name": "t", "inputs": [0], "shape": [3, 40], "dtype": "float32",
   "attrs": {"index_offset": -128, "table": [)" +
                            entries + R"(]}}],
  "arg_nodes": [0], "heads": [1]})";
  std::vector<int8_t> x(120);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int8_t>(i * 37 - 128);
  for (const NPUConfig& config : {NPUConfig(), TinyL1()}) {
    Executor executor(ParseGraph(graph), config);
    std::vector<int64_t> shape = {3, 40};
    std::vector<float> out(120);
    DLTensor in{x.data(), DLDevice{kDLCPU, 0}, 2, DLDataType{kDLInt, 8, 1}, shape.data()};
    DLTensor result{out.data(), DLDevice{kDLCPU, 0}, 2, DLDataType{kDLFloat, 32, 1}, shape.data()};
    executor.Run({&in}, {&result});
    for (size_t i = 0; i < x.size(); ++i) {
      // take(table, x, mode="wrap"): index x mod 256, entries given from index 0.
      EXPECT_EQ(out[i], table[(x[i] + 256) % 256]) << i << " " << config.l1_sram_kb;
    }
  }
  // 0.1 is a double that no float32 equals (a float32 table entry is exact or refused).
  std::string rounded = graph;
  const std::string first = R"("table": [0,)";
  ASSERT_NE(rounded.find(first), std::string::npos);
  rounded.replace(rounded.find(first), first.size(), R"("table": [0.1,)");
  EXPECT_THROW(ParseGraph(rounded), tvm::ffi::Error);
}

}  // namespace
}  // namespace example_npu
