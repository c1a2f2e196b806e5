/*!
 * \file runtime/npu_module.cc
 * \brief The example_npu_json runtime module: TVM's BYOC JSON-runtime protocol on tvm-ffi.
 *
 * One module per partitioned function. The Relax VM resolves the function's global symbol among
 * the executable's imports and calls it destination-passing style (inputs, then outputs); TVM's
 * constant loader first calls __init_<symbol> with the weights listed by get_const_vars.
 */
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/extra/json.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/reflection/registry.h>
#include <tvm/ffi/string.h>

#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "config/npu_config.h"
#include "graph/graph.h"
#include "runtime/executor.h"
#include "support/json_input.h"

namespace example_npu {
namespace {

namespace ffi = tvm::ffi;
namespace json = tvm::ffi::json;

constexpr const char* kModuleKind = "example_npu_json";

/*!
 * \brief The calling thread's profiling session (example_npu.profile): while it is open, every
 * NPU call made on this thread appends its subgraph profile. Thread-local, so concurrent
 * inference on other threads is neither recorded nor slowed.
 */
thread_local std::unique_ptr<std::vector<std::string>> profiling_session;

void BeginProfiling() { profiling_session = std::make_unique<std::vector<std::string>>(); }

ffi::Array<ffi::String> EndProfiling() {
  ffi::Array<ffi::String> profiles;
  if (profiling_session) {
    for (const std::string& profile : *profiling_session) profiles.push_back(profile);
  }
  profiling_session.reset();
  return profiles;
}

void RecordProfile(const Executor& executor) {
  if (profiling_session) profiling_session->push_back(executor.profile_json());
}
constexpr int64_t kBytesFormatVersion = 1;

/*!
 * \brief Runs `body` at the boundary to the caller: a host allocation failure becomes a
 * ValueError (the configured limits, NPUConfig.dram_mb and max_tiles, keep every allocation
 * bounded, so running out of memory means the model or the configuration is too large for this
 * host, which the user can change), and every error message is cut to kMaxErrorChars, whatever
 * part of the input it echoes.
 */
template <typename Body>
auto UserErrorsOnly(const char* what, Body body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {  // an allocation larger than the address space
  } catch (const ffi::Error& error) {
    const std::string message = error.message();
    if (message.size() <= kMaxErrorChars) throw;
    throw ffi::Error(error.kind(), Printable(message, kMaxErrorChars), error.backtrace());
  }
  TVM_FFI_THROW(ValueError) << what << ": out of host memory; the model or NPUConfig (dram_mb, "
                            << "max_tiles, l1_sram_kb, l2_cmx_kb) is too large for this machine";
  TVM_FFI_UNREACHABLE();
}

class NPUModuleObj : public ffi::ModuleObj {
 public:
  NPUModuleObj(std::string graph_json, const std::vector<std::string>& const_names)
      : graph_json_(std::move(graph_json)), executor_(MakeExecutor(graph_json_)) {
    const Graph& graph = executor_->graph();
    if (const_names != graph.ConstNames()) {
      TVM_FFI_THROW(ValueError) << graph.symbol
                                << ": const_names do not match the graph's const nodes";
    }
  }

  static std::shared_ptr<Executor> MakeExecutor(const std::string& graph_json) {
    Graph graph = ParseGraph(graph_json);
    NPUConfig config =
        graph.npu_config_json.empty() ? NPUConfig() : NPUConfig::FromJSON(graph.npu_config_json);
    return std::make_shared<Executor>(std::move(graph), std::move(config));
  }

  const char* kind() const final { return kModuleKind; }

  int GetPropertyMask() const final {
    return ffi::Module::kBinarySerializable | ffi::Module::kRunnable;
  }

  ffi::Optional<ffi::Function> GetFunction(const ffi::String& name) final {
    const std::string& symbol = executor_->graph().symbol;
    // Functions hold the executor, not `this`: the VM may keep them beyond the module's life.
    std::shared_ptr<Executor> executor = executor_;
    if (name == "get_symbol") {
      return ffi::Function::FromTyped([symbol]() { return ffi::String(symbol); });
    }
    if (name == "get_const_vars") {
      ffi::Array<ffi::String> names;
      for (const std::string& const_name : executor->graph().ConstNames()) {
        names.push_back(const_name);
      }
      return ffi::Function::FromTyped([names]() { return names; });
    }
    if (name == "__init_" + symbol) {
      return ffi::Function::FromTyped([executor](ffi::Array<ffi::Tensor> constants) {
        return UserErrorsOnly("example_npu constants", [&] {
          executor->SetConstants(std::vector<ffi::Tensor>(constants.begin(), constants.end()));
          return 0;
        });
      });
    }
    if (name == symbol) {
      return ffi::Function::FromPacked([executor](ffi::PackedArgs args, ffi::Any*) {
        UserErrorsOnly("example_npu call", [&] {
          Call(*executor, args);
          RecordProfile(*executor);
        });
      });
    }
    if (name == "get_profile") {
      return ffi::Function::FromTyped(
          [executor]() { return ffi::String(executor->profile_json()); });
    }
    return std::nullopt;
  }

