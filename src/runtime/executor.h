/*!
 * \file runtime/executor.h
 * \brief Runs a validated NPU graph on caller-provided DLTensors, node by node.
 *
 * The executor is independent of the TVM module protocol (npu_module.cc adapts it), so it can be
 * unit-tested from C++ alone. Run() keeps all intermediate state on its own stack, so one executor
 * may be called from several threads at once.
 */
#ifndef EXAMPLE_NPU_RUNTIME_EXECUTOR_H_
#define EXAMPLE_NPU_RUNTIME_EXECUTOR_H_

#include <tvm/ffi/container/tensor.h>

#include <vector>

#include "graph/graph.h"

namespace example_npu {

class Executor {
 public:
  /*! \brief Throws ValueError when the graph uses a dtype the kernels cannot execute yet. */
  explicit Executor(Graph graph);

  const Graph& graph() const { return graph_; }

  /*! \brief Binds the const-node tensors, in Graph::ConstNames() order; checks shape and dtype. */
  void SetConstants(std::vector<tvm::ffi::Tensor> constants);

  bool HasConstants() const { return constants_bound_; }

  /*!
   * \brief Computes every head into outputs. Checks count, dtype, shape, device and contiguity of
   * each argument first and throws ValueError / TypeError naming the offending argument.
   */
  void Run(const std::vector<const DLTensor*>& inputs, const std::vector<DLTensor*>& outputs) const;

 private:
  Graph graph_;
  /*!
   * \brief Per node: a 2-D permute_dims whose only consumer is a matmul's rhs (the Linear form).
   * Such a node is not computed; the matmul reads the untransposed weight (MatmulTransposedRhs).
   */
  std::vector<bool> folded_transpose_;
  std::vector<tvm::ffi::Tensor> constants_;
  bool constants_bound_ = false;
};

}  // namespace example_npu

#endif  // EXAMPLE_NPU_RUNTIME_EXECUTOR_H_
