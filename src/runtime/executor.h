/*!
 * \file runtime/executor.h
 * \brief Runs one NPU function: compiles its graph once for an NPUConfig, then emulates the
 * command stream on caller-provided DLTensors.
 *
 * Independent of the TVM module protocol (npu_module.cc adapts it), so it is unit-tested from
 * C++ alone. Run() keeps all state of a run local, so one executor may serve several threads.
 */
#ifndef EXAMPLE_NPU_RUNTIME_EXECUTOR_H_
#define EXAMPLE_NPU_RUNTIME_EXECUTOR_H_

#include <tvm/ffi/container/tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compiler/command_stream.h"
#include "config/npu_config.h"
#include "graph/graph.h"
#include "sim/emulator.h"
#include "sim/timing.h"

namespace example_npu {

/*! \brief The DLPack type of a graph dtype (what caller tensors must carry). */
DLDataType ToDLDataType(DType dtype);

class Executor {
 public:
  /*!
   * \brief Compiles `graph` for `config`. Throws ValueError when the graph uses a dtype the
   * emulator cannot execute (float32 and float16 run; float16 accumulates in float32) or when a
   * group cannot be tiled into the configured memories.
   */
  explicit Executor(Graph graph, NPUConfig config = NPUConfig());
  // The emulator refers to program_, so an executor stays where it was built.
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  const Graph& graph() const { return program_.graph; }
  const Program& program() const { return program_; }
  /*!
   * \brief The emulator that runs program(): its transfer plan and dataflow are built on the
   * first run (or call), not at compile time, so a model compiled for its profile alone does not
   * wait for them. The emulator options are read from the environment when the executor is built.
   */
  const Emulator& emulator() const;
  /*!
   * \brief Cycles, traffic and energy of one run as the Profile JSON. Static (it depends on
   * shapes, not values), so it is simulated and serialised once, when first asked for (not at
   * build time: compiling a model does not wait for a profile nobody reads).
   */
  const std::string& profile_json() const;

  /*! \brief Binds the const-node tensors, in Graph::ConstNames() order; checks shape and dtype. */
  void SetConstants(std::vector<tvm::ffi::Tensor> constants);

  /*!
   * \brief Computes every head into outputs. Checks count, dtype, shape, device and contiguity of
   * each argument first and throws ValueError / TypeError naming the offending argument. A graph
   * with runtime parameters (graph/runtime_params.h) is compiled for the values it is called
   * with (once per distinct set of values).
   */
  void Run(const std::vector<const DLTensor*>& inputs, const std::vector<DLTensor*>& outputs) const;

 private:
  /*! \brief The program compiled for one set of runtime parameter values. */
  struct Bound {
    Program program;
    std::unique_ptr<Emulator> emulator;
  };
  /*! \brief The program bound to the runtime parameters among inputs; null without any. */
  std::shared_ptr<const Bound> BoundFor(const std::vector<const DLTensor*>& inputs) const;

  Program program_;
  EmulatorOptions emulator_options_;
  mutable std::once_flag emulator_once_;
  mutable std::unique_ptr<Emulator> emulator_;
  NPUConfig config_;
  mutable std::mutex bound_mu_;
  mutable std::map<std::vector<uint64_t>, std::shared_ptr<const Bound>> bound_;  // value bits
  mutable std::once_flag profile_once_;
  mutable std::string profile_json_;
  std::vector<tvm::ffi::Tensor> constants_;
  bool constants_bound_ = false;
  int64_t constants_version_ = 0;  // counts SetConstants calls (see DramBindings)
};

}  // namespace example_npu

#endif  // EXAMPLE_NPU_RUNTIME_EXECUTOR_H_
