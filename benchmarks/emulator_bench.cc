/*!
 * \file benchmarks/emulator_bench.cc
 * \brief Times Executor::Run on one NPU graph JSON without Python or TVM in the process, so a
 * profiler (perf, callgrind) sees only the emulator.
 *
 *     emulator_bench GRAPH.json [RUNS]   (RUNS timed runs after one warm-up; default 50;
 *                                         0: compile and plan only, for profiling the compiler)
 *
 * Graph JSON files come from `python benchmarks/dump_graphs.py DIR`. Inputs and constants are
 * filled with seeded values in [-1, 1) (integer tensors with small integers, so ids are in range);
 * prints the compile time and the median run time in milliseconds.
 */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/executor.h"

namespace example_npu {
namespace {

/*! \brief Host memory for one graph node, exposed as a DLTensor. */
class HostTensor {
 public:
  HostTensor(const Node& node, std::mt19937* rng) : node_(node) {
    const int64_t bytes = kernels::NumElements(node.shape) * DTypeBytes(node.dtype);
    storage_.resize((bytes + 7) / 8);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    if (node.dtype == DType::kFloat32) {
      float* data = reinterpret_cast<float*>(storage_.data());
      for (int64_t i = 0; i < kernels::NumElements(node.shape); ++i) data[i] = uniform(*rng);
    } else if (node.dtype == DType::kInt64 || node.dtype == DType::kInt32) {
      // Whole elements 0 or 1: the ids a gather (an embedding lookup) reads must be in range.
      for (int64_t i = 0; i < kernels::NumElements(node.shape); ++i) {
        const int64_t value = (*rng)() % 2;
        std::memcpy(reinterpret_cast<uint8_t*>(storage_.data()) + i * DTypeBytes(node.dtype),
                    &value, DTypeBytes(node.dtype));  // little-endian: the low bytes
      }
    } else {
      uint8_t* data = reinterpret_cast<uint8_t*>(storage_.data());
      for (int64_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>((*rng)() % 7);
    }
  }

  DLTensor* dl() {
    tensor_ = DLTensor{};
    tensor_.data = storage_.data();
    tensor_.device = DLDevice{kDLCPU, 0};
    tensor_.ndim = static_cast<int32_t>(node_.shape.size());
    tensor_.dtype = ToDLDataType(node_.dtype);
    tensor_.shape = const_cast<int64_t*>(node_.shape.data());
    return &tensor_;
  }

 private:
  const Node& node_;
  std::vector<uint64_t> storage_;
  DLTensor tensor_{};
};

double Milliseconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: emulator_bench GRAPH.json [RUNS]\n";
    return 2;
  }
  std::ifstream file(argv[1]);
  std::stringstream text;
  text << file.rdbuf();
  const int runs = argc > 2 ? std::max(0, std::atoi(argv[2])) : 50;

  auto start = std::chrono::steady_clock::now();
  Graph graph = ParseGraph(text.str());
  NPUConfig config =
      graph.npu_config_json.empty() ? NPUConfig() : NPUConfig::FromJSON(graph.npu_config_json);
  Executor executor(std::move(graph), config);
  const double compile_ms = Milliseconds(std::chrono::steady_clock::now() - start);
  // The emulator's transfer plan and dataflow, built when the executor first runs.
  start = std::chrono::steady_clock::now();
  executor.emulator();
  const double plan_ms = Milliseconds(std::chrono::steady_clock::now() - start);
  if (runs == 0) {
    std::cout << "compile " << compile_ms << " ms, emulator plan " << plan_ms << " ms, "
              << executor.program().commands.size() << " commands\n";
    return 0;
  }

