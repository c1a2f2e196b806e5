/*!
 * \file graph/graph.h
 * \brief The NPU graph: what the Python codegen serialises for one partitioned Relax function.
 *
 * JSON format (version 1), modelled on TVM's JSON runtime graph:
 * \code
 * {"version": 1, "symbol": "fused_..._example_npu",
 *  "nodes": [{"op": "input", "name": "x", "shape": [2, 4], "dtype": "float32"},
 *            {"op": "const", "name": "<symbol>_example_npu_const_0", "shape": [..], "dtype": ..},
 *            {"op": "matmul", "name": "lv", "inputs": [0, 1], "shape": [2, 8],
 *             "dtype": "float32", "attrs": {...}, "composite": "example_npu.matmul"}],
 *  "arg_nodes": [0], "heads": [2]}
 * \endcode
 * Nodes are in topological order and every node produces exactly one tensor. arg_nodes lists the
 * input nodes in call-argument order; heads lists the node ids of the outputs in order.
 */
#ifndef EXAMPLE_NPU_GRAPH_GRAPH_H_
#define EXAMPLE_NPU_GRAPH_GRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "graph/op.h"

namespace example_npu {

using Shape = kernels::Shape;

enum class NodeKind { kInput, kConst, kOp };

struct Node {
  NodeKind kind = NodeKind::kOp;
  std::string name;
  /*! \brief Meaningful only for kOp nodes. */
  OpKind op = OpKind::kRelu;
  OpAttrs attrs;
  std::vector<int64_t> inputs;
  Shape shape;
  DType dtype = DType::kFloat32;
  /*! \brief The pattern (Relax Composite) this node came from, for reports. */
  std::string composite;
};

struct Graph {
  std::string symbol;
  /*! \brief The optional "npu_config" object (the NPUConfig it was compiled for), as JSON. */
  std::string npu_config_json;
  std::vector<Node> nodes;
  std::vector<int64_t> arg_nodes;
  std::vector<int64_t> heads;
  /*!
   * \brief Input nodes whose values are attributes of other nodes ({"arg": id}, see
   * runtime_params.h); the graph was parsed with placeholder values. Empty for most graphs.
   */
  std::vector<int64_t> runtime_param_inputs;
  /*! \brief The JSON as given, kept when runtime_param_inputs is not empty (to bind later). */
  std::string unbound_json;

  /*! \brief Names of the const nodes in node order: the order __init_ receives their tensors. */
  std::vector<std::string> ConstNames() const;
  /*! \brief Node ids of the const nodes, parallel to ConstNames(). */
  std::vector<int64_t> ConstNodes() const;
};

/*!
 * \brief Parses and validates a graph; throws tvm::ffi::Error(ValueError) naming the first problem
 * (malformed JSON, unknown op, bad attribute, dangling input, inconsistent shape or dtype).
 */
Graph ParseGraph(const std::string& json_text);

/*!
 * \brief Checks that inputs name earlier nodes and op arities, then resolves negative / default
 * axes (softmax, batch_norm, permute_dims) against input ranks. Called by ParseGraph; throws.
 */
void NormalizeAxes(Graph* graph);

/*!
 * \brief Checks structure, dtypes and that every op node's declared shape equals the shape its op
 * computes from its inputs and attributes. Called by ParseGraph; throws ValueError.
 */
void ValidateGraph(const Graph& graph);

/*! \brief conv1d shapes seen as conv2d shapes (a unit H dim inserted); rank-4 shapes pass through.
 */
Shape LiftConv1dData(const Shape& shape, kernels::DataLayout layout);
Shape LiftConv1dWeight(const Shape& shape, kernels::KernelLayout layout);

/*! \brief The output shape an op node computes from its input shapes; throws ValueError. */
Shape InferShape(const Node& node, const std::vector<const Shape*>& input_shapes);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_GRAPH_GRAPH_H_