  ffi::Bytes SaveToBytes() const final {
    json::Object root;
    root.Set(ffi::String("format"), ffi::String(kModuleKind));
    root.Set(ffi::String("version"), kBytesFormatVersion);
    root.Set(ffi::String("graph"), ffi::String(graph_json_));
    return ffi::Bytes(std::string(json::Stringify(root)));
  }

  /*! \brief "" / "json": the NPU graph; "commands": the compiled program and command stream. */
  ffi::String InspectSource(const ffi::String& format) const final {
    if (format == "commands") return executor_->program().ToText();
    return graph_json_;
  }

  static ffi::Module LoadFromBytes(const ffi::Bytes& bytes) {
    return UserErrorsOnly("example_npu_json module bytes", [&] { return Load(bytes); });
  }

  static ffi::Module Load(const ffi::Bytes& bytes) {
    json::Value value = ParseUntrustedJson(std::string_view(bytes.data(), bytes.size()),
                                           "example_npu_json module bytes");
    auto root = value.try_cast<json::Object>();
    if (!root.has_value()) {
      TVM_FFI_THROW(ValueError) << "example_npu_json module bytes are corrupt or truncated";
    }
    auto format = root->Get(ffi::String("format"));
    auto version = root->Get(ffi::String("version"));
    auto graph = root->Get(ffi::String("graph"));
    if (!format.has_value() || format->try_cast<ffi::String>() != ffi::String(kModuleKind) ||
        !version.has_value() || version->try_cast<int64_t>() != kBytesFormatVersion ||
        !graph.has_value() || !graph->try_cast<ffi::String>().has_value()) {
      TVM_FFI_THROW(ValueError) << "example_npu_json module bytes have an unknown layout";
    }
    std::string graph_json(graph->cast<ffi::String>());
    return Create(graph_json, ParseGraph(graph_json).ConstNames());
  }

  static ffi::Module Create(std::string graph_json, const std::vector<std::string>& const_names) {
    return ffi::Module(ffi::make_object<NPUModuleObj>(std::move(graph_json), const_names));
  }

 private:
  static void Call(const Executor& executor, ffi::PackedArgs args) {
    const Graph& graph = executor.graph();
    size_t num_inputs = graph.arg_nodes.size();
    size_t expected = num_inputs + graph.heads.size();
    if (static_cast<size_t>(args.size()) != expected) {
      TVM_FFI_THROW(ValueError) << graph.symbol << " expects " << expected << " tensor arguments ("
                                << num_inputs << " inputs, " << graph.heads.size()
                                << " outputs), got " << args.size();
    }
    std::vector<const DLTensor*> inputs;
    std::vector<DLTensor*> outputs;
    for (int i = 0; i < args.size(); ++i) {
      auto tensor = args[i].try_cast<DLTensor*>();
      if (!tensor.has_value()) {
        TVM_FFI_THROW(TypeError) << graph.symbol << ": argument " << i << " is a "
                                 << args[i].GetTypeKey() << ", expected a tensor";
      }
      if (static_cast<size_t>(i) < num_inputs) {
        inputs.push_back(*tensor);
      } else {
        outputs.push_back(*tensor);
      }
    }
    executor.Run(inputs, outputs);
  }

  std::string graph_json_;
  std::shared_ptr<Executor> executor_;
};

}  // namespace

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = tvm::ffi::reflection;
  refl::GlobalDef()
      .def("example_npu.profiler_begin", BeginProfiling)
      .def("example_npu.profiler_end", EndProfiling);
}

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = tvm::ffi::reflection;
  refl::GlobalDef()
      .def("runtime.ExampleNPUJSONRuntimeCreate",
           [](ffi::String symbol, ffi::String graph_json, ffi::Array<ffi::String> const_names) {
             std::vector<std::string> names(const_names.begin(), const_names.end());
             ffi::Module module = UserErrorsOnly("example_npu graph", [&] {
               return NPUModuleObj::Create(std::string(graph_json), names);
             });
             auto get_symbol = module->GetFunction("get_symbol");
             if ((*get_symbol)().cast<ffi::String>() != symbol) {
               TVM_FFI_THROW(ValueError)
                   << "graph symbol does not match " << Printable(std::string(symbol));
             }
             return module;
           })
      .def("ffi.Module.load_from_bytes.example_npu_json", NPUModuleObj::LoadFromBytes);
}

}  // namespace example_npu
