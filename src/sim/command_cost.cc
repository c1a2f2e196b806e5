#include "sim/command_cost.h"

#include <algorithm>
#include <cmath>
#include <variant>

#include "config/matrix_engine.h"
#include "kernels/conv_transpose.h"
#include "support/checked_math.h"

namespace example_npu {
namespace command_cost {
namespace {

/*! \brief Vector lanes per cycle: 32-bit lanes, packed 2x for 16-bit and 4x for 8-bit data. */
int64_t VectorOpsPerCycle(const NPUConfig& config, DType dtype) {
  return config.vector_unit_width * (4 / std::min<int64_t>(4, DTypeBytes(dtype)));
}

double VectorOpEnergy(const NPUConfig& config, DType dtype) {
  return config.energy_vector_op_pj * DTypeBytes(dtype) / 4.0;
}

/*! \brief Depthwise convolution: a vector-unit command that multiplies (grouped convolutions
 * with one input channel per group are planned there). */
bool IsDepthwise(const ComputeCommand& compute) {
  return compute.engine == Engine::kVector && compute.macs > 0;
}

/*! \brief A requantization of integer accumulators on an NPU whose elementwise work shares the
 * MAC array: its output stage does it, beside activations, as results leave the array. */
bool InOutputStage(const NPUConfig& config, const ComputeCommand& compute) {
  return compute.step == ComputeStep::kRequantize &&
         config.elementwise_work_engine() == WorkEngine::kMatrix;
}

/*! \brief Cycles of `work` elements on the MAC array's elementwise path: 8-bit elements at
 * elementwise_elements_per_cycle, wider ones at half or a quarter of it. */
int64_t ArrayElementwiseCycles(const NPUConfig& config, DType dtype, int64_t work) {
  const double products = static_cast<double>(work) * MatrixPasses(dtype);
  return checked::ToInt64(std::ceil(products / config.elementwise_elements_per_cycle),
                          "elementwise cycles");
}

/*! \brief The output pixels x channels of a matrix command's tile and its reduction depth. */
MatrixWork MatrixWorkOf(const ComputeCommand& compute) {
  MatrixWork work;
  work.channels = compute.output.shape.empty() ? 1 : compute.output.shape.back();
  work.pixels = compute.elements / std::max<int64_t>(1, work.channels);
  work.depth = compute.macs / std::max<int64_t>(1, compute.elements);
  const kernels::Conv2dParams* conv = nullptr;
  if (const auto* attrs = std::get_if<ConvAttrs>(&compute.attrs)) conv = &attrs->params;
  // qnn.matmul leaves conv at its defaults (one group) and has a 2-D weight.
  if (const auto* qnn = std::get_if<QnnAttrs>(&compute.attrs)) conv = &qnn->conv;
  if (conv == nullptr) return work;
  work.groups = conv->groups;
  if (compute.inputs.size() > 1 && compute.inputs[1].shape.size() == 4) {
    const Shape& weight = compute.inputs[1].shape;
    work.taps = conv->kernel_layout == kernels::KernelLayout::kHWIO ? weight[0] * weight[1]
                                                                    : weight[2] * weight[3];
  }
  return work;
}

/*!
 * \brief A transposed convolution tile: one GEMM per output phase (kernels/conv_transpose.h),
 * each over the phase's pixels, the tile's output channels and its taps x input channels.
 */
int64_t TransposedConvCycles(const NPUConfig& config, DType dtype, const ComputeCommand& compute) {
  const kernels::ConvTransposeParams& p = TransposedConvAttrsOf(compute.attrs).params;
  const Shape& out = compute.output.shape;        // (1, oh, ow, oc)
  const Shape& weight = compute.inputs[1].shape;  // (kh, kw, ic, oc per group)
  const int64_t depth = weight[2] / std::max<int64_t>(1, p.groups);
  int64_t cycles = 0;
  for (const kernels::TransposedPhase& phase :
       kernels::TransposedPhases(p, out[1], out[2], weight[0], weight[1])) {
    if (phase.taps == 0) continue;
    cycles += MatrixEngineCycles(
        config, dtype, MatrixWork{out[0] * phase.pixels, out[3], phase.taps * depth, p.groups});
  }
  return cycles;
}

}  // namespace

Engine TimelineOf(const NPUConfig& config, const ComputeCommand& compute) {
  if (InOutputStage(config, compute)) return Engine::kActivation;
  if (compute.engine != Engine::kVector && compute.engine != Engine::kPooling) {
    return compute.engine;
  }
  if (IsDepthwise(compute) && config.depthwise_work_engine() == WorkEngine::kMatrix) {
    return Engine::kMatrix;
  }
  return config.elementwise_work_engine() == WorkEngine::kMatrix ? Engine::kMatrix : compute.engine;
}

Cost ComputeCost(const Program& program, const ComputeCommand& compute) {
  const NPUConfig& config = program.config;
  const Node& node = program.graph.nodes[compute.node];
  // Quantized ops run at the rate of their activations (8 or 16 bits), not of their output.
  const DType dtype = IsQnnOp(node.op) ? program.graph.nodes[node.inputs[0]].dtype : node.dtype;
  Cost cost;
  int64_t operand_bytes = TileBytes(compute.output);
  for (const TileRef& input : compute.inputs) operand_bytes += TileBytes(input);
  cost.bytes[TierIndex(Tier::kL1)] = operand_bytes;
  cost.energy_pj = operand_bytes * config.energy_l1_pj_per_byte;
  const int64_t elements = std::max<int64_t>(1, compute.elements);
  int64_t cycles = 0;
  switch (compute.engine) {
    case Engine::kMatrix: {
      const bool transposed =
          node.op == OpKind::kConv2dTranspose || node.op == OpKind::kQnnConv2dTranspose;
      cycles = transposed ? TransposedConvCycles(config, dtype, compute)
                          : MatrixEngineCycles(config, dtype, MatrixWorkOf(compute));
      cost.bytes[TierIndex(Tier::kL0)] = 2 * elements * 4;  // accumulator read-modify-write
      cost.energy_pj += compute.macs * config.MacEnergyPj(dtype) +
                        2 * elements * 4 * config.energy_l0_pj_per_byte;
      break;
    }
    case Engine::kVector: {
      if (InOutputStage(config, compute)) {
        const int64_t lanes = config.activation_unit_lanes;
        cycles = (elements + lanes - 1) / lanes;
        cost.energy_pj += elements * VectorOpEnergy(config, dtype);
        break;
      }
      if (IsDepthwise(compute) && config.depthwise_work_engine() == WorkEngine::kMatrix) {
        const int64_t rate = config.depthwise_macs_per_cycle;
        const int64_t products = checked::Mul(compute.macs, MatrixPasses(dtype), "depthwise MACs");
        cycles = products / rate + (products % rate != 0);
        cost.energy_pj += compute.macs * config.MacEnergyPj(dtype);
        break;
      }
      const int64_t work = compute.macs > 0 ? compute.macs : elements;
      // batch_norm: subtract and scale; layer_norm: mean, variance and normalise passes; group
      // norm: sum and sum of squares, then subtract, scale and shift.
      const int64_t passes =
          node.op == OpKind::kLayerNorm   ? 3
          : node.op == OpKind::kBatchNorm ? 2
          : std::holds_alternative<NormAttrs>(compute.attrs)
              ? (std::get<NormAttrs>(compute.attrs).step == NormAttrs::Step::kStatistics ? 2 : 3)
              : 1;
      const bool on_array = config.elementwise_work_engine() == WorkEngine::kMatrix;
      cycles = passes * (on_array ? ArrayElementwiseCycles(config, dtype, work)
                                  : (work + VectorOpsPerCycle(config, dtype) - 1) /
                                        VectorOpsPerCycle(config, dtype));
      cost.energy_pj += compute.macs > 0 ? compute.macs * config.MacEnergyPj(dtype)
                                         : passes * work * VectorOpEnergy(config, dtype);
      break;
    }
    case Engine::kActivation: {
      // LUT evaluation per element; softmax adds max, sum and scale passes on the vector lanes.
      const int64_t lanes = config.activation_unit_lanes;
      const bool softmax = node.op == OpKind::kSoftmax || node.op == OpKind::kQnnSoftmax;
      const int64_t vector_passes = softmax ? 3 : 0;
      cycles = (elements + lanes - 1) / lanes +
               vector_passes * ((elements + VectorOpsPerCycle(config, dtype) - 1) /
                                VectorOpsPerCycle(config, dtype));
      cost.energy_pj += (1 + vector_passes) * elements * VectorOpEnergy(config, dtype) * 2;
      break;
    }
    case Engine::kPooling: {
      cycles = config.elementwise_work_engine() == WorkEngine::kMatrix
                   ? ArrayElementwiseCycles(config, dtype, elements)
                   : (elements + config.pooling_unit_lanes - 1) / config.pooling_unit_lanes;
      cost.energy_pj += elements * VectorOpEnergy(config, dtype);
      break;
    }
    case Engine::kDma:
      break;
  }
  cost.cycles = kIssueCycles + cycles;
  return cost;
}

}  // namespace command_cost
}  // namespace example_npu
