/*!
 * \file tests/cpp/test_norm.cc
 * \brief group_norm / instance_norm: the kernel against a double-precision two-pass reference,
 * bit for bit against TVM's one-pass float32 formula, and tiled (whole groups, or groups larger
 * than L1 streamed twice) equal to the whole-tensor kernel bit for bit.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "compiler/compiler.h"
#include "graph_test_util.h"
#include "kernels/norm.h"
#include "test_util.h"

namespace example_npu {
namespace kernels {
namespace {

using test_util::ExpectAllClose;
using test_util::RandomVector;
using test_util::Unravel;

/*! \brief Group index and reduced-set membership of one element, by the definition. */
std::vector<double> NaiveGroupNorm(const std::vector<float>& x, const Shape& shape,
                                   const GroupNormParams& p, const std::vector<float>& gamma,
                                   const std::vector<float>& beta, std::vector<float>* tvm_bits) {
  const int64_t channels = shape[p.channel_axis], per_group = channels / p.groups;
  // Key of an element: its coordinates outside the reduced set, with the channel's group.
  auto key = [&](const std::vector<int64_t>& index) {
    std::vector<int64_t> k;
    for (size_t d = 0; d < shape.size(); ++d) {
      const int64_t axis = static_cast<int64_t>(d);
      if (axis == p.channel_axis) {
        k.push_back(index[d] / per_group);
      } else if (std::find(p.axes.begin(), p.axes.end(), axis) == p.axes.end()) {
        k.push_back(index[d]);
      }
    }
    return k;
  };
  std::map<std::vector<int64_t>, std::vector<int64_t>> members;  // in row-major order per group
  for (int64_t i = 0; i < NumElements(shape); ++i) members[key(Unravel(i, shape))].push_back(i);
  std::vector<double> out(x.size());
  tvm_bits->resize(x.size());
  for (const auto& [k, elements] : members) {
    double mean = 0.0, var = 0.0;
    for (int64_t i : elements) mean += x[i];
    mean /= elements.size();
    for (int64_t i : elements) var += (x[i] - mean) * (x[i] - mean);
    var /= elements.size();
    // TVM's formula in float32 (sums in the group's row-major order of the split space, which
    // is the tensor's row-major order restricted to the group only for channel-first layouts;
    // the tests use such layouts for the bitwise comparison).
    float s = 0.0f, s2 = 0.0f;
    for (int64_t i : elements) {
      s += x[i];
      s2 += x[i] * x[i];
    }
    const float n = static_cast<float>(elements.size());
    const float fmean = s / n, fvar = s2 / n - fmean * fmean;
    for (int64_t i : elements) {
      const int64_t c = Unravel(i, shape)[p.channel_axis];
      out[i] = (x[i] - mean) / std::sqrt(var + p.epsilon) * gamma[c] + beta[c];
      const float normalized = (x[i] - fmean) * (1.0f / std::sqrt(fvar + p.epsilon));
      (*tvm_bits)[i] = normalized * gamma[c] + beta[c];
    }
  }
  return out;
}

TEST(GroupNormTest, MatchesTheDefinitionAndTvmsFloat32Formula) {
  std::mt19937 rng(23);
  struct Case {
    Shape shape;
    GroupNormParams p;
  };
  const std::vector<Case> cases = {
      {{2, 8, 5, 6}, {1, 4, {2, 3}, 1e-5f}},     // GroupNorm(4, 8)
      {{1, 6, 7, 3}, {1, 6, {2, 3}, 1e-3f}},     // InstanceNorm: one channel per group
      {{3, 4, 10}, {1, 2, {2}, 1e-5f}},          // 1-D
      {{2, 4, 3, 3}, {1, 4, {0, 2, 3}, 1e-5f}},  // the torch importer's instance norm axes
  };
  for (const Case& c : cases) {
    const std::vector<float> x = RandomVector(NumElements(c.shape), &rng, -3.0f, 5.0f);
    const int64_t channels = c.shape[c.p.channel_axis];
    const std::vector<float> gamma = RandomVector(channels, &rng, 0.5f, 1.5f);
    const std::vector<float> beta = RandomVector(channels, &rng);
    std::vector<float> y(x.size()), tvm_bits;
    GroupNorm(x.data(), c.shape, c.p, gamma.data(), beta.data(), y.data());
    ExpectAllClose(y, NaiveGroupNorm(x, c.shape, c.p, gamma, beta, &tvm_bits), "group_norm", 1e-4,
                   1e-4);
    if (c.p.axes.front() > c.p.channel_axis) EXPECT_EQ(y, tvm_bits);
  }
}

}  // namespace
}  // namespace kernels

