#include <gtest/gtest.h>
#include <tvm/ffi/error.h>

#include <string>

#include "graph/graph.h"

namespace example_npu {
namespace {

std::string Wrap(const std::string& nodes, const std::string& heads = "[1]") {
  return R"({"version": 1, "symbol": "f", "nodes": [)" + nodes +
         R"(], "arg_nodes": [0], "heads": )" + heads + "}";
}

const char* kInput = R"({"op": "input", "name": "x", "shape": [1, 2, 5, 5], "dtype": "float32"})";

/*! \brief Expects ParseGraph to throw a ValueError whose message contains `needle`. */
void ExpectRejected(const std::string& json, const std::string& needle) {
  try {
    ParseGraph(json);
    FAIL() << "accepted: " << json;
  } catch (const tvm::ffi::Error& err) {
    EXPECT_EQ(err.kind(), "ValueError");
    EXPECT_NE(std::string(err.message()).find(needle), std::string::npos) << err.message();
  }
}

TEST(GraphTest, ParsesOpsIntoKindsAndTypedAttributes) {
  Graph g = ParseGraph(Wrap(std::string(kInput) + R"(,
    {"op": "nn.max_pool2d", "name": "p", "inputs": [0], "shape": [1, 2, 3, 3], "dtype": "float32",
     "attrs": {"pool_size": [2, 2], "strides": [2, 2], "dilation": [1, 1],
               "padding": [0, 0, 1, 1], "ceil_mode": false, "count_include_pad": false,
               "layout": "NCHW", "out_layout": "NCHW"}, "composite": "example_npu.max_pool2d"},
    {"op": "nn.softmax", "name": "s", "inputs": [1], "shape": [1, 2, 3, 3], "dtype": "float32",
     "attrs": {"axis": -1}})",
                            "[2]"));
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[1].op, OpKind::kMaxPool2d);
  const auto& pool = std::get<PoolAttrs>(g.nodes[1].attrs).params;
  EXPECT_EQ(pool.kind, kernels::PoolKind::kMax);
  EXPECT_EQ(pool.padding[2], 1);
  EXPECT_EQ(g.nodes[1].composite, "example_npu.max_pool2d");
  EXPECT_EQ(std::get<SoftmaxAttrs>(g.nodes[2].attrs).axis, 3);  // -1 normalised
}

TEST(GraphTest, Conv1dIsStoredAsHeightOneConv2d) {
  Graph g = ParseGraph(Wrap(
      R"({"op": "input", "name": "x", "shape": [1, 4, 10], "dtype": "float32"},
         {"op": "const", "name": "w", "shape": [6, 2, 3], "dtype": "float32"},
         {"op": "nn.conv1d", "name": "c", "inputs": [0, 1], "shape": [1, 6, 5], "dtype": "float32",
          "attrs": {"strides": [2], "padding": [1, 1], "dilation": [1], "groups": 2,
                    "data_layout": "NCW", "kernel_layout": "OIW", "out_layout": "NCW"}})",
      "[2]"));
  const auto& p = std::get<ConvAttrs>(g.nodes[2].attrs).params;
  EXPECT_EQ(p.strides[1], 2);
  EXPECT_EQ(p.padding[1], 1);
  EXPECT_EQ(p.padding[0], 0);
  EXPECT_EQ(p.groups, 2);
  EXPECT_EQ(g.ConstNames(), std::vector<std::string>{"w"});
}

TEST(GraphTest, PoolCeilModeDropsWindowsStartingInPadding) {
  // Relax: (4 - 1 + 1) / 2 + 1 = 3 windows, the last starting at 4 == extent, so 2 remain.
  Graph g = ParseGraph(Wrap(
      R"({"op": "input", "name": "x", "shape": [1, 1, 4, 4], "dtype": "float32"},
         {"op": "nn.max_pool2d", "name": "p", "inputs": [0], "shape": [1, 1, 2, 2],
          "dtype": "float32", "attrs": {"pool_size": [1, 1], "strides": [2, 2],
          "dilation": [1, 1], "padding": [0, 0, 0, 0], "ceil_mode": true,
          "count_include_pad": false, "layout": "NCHW"}})"));
  EXPECT_EQ(g.nodes[1].shape, (Shape{1, 1, 2, 2}));
}

TEST(GraphTest, RejectsInconsistentGraphs) {
  ExpectRejected("{", "not valid JSON");
  ExpectRejected(Wrap(kInput, "[]"), "no outputs");
  ExpectRejected(Wrap(std::string(kInput) +
                      R"(, {"op": "nn.relu", "name": "r", "inputs": [0], "shape": [1, 2, 5, 4],
                            "dtype": "float32"})"),
                 "declared shape");
  ExpectRejected(Wrap(std::string(kInput) +
                      R"(, {"op": "nn.relu", "name": "r", "inputs": [0, 0], "shape": [1, 2, 5, 5],
                            "dtype": "float32"})"),
                 "expects 1 inputs");
  ExpectRejected(Wrap(std::string(kInput) +
                      R"(, {"op": "nn.softmax", "name": "s", "inputs": [0], "shape": [1, 2, 5, 5],
                            "dtype": "float32", "attrs": {"axis": 4}})"),
                 "out of range");
  ExpectRejected(Wrap(std::string(kInput) +
                      R"(, {"op": "add", "name": "a", "inputs": [0, 2], "shape": [1, 2, 5, 5],
                            "dtype": "float32"})"),
                 "earlier node");
  ExpectRejected(Wrap(std::string(kInput) +
                      R"(, {"op": "nn.relu", "name": "r", "inputs": [0], "shape": [1, 2, 5, 5],
                            "dtype": "int8"})"),
                 "mixed dtypes");
}

