/*!
 * \file sim/dma_cost.h
 * \brief What a DMA command costs (sim/command_cost.h): its bus bytes (burst waste of narrow
 * feature-map runs, the per-channel records read with weights, re-reads of narrow convolution
 * inputs), cycles at the slower of its two memories' bandwidths, and the remote memory's latency.
 */
#ifndef EXAMPLE_NPU_SIM_DMA_COST_H_
#define EXAMPLE_NPU_SIM_DMA_COST_H_

#include <cstdint>
#include <vector>

#include "compiler/command_stream.h"
#include "sim/command_cost.h"
#include "sim/memory_placement.h"

namespace example_npu {
namespace command_cost {

/*! \brief Where a quantized layer's constant weight counts its output channels, whose records
 * (NPUConfig.weight_record_bytes) are read with it: its first or its last axis. */
enum class RecordAxis { kNone, kFirst, kLast };

/*! \brief Per tensor, the axis of its records: kNone but for the constant weights of quantized
 * ops on an NPU with NPUConfig.weight_record_bytes. */
std::vector<RecordAxis> RecordAxes(const Program& program);

/*! \brief Bytes of the per-channel records an off-chip weight read brings with it. */
int64_t RecordBytes(const Program& program, const std::vector<RecordAxis>& record_axes,
                    const DmaCommand& dma, Remote remote);

/*!
 * \brief Per command, how many times a load crosses the bus (1 but for the rule below): on an NPU
 * that re-reads a narrow convolution input for every block of
 * NPUConfig.narrow_input_reread_channels output channels (Ethos-U reads the input feature map
 * once per output block; Vela's blocks for a 1- to 8-channel input are 16 channels deep), a load
 * of such an input is read once per block of the output channels the MAC array computes from it
 * before the tile is overwritten.
 */
std::vector<int64_t> LoadReads(const Program& program, const ArenaPlacement& arena);

/*! \brief Cycles, bytes and energy of `dma` through the port of `remote`, with `record_bytes` of
 * weight records, read `reads` times. */
Cost DmaCost(const Program& program, const DmaCommand& dma, Remote remote, int64_t record_bytes,
             int64_t reads);

}  // namespace command_cost
}  // namespace example_npu

#endif  // EXAMPLE_NPU_SIM_DMA_COST_H_
