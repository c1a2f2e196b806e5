#include "runtime/executor.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "compiler/compiler.h"
#include "graph/runtime_params.h"
#include "kernels/half.h"
#include "support/json_input.h"

namespace example_npu {
namespace {

bool IsCompact(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  int64_t expected = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

/*!
 * \brief Checks that a caller tensor matches the node it binds to; `what()` names it in errors
 * (built only on failure: this runs for every argument of every call).
 */
template <typename Describe>
void CheckTensor(const DLTensor& t, const Node& node, const Describe& what) {
  if (t.device.device_type != kDLCPU) {
    TVM_FFI_THROW(ValueError) << what()
                              << " must be on the CPU (the NPU emulator reads host memory)";
  }
  DLDataType expected = ToDLDataType(node.dtype);
  if (t.dtype.code != expected.code || t.dtype.bits != expected.bits || t.dtype.lanes != 1) {
    TVM_FFI_THROW(TypeError) << what() << " has dtype code " << static_cast<int>(t.dtype.code)
                             << " bits " << static_cast<int>(t.dtype.bits) << ", expected "
                             << DTypeName(node.dtype);
  }
  if (t.ndim != static_cast<int>(node.shape.size()) ||
      !std::equal(node.shape.begin(), node.shape.end(), t.shape)) {
    TVM_FFI_THROW(ValueError) << what() << " has shape "
                              << ShapeText(t.shape, static_cast<size_t>(t.ndim)) << ", expected "
                              << ShapeText(node.shape);
  }
  if (!IsCompact(t)) TVM_FFI_THROW(ValueError) << what() << " must be contiguous";
  if (t.data == nullptr && kernels::NumElements(node.shape) > 0) {
    TVM_FFI_THROW(ValueError) << what() << " has no data";
  }
}

template <typename T>
T* DataPtr(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

/*! \brief The elements of a (compact) tensor of `dtype` as doubles. */
std::vector<double> TensorValues(const DLTensor& t, DType dtype) {
  const int64_t size = kernels::NumElements(std::vector<int64_t>(t.shape, t.shape + t.ndim));
  std::vector<double> values(size);
  const char* base = DataPtr<const char>(t);
  for (int64_t i = 0; i < size; ++i) {
    switch (dtype) {
      case DType::kFloat32:
        values[i] = reinterpret_cast<const float*>(base)[i];
        break;
      case DType::kFloat16: {
        float widened = 0;
        kernels::HalfToFloat(reinterpret_cast<const uint16_t*>(base) + i, &widened, 1);
        values[i] = widened;
        break;
      }
      case DType::kInt8:
        values[i] = reinterpret_cast<const int8_t*>(base)[i];
        break;
      case DType::kUInt8:
        values[i] = reinterpret_cast<const uint8_t*>(base)[i];
        break;
      case DType::kInt16:
        values[i] = reinterpret_cast<const int16_t*>(base)[i];
        break;
      case DType::kInt32:
        values[i] = reinterpret_cast<const int32_t*>(base)[i];
        break;
      case DType::kInt64:
        values[i] = static_cast<double>(reinterpret_cast<const int64_t*>(base)[i]);
        break;
    }
  }
  return values;
}

// Distinct runtime-parameter sets kept compiled (one NPU function may serve several layers whose
// constants differ); beyond that the cache starts over.
constexpr size_t kBoundPrograms = 64;

}  // namespace

DLDataType ToDLDataType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return DLDataType{kDLFloat, 32, 1};
    case DType::kFloat16:
      return DLDataType{kDLFloat, 16, 1};
    case DType::kInt8:
      return DLDataType{kDLInt, 8, 1};
    case DType::kUInt8:
      return DLDataType{kDLUInt, 8, 1};
    case DType::kInt16:
      return DLDataType{kDLInt, 16, 1};
    case DType::kInt32:
      return DLDataType{kDLInt, 32, 1};
    case DType::kInt64:
      return DLDataType{kDLInt, 64, 1};
  }
  return DLDataType{kDLFloat, 32, 1};
}

std::shared_ptr<const Executor::Bound> Executor::BoundFor(
    const std::vector<const DLTensor*>& inputs) const {
  const Graph& graph = program_.graph;
  if (graph.runtime_param_inputs.empty()) return nullptr;
  std::map<int64_t, std::vector<double>> values;
  // Keyed by the values' bit patterns, not by the doubles: NaN compares neither below nor above
  // anything, so as a double key it would find whatever program was compiled first (and -0.0
  // would find +0.0's). Every distinct set of bits is bound, and checked, on its own.
  std::vector<uint64_t> key;
  for (int64_t id : graph.runtime_param_inputs) {
    const size_t arg =
        std::find(graph.arg_nodes.begin(), graph.arg_nodes.end(), id) - graph.arg_nodes.begin();
    values[id] = TensorValues(*inputs[arg], graph.nodes[id].dtype);
    for (double value : values[id]) {
      uint64_t bits = 0;
      std::memcpy(&bits, &value, sizeof(bits));
      key.push_back(bits);
    }
  }
  std::lock_guard<std::mutex> lock(bound_mu_);
  auto it = bound_.find(key);
  if (it == bound_.end()) {
    if (bound_.size() >= kBoundPrograms) bound_.clear();
    auto bound = std::make_shared<Bound>();
    Graph bound_graph = ParseGraph(
        BindRuntimeParams(graph.unbound_json, [&](int64_t id) { return values.at(id); }));
    bound->program = Compile(bound_graph, config_);
    bound->emulator =
        std::make_unique<Emulator>(bound->program, EmulatorOptions::FromEnvironment());
    it = bound_.emplace(std::move(key), std::move(bound)).first;
  }
  return it->second;
}

Executor::Executor(Graph graph, NPUConfig config) : config_(config) {
  for (const Node& node : graph.nodes) {
    if (node.kind == NodeKind::kInput) continue;  // any dtype may arrive (runtime parameters)
    const bool is_float = node.dtype == DType::kFloat32 || node.dtype == DType::kFloat16;
    const bool is_int = IsQuantizedDType(node.dtype);
    // Integers flow only through quantize, the integer qnn ops and data movement (views,
    // concat by DMA), which is dtype-agnostic, and through pad, resize2d and topk: their
    // integer values pass the float32 datapath exactly and the store truncates as TVM's cast
    // does.
    const bool int_ok = node.kind != NodeKind::kOp || node.op == OpKind::kQuantize ||
                        IsQnnOp(node.op) || IsDataMovement(node.op) || node.op == OpKind::kPad ||
                        node.op == OpKind::kResize2d || node.op == OpKind::kTopk;
    // int32 / int64: argmax / argmin and topk indices, float32 cast to ids, and ids (a take's,
    // constant ones included) moved by DMA byte for byte.
    const bool index_dtype = node.dtype == DType::kInt32 || node.dtype == DType::kInt64;
    const bool index_ok =
        index_dtype && (node.kind == NodeKind::kConst || IsDataMovement(node.op) ||
                        node.op == OpKind::kTopk || node.op == OpKind::kCast ||
                        (node.dtype == DType::kInt64 &&
                         (node.op == OpKind::kArgmax || node.op == OpKind::kArgmin)));
    if (!is_float && !(is_int && int_ok) && !index_ok) {
      TVM_FFI_THROW(ValueError) << "node " << node.name << " (" << OpKindName(node.op)
                                << "): dtype " << DTypeName(node.dtype)
                                << " is not executable by the NPU runtime";
    }
  }
  program_ = Compile(graph, config);
  emulator_options_ = EmulatorOptions::FromEnvironment();
  constants_bound_ = program_.graph.ConstNodes().empty();
}

const Emulator& Executor::emulator() const {
  std::call_once(emulator_once_,
                 [this] { emulator_ = std::make_unique<Emulator>(program_, emulator_options_); });
  return *emulator_;
}

const std::string& Executor::profile_json() const {
  std::call_once(profile_once_, [this] { profile_json_ = Simulate(program_).ToJSON(); });
  return profile_json_;
}

void Executor::SetConstants(std::vector<tvm::ffi::Tensor> constants) {
  const Graph& graph = program_.graph;
  std::vector<int64_t> ids = graph.ConstNodes();
  if (constants.size() != ids.size()) {
    TVM_FFI_THROW(ValueError) << graph.symbol << ": expected " << ids.size() << " constants, got "
                              << constants.size();
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    const Node& node = graph.nodes[ids[i]];
    CheckTensor(*constants[i].GetDLTensorPtr(), node, [&] { return "constant " + node.name; });
  }
  constants_ = std::move(constants);
  constants_bound_ = true;
  ++constants_version_;
}

void Executor::Run(const std::vector<const DLTensor*>& inputs,
                   const std::vector<DLTensor*>& outputs) const {
  const Graph& graph = program_.graph;
  const std::string& sym = graph.symbol;
  if (!constants_bound_) {
    TVM_FFI_THROW(ValueError) << sym << ": constants were not initialised (__init_" << sym
                              << " was not called)";
  }
  if (inputs.size() != graph.arg_nodes.size() || outputs.size() != graph.heads.size()) {
    TVM_FFI_THROW(ValueError) << sym << " expects " << graph.arg_nodes.size() << " inputs and "
                              << graph.heads.size() << " outputs, got "
                              << inputs.size() + outputs.size() << " arguments";
  }
  DramBindings dram;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node& node = graph.nodes[graph.arg_nodes[i]];
    CheckTensor(*inputs[i], node,
                [&] { return sym + " input " + std::to_string(i) + " (" + node.name + ")"; });
    dram.inputs.push_back(DataPtr<const char>(*inputs[i]));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    CheckTensor(*outputs[i], graph.nodes[graph.heads[i]],
                [&] { return sym + " output " + std::to_string(i); });
    dram.outputs.push_back(DataPtr<char>(*outputs[i]));
  }
  dram.constants_version = constants_version_;
  for (const tvm::ffi::Tensor& constant : constants_) {
    dram.constants.push_back(DataPtr<const char>(*constant.GetDLTensorPtr()));
  }
  const std::shared_ptr<const Bound> bound = BoundFor(inputs);
  (bound ? *bound->emulator : emulator()).Run(dram);
  // Outputs no group wrote: a returned input or constant, or a value returned twice.
  for (size_t i = 0; i < outputs.size(); ++i) {
    const int64_t head = graph.heads[i];
    const TensorPlacement& placement = program_.placements[head];
    if (placement.kind == TensorPlacement::Kind::kOutput &&
        placement.index == static_cast<int64_t>(i)) {
      continue;
    }
    const void* source =
        placement.kind == TensorPlacement::Kind::kInput   ? dram.inputs[placement.index]
        : placement.kind == TensorPlacement::Kind::kConst ? dram.constants[placement.index]
                                                          : dram.outputs[placement.index];
    const int64_t bytes =
        kernels::NumElements(graph.nodes[head].shape) * DTypeBytes(graph.nodes[head].dtype);
    if (bytes > 0) std::memcpy(dram.outputs[i], source, bytes);  // empty tensors may have no data
  }
}

}  // namespace example_npu
