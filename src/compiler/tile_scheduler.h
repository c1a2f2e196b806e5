/*!
 * \file compiler/tile_scheduler.h
 * \brief Turns the tiles of one fused group into commands with explicit dependencies.
 *
 * Tiling rules describe *what* each tile loads, computes and stores; the scheduler decides
 * *where* in L1 it lives (double-buffered slots laid out by the memory planner), skips loads of a
 * box that is already resident, and records read-after-write and write-after-read hazards as
 * dependencies, which is what lets the emulator overlap the next tile's DMA with this tile's
 * compute.
 */
#ifndef EXAMPLE_NPU_COMPILER_TILE_SCHEDULER_H_
#define EXAMPLE_NPU_COMPILER_TILE_SCHEDULER_H_

#include <cstdint>
#include <vector>

#include "compiler/command_stream.h"
#include "compiler/layout.h"

namespace example_npu {

/*! \brief One kind of on-chip buffer a group needs: `slots` copies of `bytes` each. */
struct BufferClass {
  int64_t bytes = 0;
  int64_t slots = 2;
  /*! \brief Data kept in L2 across tiles: the whole tensor is staged DRAM -> L2 once. */
  bool staged_in_l2 = false;
  int64_t staged_tensor_bytes = 0;
};

/*! \brief Offsets of every slot of every class, assigned by the memory planner. */
struct BufferLayout {
  std::vector<std::vector<int64_t>> l1_offsets;  // [class][slot]
  std::vector<int64_t> l2_offsets;               // [class], for staged classes
  int64_t l1_bytes = 0;
  int64_t l2_bytes = 0;
};

class TileScheduler {
 public:
  TileScheduler(const Graph& graph, const LayoutPlan& layout, Program* program);

  /*! \brief Starts a group; its buffers are laid out by `buffers`. */
  void BeginGroup(int64_t group, const std::vector<BufferClass>& classes,
                  const BufferLayout& buffers);

  /*!
   * \brief Loads `box` of `view` into a slot of buffer class `cls` (a tile of the tensor's dtype
   * in box.tile_order), or reuses the slot that already holds that box.
   */
  TileRef Load(int64_t cls, const TensorView& view, const TensorBox& box);

  /*! \brief A result tile of class `cls` (float32, or int64 accumulators), in its next slot. */
  TileRef NewResult(int64_t cls, const Shape& shape, DType dtype = DType::kFloat32);

  void Compute(ComputeCommand command);

  /*! \brief Stores a result tile to `box` of `view`, narrowing to the tensor's dtype. */
  void Store(const TileRef& tile, const TensorView& view, const TensorBox& box);

 private:
  struct Slot {
    int64_t offset = 0;
    int64_t writer = -1;
    std::vector<int64_t> readers;
    // Identity of the resident box, for reuse: tensor, begin, extent, order.
    std::vector<int64_t> key;
  };

  Slot& SlotAt(const TileRef& tile);
  int64_t Append(Command command);
  void AddDeps(Command* command, const Slot& slot, bool writes) const;

  const Graph& graph_;
  const LayoutPlan& layout_;
  Program* program_;
  int64_t group_ = 0;
  std::vector<std::vector<Slot>> slots_;
  std::vector<int64_t> next_slot_;
  std::vector<BufferClass> classes_;
  std::vector<int64_t> l2_offsets_;
  std::vector<int64_t> l2_stage_command_;
};

/*!
 * \brief Bytes a DMA of `box` moves over the DRAM / CMX bus: each contiguous run of the view is
 * rounded up to whole 32-byte bursts, which is what makes short strided runs (layout changes,
 * narrow tiles) expensive.
 */
int64_t BusBytes(const TensorView& view, const TensorBox& box, DType dtype);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_COMPILER_TILE_SCHEDULER_H_
