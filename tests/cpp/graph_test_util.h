/*!
 * \file tests/cpp/graph_test_util.h
 * \brief Whole-graph helpers of the compiler tests: seeded tensors for a graph's nodes, the
 * untiled evaluation of every node with the engines' kernels, and the emulated run of a compiled
 * program, so that a tiled command stream can be compared with the whole-tensor kernels.
 */
#ifndef EXAMPLE_NPU_TESTS_CPP_GRAPH_TEST_UTIL_H_
#define EXAMPLE_NPU_TESTS_CPP_GRAPH_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "compiler/compiler.h"
#include "sim/emulator.h"
#include "sim/engines.h"
#include "test_util.h"

namespace example_npu {
namespace test_util {

/*! \brief Standard-normal float32 values for each node in `ids`, from `seed`. */
inline std::vector<std::vector<float>> RandomTensors(const Graph& graph,
                                                     const std::vector<int64_t>& ids,
                                                     uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<std::vector<float>> tensors;
  for (int64_t id : ids) {
    std::vector<float> values(kernels::NumElements(graph.nodes[id].shape));
    for (float& v : values) v = dist(rng);
    tensors.push_back(values);
  }
  return tensors;
}

/*! \brief Whole-tensor evaluation of every node with the same engines, no tiling. */
inline std::vector<std::vector<float>> Untiled(const Graph& graph,
                                               const std::vector<std::vector<float>>& inputs,
                                               const std::vector<std::vector<float>>& consts) {
  std::vector<std::vector<float>> values(graph.nodes.size());
  for (size_t i = 0; i < graph.arg_nodes.size(); ++i) values[graph.arg_nodes[i]] = inputs[i];
  std::vector<int64_t> const_ids = graph.ConstNodes();
  for (size_t i = 0; i < const_ids.size(); ++i) values[const_ids[i]] = consts[i];
  for (size_t id = 0; id < graph.nodes.size(); ++id) {
    const Node& node = graph.nodes[id];
    if (node.kind != NodeKind::kOp) continue;
    std::vector<OperandF32> operands;
    std::vector<Shape> shapes;
    shapes.reserve(node.inputs.size());
    for (int64_t input : node.inputs) shapes.push_back(graph.nodes[input].shape);
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      operands.push_back(OperandF32{values[node.inputs[k]].data(), &shapes[k]});
    }
    values[id].resize(kernels::NumElements(node.shape));
    RunOp(node.op, node.attrs, operands, values[id].data(), node.shape);
  }
  return values;
}

/*! \brief The default NPU with a 16 KB L1: more tiles, halos and split reductions. */
inline NPUConfig SmallL1() {
  NPUConfig config;
  config.l1_sram_kb = 16;
  return config;
}

/*! \brief The int8 output (`size` elements) of `emulator`'s program on an int8 input. */
inline std::vector<int8_t> EmulatedInt8(const Emulator& emulator, const std::vector<int8_t>& input,
                                        const std::vector<const void*>& constants, size_t size) {
  std::vector<int8_t> out(size, 0);
  DramBindings dram;
  dram.inputs = {input.data()};
  dram.constants = constants;
  dram.outputs = {out.data()};
  emulator.Run(dram);
  return out;
}

/*! \brief The first output of `program` run by the emulator (a float32 output). */
inline std::vector<float> Emulated(const Program& program,
                                   const std::vector<std::vector<float>>& inputs,
                                   const std::vector<std::vector<float>>& consts,
                                   EmulatorOptions options = EmulatorOptions()) {
  std::vector<float> out(kernels::NumElements(program.graph.nodes[program.graph.heads[0]].shape));
  DramBindings dram;
  for (const auto& input : inputs) dram.inputs.push_back(input.data());
  for (const auto& c : consts) dram.constants.push_back(c.data());
  dram.outputs.push_back(out.data());
  Emulator(program, options).Run(dram);
  return out;
}

/*!
 * \brief Compiles `graph` for each of `configs` and expects the emulated head within `tolerance`
 * (absolute plus relative; 0 asks for the same bits) of the untiled evaluation, with forwarding
 * on and off. Inputs are seeded from `seed`, constants from `seed + 1`; `inspect` sees each
 * program before it runs (its plans, its groups).
 */
inline void ExpectTiledRunsMatchUntiled(
    const Graph& graph, const std::vector<NPUConfig>& configs, uint32_t seed, double tolerance,
    const std::function<void(const Program&, const NPUConfig&)>& inspect = nullptr) {
  const auto inputs = RandomTensors(graph, graph.arg_nodes, seed);
  const auto consts = RandomTensors(graph, graph.ConstNodes(), seed + 1);
  const std::vector<float> expected = Untiled(graph, inputs, consts)[graph.heads[0]];
  for (const NPUConfig& config : configs) {
    const Program program = Compile(graph, config);
    if (inspect) inspect(program, config);
    const std::vector<float> actual = Emulated(program, inputs, consts);
    const std::string context = "L1 " + std::to_string(config.l1_sram_kb) + " KB, " +
                                std::to_string(program.groups.size()) + " groups";
    kernels::test_util::ExpectAllClose(actual, expected, context, tolerance, tolerance);
    // Forwarding skips copies only: moving every byte through L1 gives the same bits.
    EXPECT_EQ(Emulated(program, inputs, consts, EmulatorOptions{false}), actual) << context;
  }
}

}  // namespace test_util
}  // namespace example_npu

#endif  // EXAMPLE_NPU_TESTS_CPP_GRAPH_TEST_UTIL_H_
