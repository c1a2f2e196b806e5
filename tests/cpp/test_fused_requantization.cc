#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "compiler/compiler.h"
#include "graph_test_util.h"
#include "sim/emulator.h"
#include "sim/fused_requantization.h"

namespace example_npu {
namespace {

using test_util::SmallL1;

// An int8 depthwise convolution with TFLite's rounding (per-channel scales and bias, a relu)
// followed by a pointwise one with TVM's: the emulator computes their requantization steps
// inside the convolutions' steps, and reads the depthwise tiles' inputs in place.
const char* kQuantized = R"({"version": 1, "symbol": "q", "nodes": [
  {"op": "input", "name": "x", "shape": [1, 12, 10, 32], "dtype": "int8"},
  {"op": "const", "name": "dw", "shape": [3, 3, 1, 32], "dtype": "int8"},
  {"op": "const", "name": "pw", "shape": [1, 1, 32, 24], "dtype": "int8"},
  {"op": "qnn.conv2d", "name": "d", "inputs": [0, 1], "shape": [1, 12, 10, 32], "dtype": "int8",
   "attrs": {"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 32,
             "data_layout": "NHWC", "kernel_layout": "HWIO", "out_layout": "NHWC",
             "input_scale": 0.05, "input_zero_point": -3, "weight_scales": [0.0020, 0.0021, 0.0022, 0.0023, 0.0024, 0.0025, 0.0026, 0.0027, 0.0028, 0.0029, 0.0030, 0.0031, 0.0032, 0.0033, 0.0034, 0.0035, 0.0036, 0.0037, 0.0038, 0.0039, 0.0040, 0.0041, 0.0042, 0.0043, 0.0044, 0.0045, 0.0046, 0.0047, 0.0048, 0.0049, 0.0050, 0.0051],
             "bias": [-100, -63, -26, 11, 48, 85, -78, -41, -4, 33, 70, -93, -56, -19, 18, 55, 92, -71, -34, 3, 40, 77, -86, -49, -12, 25, 62, 99, -64, -27, 10, 47], "output_scale": 0.04, "output_zero_point": -128,
             "min_value": 0.0, "rounding": "tflite"}},
  {"op": "qnn.conv2d", "name": "p", "inputs": [3, 2], "shape": [1, 12, 10, 24], "dtype": "int8",
   "attrs": {"strides": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": 1,
             "data_layout": "NHWC", "kernel_layout": "HWIO", "out_layout": "NHWC",
             "input_scale": 0.04, "input_zero_point": -128, "weight_scales": [0.0030, 0.0032, 0.0034, 0.0036, 0.0038, 0.0040, 0.0042, 0.0044, 0.0046, 0.0048, 0.0050, 0.0052, 0.0054, 0.0056, 0.0058, 0.0060, 0.0062, 0.0064, 0.0066, 0.0068, 0.0070, 0.0072, 0.0074, 0.0076],
             "output_scale": 0.1, "output_zero_point": 5}}],
  "arg_nodes": [0], "heads": [4]})";

TEST(FusedRequantizationTest, RequantizationInsideTheOpStepComputesTheSameBits) {
  std::mt19937 rng(8);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::vector<int8_t> x(32 * 12 * 10), dw(32 * 9), pw(24 * 32);
  for (std::vector<int8_t>* v : {&x, &dw, &pw}) {
    for (int8_t& b : *v) b = static_cast<int8_t>(byte(rng));
  }
  for (const NPUConfig& config : {NPUConfig(), SmallL1()}) {
    const Program program = Compile(ParseGraph(kQuantized), config);
    std::vector<std::vector<int8_t>> results;
    for (bool fuse : {true, false}) {
      for (bool forward : {true, false}) {
        const Emulator emulator(program, EmulatorOptions{forward, fuse});
        const FusedRequantization& fused = emulator.fused_requantization();
        EXPECT_EQ(fused.steps.empty(), !fuse);
        // The pointwise result only goes to DRAM: its tiles hold the int8 outputs themselves.
        const bool narrowed =
            std::any_of(fused.steps.begin(), fused.steps.end(),
                        [](const auto& step) { return step.type == kernels::SumsType::kInt8; });
        EXPECT_EQ(narrowed, fuse);
        // ... and where a tile's store is a dense run (whole rows of the default L1's tiles),
        // the step writes into DRAM itself, only when forwarding.
        const bool into_dram = std::any_of(fused.steps.begin(), fused.steps.end(),
                                           [](const auto& step) { return step.dram.valid(); });
        if (!forward || !fuse) EXPECT_FALSE(into_dram);
        if (forward && fuse && config.l1_sram_kb == NPUConfig().l1_sram_kb) EXPECT_TRUE(into_dram);
        // The small L1's depthwise tiles (boxes of x's rows and pixels) read their int8 input
        // where it lies in DRAM, only when forwarding; the default L1 loads x whole.
        bool views = false;
        for (const std::vector<DramRef>& from : emulator.transfers().input_from) {
          views |= !from.empty() && from[0].view >= 0;
        }
        EXPECT_EQ(views, forward && config.l1_sram_kb == SmallL1().l1_sram_kb);
        results.push_back(
            test_util::EmulatedInt8(emulator, x, {dw.data(), pw.data()}, 12 * 10 * 24));
      }
    }
    for (size_t i = 1; i < results.size(); ++i) EXPECT_EQ(results[i], results[0]) << i;
  }
}

}  // namespace
}  // namespace example_npu
