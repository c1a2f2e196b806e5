#include "config/npu_config.h"

#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/json.h>
#include <tvm/ffi/reflection/registry.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>
#include <utility>

#include "config/matrix_engine.h"
#include "support/json_input.h"

namespace example_npu {
namespace {

namespace json = tvm::ffi::json;
using tvm::ffi::Any;
using tvm::ffi::String;

struct PowerMode {
  const char* name;
  double clock_mhz;
  double voltage;
};

// DVFS operating points of a mobile-class NPU: frequency scales roughly with voltage.
constexpr std::array<PowerMode, 3> kPowerModes = {{
    {"high_performance", 1000.0, 0.90},
    {"balanced", 800.0, 0.80},
    {"low_power", 400.0, 0.65},
}};
constexpr double kNominalVoltage = 0.90;

constexpr std::array<std::pair<const char*, MatrixDataflow>, 3> kDataflows = {{
    {"output_stationary", MatrixDataflow::kOutputStationary},
    {"weight_stationary", MatrixDataflow::kWeightStationary},
    {"block", MatrixDataflow::kBlock},
}};

constexpr std::array<std::pair<const char*, WorkEngine>, 2> kWorkEngines = {{
    {"vector", WorkEngine::kVector},
    {"matrix", WorkEngine::kMatrix},
}};

constexpr std::array<std::pair<const char*, WeightMemory>, 2> kWeightMemories = {{
    {"dram", WeightMemory::kDram},
    {"flash", WeightMemory::kFlash},
}};

constexpr std::array<std::pair<const char*, WeightLayout>, 2> kWeightLayouts = {{
    {"tensor", WeightLayout::kTensor},
    {"encoded", WeightLayout::kEncoded},
}};

constexpr std::array<std::pair<const char*, WeightStaging>, 2> kWeightStagings = {{
    {"reused", WeightStaging::kReused},
    {"always", WeightStaging::kAlways},
}};

constexpr std::array<std::pair<const char*, FeatureMapMemory>, 3> kFeatureMapMemories = {{
    {"dram", FeatureMapMemory::kDram},
    {"sram", FeatureMapMemory::kSram},
    {"sram_intermediates", FeatureMapMemory::kSramIntermediates},
}};

/*! \brief The value named `name` among a string field's `choices`, or ValueError naming them. */
template <typename T, size_t N>
T FindChoice(const char* field, const std::array<std::pair<const char*, T>, N>& choices,
             const std::string& name) {
  for (const auto& [choice, value] : choices) {
    if (name == choice) return value;
  }
  std::ostringstream names;
  for (size_t i = 0; i < N; ++i) names << (i ? ", " : "") << choices[i].first;
  TVM_FFI_THROW(ValueError) << "NPUConfig." << field << " '" << Printable(name)
                            << "' is not one of " << names.str();
  TVM_FFI_UNREACHABLE();
}

const PowerMode& FindPowerMode(const std::string& name) {
  for (const PowerMode& mode : kPowerModes) {
    if (name == mode.name) return mode;
  }
  TVM_FFI_THROW(ValueError) << "NPUConfig.power_mode '" << Printable(name)
                            << "' is not one of high_performance, balanced, low_power";
  TVM_FFI_UNREACHABLE();
}

/*! \brief A numeric field with its documented, validated range [min, max]. */
template <typename T>
struct Field {
  const char* name;
  T NPUConfig::*member;
  T min;
  T max;
};

// The ranges keep every derived quantity (cycles, bytes, energy) far from overflow and cover any
// NPU worth modelling: on-chip memories up to 1 GB, engines up to 65536 lanes, DRAM up to 1 TB.
const std::array<Field<int64_t>, 29> kIntFields = {{
    {"l0_register_kb", &NPUConfig::l0_register_kb, 1, 1024},
    {"l1_sram_kb", &NPUConfig::l1_sram_kb, 1, 1 << 20},
    {"l2_cmx_kb", &NPUConfig::l2_cmx_kb, 1, 1 << 20},
    {"tile_height", &NPUConfig::tile_height, 1, 1024},
    {"tile_width", &NPUConfig::tile_width, 1, 1024},
    {"vector_elements", &NPUConfig::vector_elements, 1, 1024},
    {"matrix_engine_dim", &NPUConfig::matrix_engine_dim, 1, 1024},
    {"vector_unit_width", &NPUConfig::vector_unit_width, 1, 65536},
    {"activation_unit_lanes", &NPUConfig::activation_unit_lanes, 1, 65536},
    {"pooling_unit_lanes", &NPUConfig::pooling_unit_lanes, 1, 65536},
    {"dma_channels", &NPUConfig::dma_channels, 1, 64},
    {"weight_dma_channels", &NPUConfig::weight_dma_channels, 0, 64},
    {"mac_block_pixels", &NPUConfig::mac_block_pixels, 1, 1024},
    {"mac_block_channels", &NPUConfig::mac_block_channels, 1, 1024},
    {"mac_block_depth", &NPUConfig::mac_block_depth, 1, 1024},
    {"depthwise_macs_per_cycle", &NPUConfig::depthwise_macs_per_cycle, 1, 1 << 20},
    {"op_setup_cycles", &NPUConfig::op_setup_cycles, 0, 1000000},
    {"sram_arena_kb", &NPUConfig::sram_arena_kb, 0, 1 << 20},
    {"sram_latency_cycles", &NPUConfig::sram_latency_cycles, 1, 1000000},
    {"fm_read_granule_bytes", &NPUConfig::fm_read_granule_bytes, 0, 1024},
    {"dram_burst_bytes", &NPUConfig::dram_burst_bytes, 1, 65536},
    {"sram_burst_bytes", &NPUConfig::sram_burst_bytes, 1, 65536},
    {"narrow_input_reread_channels", &NPUConfig::narrow_input_reread_channels, 0, 65536},
    {"cascade_stripe_rows", &NPUConfig::cascade_stripe_rows, 0, 65536},
    {"weight_record_bytes", &NPUConfig::weight_record_bytes, 0, 1024},
    {"l1_latency_cycles", &NPUConfig::l1_latency_cycles, 1, 1000000},
    {"l2_latency_cycles", &NPUConfig::l2_latency_cycles, 1, 1000000},
    {"dram_mb", &NPUConfig::dram_mb, 1, 1 << 20},
    {"max_tiles", &NPUConfig::max_tiles, 1, 1 << 24},
}};

const std::array<Field<double>, 18> kRealFields = {{
    {"l1_bandwidth_bytes_per_cycle", &NPUConfig::l1_bandwidth_bytes_per_cycle, 1e-3, 1e6},
    {"l2_bandwidth_bytes_per_cycle", &NPUConfig::l2_bandwidth_bytes_per_cycle, 1e-3, 1e6},
    {"dram_bandwidth_gb_per_s", &NPUConfig::dram_bandwidth_gb_per_s, 1e-3, 1e6},
    {"dram_latency_ns", &NPUConfig::dram_latency_ns, 1e-3, 1e6},
    {"flash_bandwidth_gb_per_s", &NPUConfig::flash_bandwidth_gb_per_s, 1e-3, 1e6},
    {"flash_latency_ns", &NPUConfig::flash_latency_ns, 1e-3, 1e6},
    {"sram_bandwidth_bytes_per_cycle", &NPUConfig::sram_bandwidth_bytes_per_cycle, 1e-3, 1e6},
    {"peak_clock_mhz", &NPUConfig::peak_clock_mhz, 1, 1e5},
    {"elementwise_elements_per_cycle", &NPUConfig::elementwise_elements_per_cycle, 1e-3, 1e6},
    {"energy_mac_int8_pj", &NPUConfig::energy_mac_int8_pj, 1e-6, 1e6},
    {"energy_mac_int16_pj", &NPUConfig::energy_mac_int16_pj, 1e-6, 1e6},
    {"energy_mac_float16_pj", &NPUConfig::energy_mac_float16_pj, 1e-6, 1e6},
    {"energy_mac_float32_pj", &NPUConfig::energy_mac_float32_pj, 1e-6, 1e6},
    {"energy_vector_op_pj", &NPUConfig::energy_vector_op_pj, 1e-6, 1e6},
    {"energy_l0_pj_per_byte", &NPUConfig::energy_l0_pj_per_byte, 1e-6, 1e6},
    {"energy_l1_pj_per_byte", &NPUConfig::energy_l1_pj_per_byte, 1e-6, 1e6},
    {"energy_l2_pj_per_byte", &NPUConfig::energy_l2_pj_per_byte, 1e-6, 1e6},
    {"energy_dram_pj_per_byte", &NPUConfig::energy_dram_pj_per_byte, 1e-6, 1e6},
}};

const std::array<std::pair<const char*, std::string NPUConfig::*>, 8> kStringFields = {{
    {"power_mode", &NPUConfig::power_mode},
    {"dataflow", &NPUConfig::dataflow},
    {"depthwise_engine", &NPUConfig::depthwise_engine},
    {"elementwise_engine", &NPUConfig::elementwise_engine},
    {"weight_memory", &NPUConfig::weight_memory},
    {"weight_layout", &NPUConfig::weight_layout},
    {"weight_staging", &NPUConfig::weight_staging},
    {"feature_map_memory", &NPUConfig::feature_map_memory},
}};

}  // namespace

const char* TierName(Tier tier) {
  switch (tier) {
    case Tier::kL0:
      return "L0";
    case Tier::kL1:
      return "L1";
    case Tier::kL2:
      return "L2";
    case Tier::kDram:
      return "DRAM";
  }
  return "?";
}

NPUConfig NPUConfig::FromJSON(const std::string& json_text) {
  json::Value value = ParseUntrustedJson(json_text, "NPUConfig JSON");
  auto object = value.try_cast<json::Object>();
  if (!object.has_value()) TVM_FFI_THROW(ValueError) << "NPUConfig JSON is not a JSON object";
  NPUConfig config;
  for (const auto& [key_any, field_value] : *object) {
    std::string key(key_any.cast<String>());
    bool known = false;
    for (const auto& field : kIntFields) {
      if (key != field.name) continue;
      if (field_value.type_index() != tvm::ffi::TypeIndex::kTVMFFIInt) {
        TVM_FFI_THROW(ValueError) << "NPUConfig." << key << " must be an integer";
      }
      config.*field.member = field_value.cast<int64_t>();
      known = true;
    }
    for (const auto& field : kRealFields) {
      if (key != field.name) continue;
      auto number = field_value.try_cast<double>();
      if (!number.has_value() || field_value.type_index() == tvm::ffi::TypeIndex::kTVMFFIBool) {
        TVM_FFI_THROW(ValueError) << "NPUConfig." << key << " must be a number";
      }
      config.*field.member = *number;
      known = true;
    }
    for (const auto& [name, member] : kStringFields) {
      if (key != name) continue;
      auto text = field_value.try_cast<String>();
      if (!text.has_value())
        TVM_FFI_THROW(ValueError) << "NPUConfig." << key << " must be a string";
      config.*member = std::string(*text);
      known = true;
    }
    if (!known) TVM_FFI_THROW(ValueError) << "NPUConfig has no field '" << Printable(key) << "'";
  }
  config.Validate();
  return config;
}

std::string NPUConfig::ToJSON() const {
  json::Object object;
  for (const auto& field : kIntFields) object.Set(String(field.name), this->*field.member);
  for (const auto& field : kRealFields) object.Set(String(field.name), this->*field.member);
  for (const auto& [name, member] : kStringFields) object.Set(String(name), String(this->*member));
  return std::string(json::Stringify(object));
}

std::string NPUConfig::FieldRangesJSON() {
  const NPUConfig defaults;
  json::Object object;
  auto add = [&](const auto& field) {
    json::Object range;
    range.Set(String("default"), defaults.*field.member);
    range.Set(String("min"), field.min);
    range.Set(String("max"), field.max);
    object.Set(String(field.name), range);
  };
  for (const auto& field : kIntFields) add(field);
  for (const auto& field : kRealFields) add(field);
  return std::string(json::Stringify(object));
}

TVM_FFI_STATIC_INIT_BLOCK() {
  tvm::ffi::reflection::GlobalDef().def("example_npu.npu_config_field_ranges",
                                        [] { return String(NPUConfig::FieldRangesJSON()); });
}

void NPUConfig::Validate() const {
  for (const auto& field : kIntFields) {
    const int64_t value = this->*field.member;
    if (value < field.min || value > field.max) {
      TVM_FFI_THROW(ValueError) << "NPUConfig." << field.name << " must be in [" << field.min
                                << ", " << field.max << "], got " << value;
    }
  }
  for (const auto& field : kRealFields) {
    const double value = this->*field.member;
    if (!(value >= field.min && value <= field.max)) {
      TVM_FFI_THROW(ValueError) << "NPUConfig." << field.name << " must be in [" << field.min
                                << ", " << field.max << "], got " << value;
    }
  }
  FindPowerMode(power_mode);
  matrix_dataflow();
  depthwise_work_engine();
  elementwise_work_engine();
  weight_memory_kind();
  weight_layout_kind();
  weight_staging_kind();
  feature_map_memory_kind();
  const int64_t min_tile_bytes = tile_height * tile_width * 4;
  if (l1_sram_kb * 1024 < min_tile_bytes) {
    TVM_FFI_THROW(ValueError) << "NPUConfig.l1_sram_kb=" << l1_sram_kb
                              << " is smaller than one float32 " << tile_height << "x" << tile_width
                              << " tile (" << min_tile_bytes << " bytes)";
  }
}

int64_t NPUConfig::TierBytes(Tier tier) const {
  switch (tier) {
    case Tier::kL0:
      return l0_register_kb * 1024;
    case Tier::kL1:
      return l1_sram_kb * 1024;
    case Tier::kL2:
      return l2_cmx_kb * 1024;
    case Tier::kDram:
      return dram_mb * 1024 * 1024;
  }
  return 0;
}

// The power modes' clocks are quoted for a 1000 MHz peak clock.
double NPUConfig::clock_mhz() const {
  return FindPowerMode(power_mode).clock_mhz * peak_clock_mhz / 1000.0;
}

double NPUConfig::voltage() const { return FindPowerMode(power_mode).voltage; }

double NPUConfig::EnergyScale() const {
  double ratio = voltage() / kNominalVoltage;
  return ratio * ratio;
}

MatrixDataflow NPUConfig::matrix_dataflow() const {
  return FindChoice("dataflow", kDataflows, dataflow);
}

WorkEngine NPUConfig::depthwise_work_engine() const {
  return FindChoice("depthwise_engine", kWorkEngines, depthwise_engine);
}

WorkEngine NPUConfig::elementwise_work_engine() const {
  return FindChoice("elementwise_engine", kWorkEngines, elementwise_engine);
}

WeightMemory NPUConfig::weight_memory_kind() const {
  return FindChoice("weight_memory", kWeightMemories, weight_memory);
}

WeightLayout NPUConfig::weight_layout_kind() const {
  return FindChoice("weight_layout", kWeightLayouts, weight_layout);
}

WeightStaging NPUConfig::weight_staging_kind() const {
  return FindChoice("weight_staging", kWeightStagings, weight_staging);
}

FeatureMapMemory NPUConfig::feature_map_memory_kind() const {
  return FindChoice("feature_map_memory", kFeatureMapMemories, feature_map_memory);
}

double NPUConfig::FlashBytesPerCycle() const {
  return flash_bandwidth_gb_per_s * 1e3 / clock_mhz();
}

int64_t NPUConfig::NarrowInputReads(int64_t channel_bytes, int64_t out_channels) const {
  const int64_t block = narrow_input_reread_channels;
  if (block == 0 || fm_read_granule_bytes == 0 || channel_bytes > fm_read_granule_bytes) return 1;
  return std::max<int64_t>(1, (out_channels + block - 1) / block);
}

int64_t NPUConfig::FlashLatencyCycles() const {
  return static_cast<int64_t>(std::ceil(flash_latency_ns * clock_mhz() / 1e3));
}

double NPUConfig::BandwidthBytesPerCycle(Tier tier) const {
  switch (tier) {
    case Tier::kL0:
    case Tier::kL1:
      return l1_bandwidth_bytes_per_cycle;
    case Tier::kL2:
      return l2_bandwidth_bytes_per_cycle;
    case Tier::kDram:
      // DRAM runs on its own clock: its bytes per NPU cycle grow as the NPU clock drops.
      return dram_bandwidth_gb_per_s * 1e3 / clock_mhz();
  }
  return 1.0;
}

int64_t NPUConfig::LatencyCycles(Tier tier) const {
  switch (tier) {
    case Tier::kL0:
      return 1;
    case Tier::kL1:
      return l1_latency_cycles;
    case Tier::kL2:
      return l2_latency_cycles;
    case Tier::kDram:
      return static_cast<int64_t>(std::ceil(dram_latency_ns * clock_mhz() / 1e3));
  }
  return 1;
}

int64_t NPUConfig::MatrixMacsPerCycle(DType dtype) const {
  const int64_t cells = matrix_dataflow() == MatrixDataflow::kBlock
                            ? mac_block_pixels * mac_block_channels * mac_block_depth
                            : matrix_engine_dim * matrix_engine_dim;
  return std::max<int64_t>(1, cells / MatrixPasses(dtype));
}

double NPUConfig::MacEnergyPj(DType dtype) const {
  switch (dtype) {
    case DType::kInt8:
      return energy_mac_int8_pj;
    case DType::kInt16:
      return energy_mac_int16_pj;
    case DType::kFloat16:
      return energy_mac_float16_pj;
    default:
      return energy_mac_float32_pj;
  }
}

}  // namespace example_npu
