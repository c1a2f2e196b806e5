/*!
 * \file config/npu_config.h
 * \brief The hardware description of the emulated NPU (mirrored by example_npu.NPUConfig).
 *
 * Defaults follow the specification (4 KB L0 registers, 256 KB L1 SRAM, 512 KB L2 CMX, DRAM,
 * 32x32 tiles, 16-element vectors, 16x16 matrix engine, 64-wide vector unit) and published
 * figures for everything it leaves open; docs/user-guide/npu-config.md gives the source of each
 * number.
 * Specs only: no state. Compile options (none yet) would be a separate type.
 */
#ifndef EXAMPLE_NPU_CONFIG_NPU_CONFIG_H_
#define EXAMPLE_NPU_CONFIG_NPU_CONFIG_H_

#include <cstdint>
#include <string>

#include "graph/op.h"

namespace example_npu {

/*! \brief Memory tiers, closest to the engines first. */
enum class Tier { kL0, kL1, kL2, kDram };
const char* TierName(Tier tier);

/*!
 * \brief What stays in the matrix engine's cells during a fold (config/matrix_engine.h):
 * output-stationary cells accumulate one output each while the reduction streams through;
 * weight-stationary cells hold one weight each while the pixels stream through.
 */
enum class MatrixDataflow { kOutputStationary, kWeightStationary, kBlock };

/*! \brief The engine whose timeline a kind of work occupies (NPUConfig.depthwise_engine,
 * NPUConfig.elementwise_engine): its own unit, or the MAC array, one op at a time. */
enum class WorkEngine { kVector, kMatrix };

/*! \brief Where constant weights are read from (NPUConfig.weight_memory). */
enum class WeightMemory { kDram, kFlash };

/*! \brief How constant weights are stored (NPUConfig.weight_layout): in their tensor layout, so a
 * weight tile is a strided read paying whole bursts, or encoded offline in the order the MAC array
 * reads them (as Ethos-U's weight streams are), so every weight tile is one contiguous run. */
enum class WeightLayout { kTensor, kEncoded };

/*! \brief Which weights are staged in L2 before their layer reads them (NPUConfig.weight_staging):
 * those read again by later tiles ("reused"), or every weight that fits ("always": a weight
 * buffer the DMA fills while the previous layer computes, as Ethos-U buffers weights in SRAM). */
enum class WeightStaging { kReused, kAlways };

/*! \brief Which feature maps live in the on-chip SRAM arena (NPUConfig.feature_map_memory):
 * none, every one (inputs, outputs and intermediates, when they fit together), or only the
 * intermediates (when they fit; inputs and outputs stay in DRAM). */
enum class FeatureMapMemory { kDram, kSram, kSramIntermediates };

struct NPUConfig {
  // Memory hierarchy.
  int64_t l0_register_kb = 4;
  int64_t l1_sram_kb = 256;
  int64_t l2_cmx_kb = 512;
  // Tiling granules.
  int64_t tile_height = 32;
  int64_t tile_width = 32;
  int64_t vector_elements = 16;
  // Engines.
  int64_t matrix_engine_dim = 16;
  int64_t vector_unit_width = 64;
  int64_t activation_unit_lanes = 16;
  int64_t pooling_unit_lanes = 16;
  int64_t dma_channels = 2;
  // Channels of their own for off-chip weight reads (0: they share dma_channels).
  int64_t weight_dma_channels = 0;
  /*! \brief "output_stationary", "weight_stationary" or "block" (see MatrixDataflow). */
  std::string dataflow = "output_stationary";
  // The block dataflow's block: each cycle the MAC array computes this many output pixels x
  // output channels, each reduced over this many products.
  int64_t mac_block_pixels = 4;
  int64_t mac_block_channels = 8;
  int64_t mac_block_depth = 8;
  // Depthwise convolutions: "vector" (the vector unit, at its lane rate) or "matrix" (the MAC
  // array, at depthwise_macs_per_cycle).
  std::string depthwise_engine = "vector";
  int64_t depthwise_macs_per_cycle = 256;
  // Vector and pooling work: "vector" (on their own units at their lane rates, overlapping the
  // MAC array) or "matrix" (on the MAC array's timeline, one op at a time, at
  // elementwise_elements_per_cycle 8-bit elements; activations and requantization then run in
  // the array's output stage, the activation unit).
  std::string elementwise_engine = "vector";
  double elementwise_elements_per_cycle = 16.0;
  // Fixed cycles of every fused op (programming the engines for it), paid once per group.
  int64_t op_setup_cycles = 0;
  // Bandwidth and latency per tier.
  double l1_bandwidth_bytes_per_cycle = 128.0;
  double l2_bandwidth_bytes_per_cycle = 64.0;
  double dram_bandwidth_gb_per_s = 16.0;
  int64_t l1_latency_cycles = 2;
  int64_t l2_latency_cycles = 20;
  double dram_latency_ns = 100.0;
  // Weights: "dram", or "flash" (off-chip flash on its own port at flash_bandwidth_gb_per_s).
  std::string weight_memory = "dram";
  // Weights stored in their tensor layout ("tensor") or in the array's read order ("encoded").
  std::string weight_layout = "tensor";
  // Per output channel of a quantized layer, bytes of parameters (bias, requantization scale and
  // shift) stored beside its weights and read with every weight tile.
  int64_t weight_record_bytes = 0;
  // Weights staged in L2: those later tiles read again ("reused") or all that fit ("always").
  std::string weight_staging = "reused";
  double flash_bandwidth_gb_per_s = 0.5;
  double flash_latency_ns = 1000.0;
  // Feature maps: "dram", or in an SRAM arena of sram_arena_kb on its own port ("sram": all of
  // them, "sram_intermediates": only the intermediates), when they fit.
  std::string feature_map_memory = "dram";
  int64_t sram_arena_kb = 0;
  double sram_bandwidth_bytes_per_cycle = 16.0;
  int64_t sram_latency_cycles = 32;
  // Feature-map reads: 0 (the DMA reads contiguous runs), or the bytes of one position's channels
  // the NPU fetches at a time; a feature map whose innermost run is shorter is read element by
  // element, each element costing the memory's burst over this granule (dram_ / sram_burst_bytes).
  int64_t fm_read_granule_bytes = 0;
  int64_t dram_burst_bytes = 32;
  int64_t sram_burst_bytes = 32;
  // A convolution input of at most fm_read_granule_bytes per position is read once per block of
  // this many output channels (0: once per tile): Ethos-U re-reads it for every output block.
  int64_t narrow_input_reread_channels = 0;
  // An intermediate only the next fused group reads takes this many rows (per image) of the SRAM
  // arena, not its whole size (0: whole): the two groups run as a cascade through a stripe.
  int64_t cascade_stripe_rows = 0;
  // Capacity of the DRAM the NPU addresses: an NPU function's inputs, weights, outputs and
  // intermediates (after reuse) must fit, checked at compile time before anything is allocated.
  int64_t dram_mb = 4096;
  // Op tiles one NPU function may compile to: every op of a fused group counts once per tile
  // (reduction chunks included). Bounds the command stream, and with it compile time and the
  // emulator's memory.
  int64_t max_tiles = 1 << 18;
  // Energy at the nominal voltage (0.9 V), per MAC / vector op / byte accessed.
  double energy_mac_int8_pj = 0.23;
  double energy_mac_int16_pj = 0.85;
  double energy_mac_float16_pj = 1.5;
  double energy_mac_float32_pj = 4.6;
  double energy_vector_op_pj = 0.9;
  double energy_l0_pj_per_byte = 0.1;
  double energy_l1_pj_per_byte = 2.8;
  double energy_l2_pj_per_byte = 4.5;
  double energy_dram_pj_per_byte = 64.0;
  std::string power_mode = "balanced";
  // The clock of the high_performance mode; every power mode's clock scales with it.
  double peak_clock_mhz = 1000.0;