namespace {

std::string NormGraph(const std::string& op, const std::string& shape, int64_t channels,
                      const std::string& attrs) {
  const std::string c = std::to_string(channels);
  return R"({"version": 1, "symbol": "norm", "nodes": [
    {"op": "input", "name": "x", "shape": )" +
         shape + R"(, "dtype": "float32"},
    {"op": "const", "name": "gamma", "shape": [)" +
         c + R"(], "dtype": "float32"},
    {"op": "const", "name": "beta", "shape": [)" +
         c + R"(], "dtype": "float32"},
    {"op": ")" +
         op + R"(", "name": "n", "inputs": [0, 1, 2], "shape": )" + shape +
         R"(, "dtype": "float32", "attrs": )" + attrs + R"(},
    {"op": "sigmoid", "name": "gate", "inputs": [3], "shape": )" +
         shape + R"(, "dtype": "float32"},
    {"op": "multiply", "name": "silu", "inputs": [3, 4], "shape": )" +
         shape + R"(, "dtype": "float32"}],
    "arg_nodes": [0], "heads": [5]})";
}

void ExpectTiledNormMatches(const std::string& json, bool expect_streaming) {
  const Graph graph = ParseGraph(json);
  const auto inputs = test_util::RandomTensors(graph, graph.arg_nodes, 3);
  const auto consts = test_util::RandomTensors(graph, graph.ConstNodes(), 4);
  const std::vector<float> expected = test_util::Untiled(graph, inputs, consts)[graph.heads[0]];
  NPUConfig tiny;
  tiny.l1_sram_kb = 4;
  for (const NPUConfig& config : {NPUConfig(), tiny}) {
    const Program program = Compile(graph, config);
    // SiLU fuses into the normalisation: one group.
    EXPECT_EQ(program.groups.size(), 1u);
    EXPECT_EQ(test_util::Emulated(program, inputs, consts), expected)
        << "L1 " << config.l1_sram_kb << " KB";
    if (config.l1_sram_kb == 4) {
      // Streaming reads every chunk twice: twice the input bytes of one pass.
      int64_t loaded = 0;
      for (const Command& command : program.commands) {
        if (command.is_dma() && !command.dma().store &&
            command.dma().view.tensor == graph.arg_nodes[0]) {
          loaded += kernels::NumElements(command.dma().box.extent);
        }
      }
      const int64_t elements = kernels::NumElements(graph.nodes[graph.arg_nodes[0]].shape);
      EXPECT_EQ(loaded, expect_streaming ? 2 * elements : elements);
    }
  }
}

TEST(NormGraphTest, WholeGroupsAndStreamedGroupsEqualTheWholeTensorKernel) {
  // Groups of 4 x 16 x 16 floats (4 KB) do not fit a 4 KB L1 twice: they stream.
  ExpectTiledNormMatches(
      NormGraph("nn.group_norm", "[1, 16, 16, 16]", 16,
                R"({"num_groups": 4, "channel_axis": 1, "axes": [2, 3], "epsilon": 1e-5,
                    "center": true, "scale": true})"),
      true);
  // 8 x 8 instance planes fit: several per tile.
  ExpectTiledNormMatches(
      NormGraph("nn.instance_norm", "[2, 12, 8, 8]", 12,
                R"({"channel_axis": 1, "axes": [2, 3], "epsilon": 1e-5, "center": true,
                    "scale": true})"),
      false);
  // Channels last (NHWC): each group is a strided box.
  ExpectTiledNormMatches(
      NormGraph("nn.group_norm", "[1, 6, 5, 8]", 8,
                R"({"num_groups": 2, "channel_axis": -1, "axes": [1, 2], "epsilon": 1e-5,
                    "center": true, "scale": true})"),
      false);
}

TEST(NormGraphTest, CenterOrScaleOffIsRefused) {
  kernels::test_util::ExpectValueError(
      [] {
        ParseGraph(NormGraph("nn.group_norm", "[1, 4, 2, 2]", 4,
                             R"({"num_groups": 2, "channel_axis": 1, "axes": [2, 3],
                                 "epsilon": 1e-5, "center": false, "scale": true})"));
      },
      "center");
}

}  // namespace
}  // namespace example_npu