  std::mt19937 rng(0);
  const Graph& g = executor.graph();
  std::vector<HostTensor> inputs, outputs;
  std::vector<HostTensor> constants;
  for (int64_t id : g.arg_nodes) inputs.emplace_back(g.nodes[id], &rng);
  for (int64_t id : g.heads) outputs.emplace_back(g.nodes[id], &rng);
  // Constants borrow HostTensor storage, so the vector must not reallocate.
  struct Borrowed {
    void* data;
    void AllocData(DLTensor* t) { t->data = data; }
    void FreeData(DLTensor*) {}
  };
  std::vector<int64_t> const_ids = g.ConstNodes();
  constants.reserve(const_ids.size());
  std::vector<tvm::ffi::Tensor> const_tensors;
  for (int64_t id : const_ids) {
    const Node& node = g.nodes[id];
    DLTensor* host = constants.emplace_back(node, &rng).dl();
    const_tensors.push_back(tvm::ffi::Tensor::FromNDAlloc(
        Borrowed{host->data}, tvm::ffi::Shape(node.shape.begin(), node.shape.end()), host->dtype,
        host->device));
  }
  executor.SetConstants(const_tensors);

  std::vector<const DLTensor*> in;
  std::vector<DLTensor*> out;
  for (HostTensor& t : inputs) in.push_back(t.dl());
  for (HostTensor& t : outputs) out.push_back(t.dl());
  executor.Run(in, out);  // warm-up
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    start = std::chrono::steady_clock::now();
    executor.Run(in, out);
    times.push_back(Milliseconds(std::chrono::steady_clock::now() - start));
  }
  std::sort(times.begin(), times.end());
  const std::vector<GroupSchedule>& schedules = executor.emulator().dataflow().groups;
  for (size_t i = 0; i < schedules.size(); ++i) {
    const GroupInfo& info = executor.program().groups[i];
    std::string tile;
    for (int64_t e : info.tile_shape) tile += (tile.empty() ? "" : "x") + std::to_string(e);
    std::printf("  group %s: %s%s, %ld tiles of %s, commands [%ld, %ld)\n", info.name.c_str(),
                schedules[i].concurrent ? "concurrent" : "in order",
                schedules[i].tile_order.empty() ? "" : " (tiles by operand)",
                static_cast<long>(info.tiles), tile.c_str(), static_cast<long>(schedules[i].begin),
                static_cast<long>(schedules[i].end));
  }
  std::printf("  %ld of the DMA commands forwarded\n",
              static_cast<long>(executor.emulator().transfers().forwarded()));
  const FusedRequantization& fused = executor.emulator().fused_requantization();
  long integers = 0, into_dram = 0;
  for (const FusedRequantization::Step& step : fused.steps) {
    integers += step.type != kernels::SumsType::kFloat32;
    into_dram += step.dram.valid();
  }
  std::printf("  %ld requantization steps fused (%ld write integers, %ld of them into DRAM)\n",
              static_cast<long>(fused.steps.size()), integers, into_dram);
  const MergedColumnTiles& merged = executor.emulator().merged_column_tiles();
  long members = 0;
  for (const MergedColumnTiles::Merge& merge : merged.merges) members += merge.members.size();
  std::printf("  %ld column tiles computed as %ld calls\n", members,
              static_cast<long>(merged.merges.size()));
  const MergedMatmulTiles& matmuls = executor.emulator().merged_matmul_tiles();
  long merged_commands = std::count(matmuls.merged_away.begin(), matmuls.merged_away.end(), true);
  long chains = 0, steps = 0;
  for (const MergedMatmulTiles::Chains& group : matmuls.at_group_start) {
    chains += group.size();
    for (const std::vector<MergedMatmulTiles::Step>& chain : group) steps += chain.size();
  }
  std::printf("  %ld commands of float32 matmul tiles computed as %ld chains of %ld GEMMs\n",
              merged_commands, chains, steps);
  size_t deps = 0;
  for (const Command& command : executor.program().commands) deps += command.deps.size();
  std::printf(
      "%s: compile %.2f ms (+ emulator plan %.2f ms at the first run), run median %.5f ms (min "
      "%.5f) over %d runs, %zu commands, %zu dependencies\n",
      g.symbol.c_str(), compile_ms, plan_ms, times[times.size() / 2], times.front(), runs,
      executor.program().commands.size(), deps);
  return 0;
}

}  // namespace
}  // namespace example_npu

int main(int argc, char** argv) { return example_npu::Main(argc, argv); }