TEST(GraphTest, RejectsHostileGraphsWithValueErrors) {
  // Issue 9's table: each of these crashed, hung or raised the wrong error.
  ExpectRejected(Wrap(R"({"op": "input", "name": "x", "shape": [2, 0], "dtype": "float32"},
                         {"op": "const", "name": "w", "shape": [0, 3], "dtype": "float32"},
                         {"op": "matmul", "name": "m", "inputs": [0, 1], "shape": [2, 3],
                          "dtype": "float32"})",
                      "[2]"),
                 "empty operand");
  ExpectRejected(Wrap(R"({"op": "input", "name": "x", "shape": [4611686018427387904, 4],
                          "dtype": "float32"})",
                      "[0]"),
                 "does not fit a 64-bit integer");
  ExpectRejected(Wrap(R"({"op": "input", "name": "x", "shape": [2, 3], "dtype": "int8"},
                         {"op": "const", "name": "w", "shape": [3, 4], "dtype": "int8"},
                         {"op": "qnn.matmul", "name": "q", "inputs": [0, 1], "shape": [],
                          "dtype": "int8", "attrs": {"input_scale": 0.1, "input_zero_point": 0,
                          "weight_scales": [0.1], "output_scale": 0.1, "output_zero_point": 0}})",
                      "[2]"),
                 "declared shape ()");
  ExpectRejected(Wrap(R"({"op": "input", "name": "x", "shape": [2, 3], "dtype": "int8"},
                         {"op": "const", "name": "w", "shape": [3, 4], "dtype": "int8"},
                         {"op": "qnn.matmul", "name": "q", "inputs": [0, 1], "shape": [2, 4],
                          "dtype": "int8", "attrs": {"input_scale": 1e-30, "input_zero_point": 0,
                          "weight_scales": [1e-10], "output_scale": 1, "output_zero_point": 0}})",
                      "[2]"),
                 "requantization multiplier");
  ExpectRejected(Wrap(std::string(kInput) + R"(,
    {"op": "nn.max_pool2d", "name": "p", "inputs": [0], "shape": [1, 2, 5, 5], "dtype": "float32",
     "attrs": {"pool_size": [1, 1], "strides": [1, 1], "dilation": [1, 1],
               "padding": [4611686018427387904, 0, 0, 0], "ceil_mode": false,
               "count_include_pad": false, "layout": "NCHW"}})"),
                 "must be <= 2^31");
  ExpectRejected(Wrap(R"({"op": "input", "name": "x", "shape": [2], "dtype": "int8"},
                         {"op": "dequantize", "name": "d", "inputs": [0], "shape": [2],
                          "dtype": "float32", "attrs": {"scale": 0.5, "zero_point": 128}})"),
                 "outside the int8 range");
  ExpectRejected(std::string(100000, '[') + std::string(100000, ']'), "deeper than 32");
  ExpectRejected(Wrap(std::string(R"({"op": "input", "name": "x)") + "\xff" +
                          R"(", "shape": [2], "dtype": "float32"})",
                      "[0]"),
                 "not valid UTF-8");
  // A name is echoed as printable ASCII, and cut.
  ExpectRejected(Wrap(R"({"op": "input", "name": "\u0007)" + std::string(500, 'n') +
                      R"(", "shape": [2], "dtype": "float64"})"),
                 "(\\x07nnnn");
}

TEST(GraphTest, RejectsConvAttributesThatDisagreeWithShapes) {
  std::string conv = R"(, {"op": "const", "name": "w", "shape": [4, 2, 3, 3], "dtype": "float32"},
    {"op": "nn.conv2d", "name": "c", "inputs": [0, 1], "shape": [1, 4, 3, 3], "dtype": "float32",
     "attrs": {"strides": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": GROUPS,
               "data_layout": "NCHW", "kernel_layout": "LAYOUT", "out_layout": "NCHW"}})";
  auto with = [&](const std::string& groups, const std::string& layout) {
    std::string text = conv;
    text.replace(text.find("GROUPS"), 6, groups);
    text.replace(text.find("LAYOUT"), 6, layout);
    return Wrap(std::string(kInput) + text, "[2]");
  };
  EXPECT_NO_THROW(ParseGraph(with("1", "OIHW")));
  ExpectRejected(with("2", "OIHW"), "groups=2");
  ExpectRejected(with("1", "OHWI"), "kernel layout OHWI");
}

}  // namespace
}  // namespace example_npu
