/*!
 * \file compiler/command_stream.h
 * \brief The compiled NPU program: tensor placement, on-chip buffers and the command stream.
 *
 * This is the contract between the compiler and the emulator (src/sim). It is a small typed
 * structure so either side can be tested without the other: DMA commands move boxes of tensors
 * between tiers, compute commands run one engine on tiles that are resident on chip, and every
 * command lists the commands it depends on.
 */
#ifndef EXAMPLE_NPU_COMPILER_COMMAND_STREAM_H_
#define EXAMPLE_NPU_COMPILER_COMMAND_STREAM_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "config/npu_config.h"
#include "graph/graph.h"

namespace example_npu {

/*! \brief Where a graph tensor lives in DRAM. */
struct TensorPlacement {
  enum class Kind { kInput, kOutput, kConst, kScratch, kNone };
  Kind kind = Kind::kNone;
  /*! \brief Argument / output / constant index, or the scratch byte offset. */
  int64_t index = 0;
  /*!
   * \brief Storage order of the logical dims, outermost first (identity = the declared layout).
   * NCHW activations passed between convolution/pooling groups are kept as NHWC (0, 2, 3, 1).
   */
  std::vector<int64_t> storage_order;
};

/*!
 * \brief A tile resident on chip: tier (L1, or L2 for staged weights), byte offset, dense shape
 * and element type. Loaded tiles keep the tensor's dtype; computed tiles are float32
 * accumulators, narrowed to the tensor's dtype by the store.
 */
struct TileRef {
  Tier tier = Tier::kL1;
  int64_t offset = 0;
  Shape shape;
  DType dtype = DType::kFloat32;
};

/*!
 * \brief A tensor seen through strides: logical shape over the DRAM storage of `tensor`,
 * starting `offset` elements into it (a slice). A stride of 0 repeats the data (broadcast).
 */
struct TensorView {
  int64_t tensor = -1;
  Shape shape;
  std::vector<int64_t> strides;  // in elements, one per logical dim
  int64_t offset = 0;            // in elements
};

/*!
 * \brief A box of a DRAM/L2 tensor: logical begin/extent per dim, and the order of the logical
 * dims inside the on-chip tile (outermost first), which is how DMA performs layout changes.
 */
struct TensorBox {
  int64_t tensor = -1;
  std::vector<int64_t> begin;
  std::vector<int64_t> extent;
  std::vector<int64_t> tile_order;
};

enum class Engine { kDma, kMatrix, kVector, kActivation, kPooling };
const char* EngineName(Engine engine);

struct DmaCommand {
  /*! \brief Remote -> tile (load) or tile -> DRAM (store). */
  bool store = false;
  /*! \brief DRAM, or L2 when the tensor was staged there (a byte copy of its DRAM storage). */
  Tier remote_tier = Tier::kDram;
  int64_t remote_offset = 0;
  TensorView view;
  TensorBox box;
  TileRef tile;
  /*! \brief Bytes actually crossing the bus, after burst rounding of strided runs. */
  int64_t bus_bytes = 0;
  /*!
   * \brief A row gather (take with run-time ids): the tile's row r is row ids[r] of `view` (axis
   * 0), the ids read from the int32 / int64 tile `gather_ids` on chip; `box` is the whole table.
   */
  bool gather = false;
  TileRef gather_ids;
  /*! \brief A negative id counts from the end of the table (TakeAttrs::negative_from_end). */
  bool gather_negative_from_end = false;
};

/*! \brief What a compute command does with its node: the op itself, or (quantized ops) the
 * requantization of the int accumulators into the output integers. */
enum class ComputeStep { kOp, kRequantize };

struct ComputeCommand {
  Engine engine = Engine::kVector;
  ComputeStep step = ComputeStep::kOp;
  /*! \brief The graph node this step computes (its op kind and dtype). */
  int64_t node = -1;
  /*! \brief The node's attributes adjusted to the tile (padding, layouts). */
  OpAttrs attrs;
  std::vector<TileRef> inputs;
  TileRef output;
  /*! \brief Adds into output (partial sums of a split reduction) instead of overwriting. */
  bool accumulate = false;
  /*! \brief Rounds the output to float16 after this step (last step of a float16 result). */
  bool round_to_half = false;
  int64_t macs = 0;
  int64_t elements = 0;
};

struct Command {
  int64_t id = 0;
  int64_t group = 0;
  /*! \brief One DMA transfer or one compute step (a command record holds only its own kind:
   * ViT-B/16 compiles to 360,000 of them). A default-constructed command is a DMA. */
  std::variant<DmaCommand, ComputeCommand> op;
  std::vector<int64_t> deps;
  /*!
   * \brief Also waits for every command of the earlier groups: set where the hazards on DRAM
   * were too many to list one by one (compiler/dram_hazards.h).
   */
  bool after_earlier_groups = false;

  bool is_dma() const { return std::holds_alternative<DmaCommand>(op); }
  const DmaCommand& dma() const { return std::get<DmaCommand>(op); }
  DmaCommand& dma() { return std::get<DmaCommand>(op); }
  const ComputeCommand& compute() const { return std::get<ComputeCommand>(op); }
  ComputeCommand& compute() { return std::get<ComputeCommand>(op); }
};

/*! \brief Per fused group facts kept for the profile. */
struct GroupInfo {
  std::string name;
  std::vector<int64_t> nodes;
  Engine engine = Engine::kVector;
  int64_t tiles = 0;
  std::vector<int64_t> tile_shape;
  /*! \brief The group's on-chip buffers: [l1_base, l1_base + l1_bytes) of L1, likewise L2. */
  int64_t l1_base = 0;
  int64_t l1_bytes = 0;
  int64_t l2_base = 0;
  int64_t l2_bytes = 0;
};

struct Program {
  Graph graph;
  NPUConfig config;
  std::vector<TensorPlacement> placements;  // one per graph node
  int64_t dram_scratch_bytes = 0;
  std::vector<GroupInfo> groups;
  std::vector<Command> commands;

  /*! \brief Human-readable listing: placements, groups and every command with its deps. */
  std::string ToText() const;
};

}  // namespace example_npu

#endif  // EXAMPLE_NPU_COMPILER_COMMAND_STREAM_H_