  /*! \brief Parses the JSON written by example_npu.NPUConfig.to_json(); missing keys keep
   * defaults, unknown keys and invalid values raise ValueError. */
  static NPUConfig FromJSON(const std::string& json_text);
  std::string ToJSON() const;
  /*!
   * \brief Raises ValueError for a configuration that describes no buildable NPU: a field
   * outside its documented range (FieldRangesJSON), or an L1 smaller than one float32 tile.
   */
  void Validate() const;
  /*! \brief {"field": {"default": d, "min": lo, "max": hi}, ...} of every numeric field (the
   * Python mirror example_npu.NPUConfig is tested against it). */
  static std::string FieldRangesJSON();

  int64_t TierBytes(Tier tier) const;
  double clock_mhz() const;
  double voltage() const;
  /*! \brief Dynamic energy scales with V^2 relative to the 0.9 V the energies are quoted at. */
  double EnergyScale() const;
  MatrixDataflow matrix_dataflow() const;
  WorkEngine depthwise_work_engine() const;
  WorkEngine elementwise_work_engine() const;
  WeightMemory weight_memory_kind() const;
  WeightLayout weight_layout_kind() const;
  WeightStaging weight_staging_kind() const;
  FeatureMapMemory feature_map_memory_kind() const;
  /*! \brief Off-chip flash bytes per NPU cycle. */
  double FlashBytesPerCycle() const;
  int64_t FlashLatencyCycles() const;
  // Reads of a convolution input of `channel_bytes` per position that feeds `out_channels`
  // output channels: once per block of narrow_input_reread_channels when the input is narrow
  // (at most fm_read_granule_bytes per position), else once.
  int64_t NarrowInputReads(int64_t channel_bytes, int64_t out_channels) const;
  double BandwidthBytesPerCycle(Tier tier) const;
  int64_t LatencyCycles(Tier tier) const;
  /*! \brief Matrix-engine MACs per cycle: int8 at full rate (one MAC per cell, or the block's
   * pixels x channels x depth), 16-bit types at half rate, float32 at quarter rate. */
  int64_t MatrixMacsPerCycle(DType dtype) const;
  double MacEnergyPj(DType dtype) const;
};

}  // namespace example_npu

#endif  // EXAMPLE_NPU_CONFIG_NPU_CONFIG_H_
