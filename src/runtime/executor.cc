#include "runtime/executor.h"

#include <tvm/ffi/error.h>

#include <cstring>
#include <sstream>
#include <string>
#include <utility>

namespace example_npu {
namespace {

std::string ShapeStr(const int64_t* dims, int ndim) {
  std::ostringstream os;
  os << "(";
  for (int i = 0; i < ndim; ++i) os << (i ? ", " : "") << dims[i];
  os << (ndim == 1 ? ",)" : ")");
  return os.str();
}

DLDataType ToDLDataType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return DLDataType{kDLFloat, 32, 1};
    case DType::kFloat16:
      return DLDataType{kDLFloat, 16, 1};
    case DType::kInt8:
      return DLDataType{kDLInt, 8, 1};
    case DType::kInt16:
      return DLDataType{kDLInt, 16, 1};
    case DType::kInt32:
      return DLDataType{kDLInt, 32, 1};
  }
  return DLDataType{kDLFloat, 32, 1};
}

bool IsCompact(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  int64_t expected = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

/*! \brief Checks that a caller tensor matches the node it binds to; `what` names it in errors. */
void CheckTensor(const DLTensor& t, const Node& node, const std::string& what) {
  if (t.device.device_type != kDLCPU) {
    TVM_FFI_THROW(ValueError) << what << " must be on the CPU (the NPU emulator reads host memory)";
  }
  DLDataType expected = ToDLDataType(node.dtype);
  if (t.dtype.code != expected.code || t.dtype.bits != expected.bits || t.dtype.lanes != 1) {
    TVM_FFI_THROW(TypeError) << what << " has dtype code " << static_cast<int>(t.dtype.code)
                             << " bits " << static_cast<int>(t.dtype.bits) << ", expected "
                             << DTypeName(node.dtype);
  }
  Shape shape(t.shape, t.shape + t.ndim);
  if (shape != node.shape) {
    TVM_FFI_THROW(ValueError) << what << " has shape " << ShapeStr(t.shape, t.ndim) << ", expected "
                              << ShapeStr(node.shape.data(), node.shape.size());
  }
  if (!IsCompact(t)) TVM_FFI_THROW(ValueError) << what << " must be contiguous";
  if (t.data == nullptr && kernels::NumElements(shape) > 0) {
    TVM_FFI_THROW(ValueError) << what << " has no data";
  }
}

template <typename T>
T* DataPtr(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

kernels::BinaryOp ToBinaryOp(OpKind op) {
  switch (op) {
    case OpKind::kSubtract:
      return kernels::BinaryOp::kSubtract;
    case OpKind::kMultiply:
      return kernels::BinaryOp::kMultiply;
    case OpKind::kDivide:
      return kernels::BinaryOp::kDivide;
    default:
      return kernels::BinaryOp::kAdd;
  }
}

kernels::UnaryOp ToUnaryOp(OpKind op) {
  switch (op) {
    case OpKind::kClip:
      return kernels::UnaryOp::kClip;
    case OpKind::kSigmoid:
      return kernels::UnaryOp::kSigmoid;
    case OpKind::kTanh:
      return kernels::UnaryOp::kTanh;
    case OpKind::kGelu:
      return kernels::UnaryOp::kGelu;
    case OpKind::kGeluTanh:
      return kernels::UnaryOp::kGeluTanh;
    default:
      return kernels::UnaryOp::kRelu;
  }
}

/*! \brief Runs one op node; `in` are its input buffers, parallel to node.inputs. */
void RunNode(const Graph& graph, const Node& node, const std::vector<const float*>& in,
             float* out) {
  auto in_shape = [&](size_t i) -> const Shape& { return graph.nodes[node.inputs[i]].shape; };
  switch (node.op) {
    case OpKind::kMatmul:
      kernels::Matmul(in[0], in_shape(0), in[1], in_shape(1), out, node.shape);
      return;
    case OpKind::kPermuteDims:
      kernels::Transpose(in[0], in_shape(0), std::get<PermuteDimsAttrs>(node.attrs).axes, out);
      return;
    case OpKind::kConv1d:
    case OpKind::kConv2d: {
      const kernels::Conv2dParams& p = std::get<ConvAttrs>(node.attrs).params;
      kernels::Conv2d(in[0], LiftConv1dData(in_shape(0), p.data_layout), in[1],
                      LiftConv1dWeight(in_shape(1), p.kernel_layout), out,
                      LiftConv1dData(node.shape, p.data_layout), p);
      return;
    }
    case OpKind::kMaxPool2d:
    case OpKind::kAvgPool2d:
      kernels::Pool2d(in[0], in_shape(0), out, node.shape, std::get<PoolAttrs>(node.attrs).params);
      return;
    case OpKind::kBatchNorm: {
      const BatchNormAttrs& a = std::get<BatchNormAttrs>(node.attrs);
      kernels::BatchNorm(in[0], in_shape(0), a.axis, in[1], in[2], in[3], in[4], a.epsilon,
                         a.center, a.scale, out);
      return;
    }
    case OpKind::kSoftmax:
      kernels::Softmax(in[0], in_shape(0), std::get<SoftmaxAttrs>(node.attrs).axis, out);
      return;
    case OpKind::kAdd:
    case OpKind::kSubtract:
    case OpKind::kMultiply:
    case OpKind::kDivide:
      kernels::Binary(ToBinaryOp(node.op), in[0], in_shape(0), in[1], in_shape(1), out, node.shape);
      return;
    case OpKind::kClip: {
      const ClipAttrs& clip = std::get<ClipAttrs>(node.attrs);
      kernels::Unary(kernels::UnaryOp::kClip, in[0], out, kernels::NumElements(node.shape),
                     clip.min, clip.max);
      return;
    }
    case OpKind::kRelu:
    case OpKind::kSigmoid:
    case OpKind::kTanh:
    case OpKind::kGelu:
    case OpKind::kGeluTanh:
      kernels::Unary(ToUnaryOp(node.op), in[0], out, kernels::NumElements(node.shape));
      return;
  }
}

}  // namespace

Executor::Executor(Graph graph) : graph_(std::move(graph)) {
  for (const Node& node : graph_.nodes) {
    if (node.dtype != DType::kFloat32) {
      TVM_FFI_THROW(ValueError) << "node " << node.name << ": dtype " << DTypeName(node.dtype)
                                << " is not executable by the NPU runtime yet (float32 only)";
    }
  }
  constants_bound_ = graph_.ConstNodes().empty();

  // Fold transposes into the matmul that consumes them: count every use of each node first.
  std::vector<int> uses(graph_.nodes.size(), 0);
  for (const Node& node : graph_.nodes) {
    for (int64_t input : node.inputs) ++uses[input];
  }
  for (int64_t head : graph_.heads) ++uses[head];
  folded_transpose_.assign(graph_.nodes.size(), false);
  for (const Node& node : graph_.nodes) {
    if (node.kind != NodeKind::kOp || node.op != OpKind::kMatmul || node.inputs.size() != 2)
      continue;
    const int64_t rhs = node.inputs[1];
    const Node& t = graph_.nodes[rhs];
    if (t.kind == NodeKind::kOp && t.op == OpKind::kPermuteDims && uses[rhs] == 1 &&
        t.shape.size() == 2 &&
        std::get<PermuteDimsAttrs>(t.attrs).axes == std::vector<int64_t>{1, 0}) {
      folded_transpose_[rhs] = true;
    }
  }
}

void Executor::SetConstants(std::vector<tvm::ffi::Tensor> constants) {
  std::vector<int64_t> ids = graph_.ConstNodes();
  if (constants.size() != ids.size()) {
    TVM_FFI_THROW(ValueError) << graph_.symbol << ": expected " << ids.size() << " constants, got "
                              << constants.size();
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    const Node& node = graph_.nodes[ids[i]];
    CheckTensor(*constants[i].GetDLTensorPtr(), node, "constant " + node.name);
  }
  constants_ = std::move(constants);
  constants_bound_ = true;
}

void Executor::Run(const std::vector<const DLTensor*>& inputs,
                   const std::vector<DLTensor*>& outputs) const {
  const std::string& sym = graph_.symbol;
  if (!constants_bound_) {
    TVM_FFI_THROW(RuntimeError) << sym << ": constants were not initialised (__init_" << sym
                                << " was not called)";
  }
  if (inputs.size() != graph_.arg_nodes.size() || outputs.size() != graph_.heads.size()) {
    TVM_FFI_THROW(ValueError) << sym << " expects " << graph_.arg_nodes.size() << " inputs and "
                              << graph_.heads.size() << " outputs, got "
                              << inputs.size() + outputs.size() << " arguments";
  }
  size_t count = graph_.nodes.size();
  std::vector<const float*> values(count, nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node& node = graph_.nodes[graph_.arg_nodes[i]];
    CheckTensor(*inputs[i], node, sym + " input " + std::to_string(i) + " (" + node.name + ")");
    values[graph_.arg_nodes[i]] = DataPtr<const float>(*inputs[i]);
  }
  std::vector<int64_t> const_ids = graph_.ConstNodes();
  for (size_t i = 0; i < const_ids.size(); ++i) {
    values[const_ids[i]] = DataPtr<const float>(*constants_[i].GetDLTensorPtr());
  }
  // An op node that is an output is computed straight into the caller's buffer.
  std::vector<float*> in_place(count, nullptr);
  for (size_t i = 0; i < outputs.size(); ++i) {
    int64_t head = graph_.heads[i];
    const Node& node = graph_.nodes[head];
    CheckTensor(*outputs[i], node, sym + " output " + std::to_string(i));
    if (node.kind == NodeKind::kOp && in_place[head] == nullptr) {
      in_place[head] = DataPtr<float>(*outputs[i]);
    }
  }
  std::vector<std::vector<float>> scratch(count);
  for (size_t id = 0; id < count; ++id) {
    const Node& node = graph_.nodes[id];
    if (node.kind != NodeKind::kOp) continue;
    if (folded_transpose_[id]) {
      values[id] = values[node.inputs[0]];  // stands for its input; read by the matmul below
      continue;
    }
    float* out = in_place[id];
    if (out == nullptr) {
      scratch[id].resize(kernels::NumElements(node.shape));
      out = scratch[id].data();
    }
    std::vector<const float*> in;
    for (int64_t input : node.inputs) in.push_back(values[input]);
    if (node.op == OpKind::kMatmul && folded_transpose_[node.inputs[1]]) {
      const Node& weight = graph_.nodes[graph_.nodes[node.inputs[1]].inputs[0]];
      kernels::MatmulTransposedRhs(in[0], graph_.nodes[node.inputs[0]].shape, in[1], weight.shape,
                                   out, node.shape);
    } else {
      RunNode(graph_, node, in, out);
    }
    values[id] = out;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    float* dst = DataPtr<float>(*outputs[i]);
    const float* src = values[graph_.heads[i]];
    if (dst != src) {
      std::memcpy(dst, src, kernels::NumElements(graph_.nodes[graph_.heads[i]].shape) * 4);
    }
  }
}

}  // namespace example_npu
