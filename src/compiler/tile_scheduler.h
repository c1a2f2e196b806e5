/*!
 * \file compiler/tile_scheduler.h
 * \brief Turns the tiles of one fused group into commands with explicit dependencies.
 *
 * Tiling rules describe *what* each tile loads, computes and stores; the scheduler decides
 * *where* in L1 it lives (double-buffered slots laid out by the memory planner), skips loads of a
 * box that is already resident, and records read-after-write and write-after-read hazards as
 * dependencies, which is what lets the emulator overlap the next tile's DMA with this tile's
 * compute. Across groups it records the same hazards on the bytes earlier groups left behind:
 * on-chip buffers by byte range, DRAM by the byte range each DMA box spans. Nothing else orders
 * groups, so a group's loads can start while the previous group still computes, as far as L1
 * space and data dependencies allow.
 */
#ifndef EXAMPLE_NPU_COMPILER_TILE_SCHEDULER_H_
#define EXAMPLE_NPU_COMPILER_TILE_SCHEDULER_H_

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "compiler/command_stream.h"
#include "compiler/dram_hazards.h"
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
  std::vector<int64_t> slot_bytes;               // [class]: bytes each slot occupies (aligned)
  std::vector<int64_t> l2_offsets;               // [class], for staged classes
  std::vector<int64_t> l2_area_bytes;            // [class]: bytes of its staged copy, or 0
  /*! \brief The slots occupy [l1_base, l1_base + l1_bytes) of L1 (likewise for L2). */
  int64_t l1_base = 0;
  int64_t l1_bytes = 0;
  int64_t l2_base = 0;
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

  /*!
   * \brief Gathers rows of `table` (axis 0) into a tile of shape `rows` of class `cls`: row r is
   * table row ids[r], the ids being the loaded tile `ids` (a DMA that reads its addresses); a
   * negative id counts from the end when `negative_from_end`.
   */
  TileRef Gather(int64_t cls, const TensorView& table, const TileRef& ids, const Shape& rows,
                 bool negative_from_end);

  /*! \brief A result tile of class `cls` (float32, or int64 accumulators), in its next slot. */
  TileRef NewResult(int64_t cls, const Shape& shape, DType dtype = DType::kFloat32);

  void Compute(ComputeCommand command);

  /*! \brief Stores a result tile to `box` of `view`, narrowing to the tensor's dtype. */
  void Store(const TileRef& tile, const TensorView& view, const TensorBox& box);

 private:
  struct Slot {
    int64_t offset = 0;
    int64_t bytes = 0;
    int64_t writer = -1;
    std::vector<int64_t> readers;
    // Identity of the resident box, for reuse: tensor, begin, extent, order.
    std::vector<int64_t> key;
    // Not yet written by this group: its first write waits for earlier groups' use of its bytes.
    bool fresh = true;
    // Its DRAM hazard chain: each write of the slot waits for the previous write and its
    // readers, so a DMA of this slot's version `writer` implies those of earlier versions.
    int64_t chain = -1;
  };
  /*! \brief The last writer and readers of on-chip bytes [begin, end) in an earlier group. */
  struct OnChipUse {
    Tier tier = Tier::kL1;
    int64_t begin = 0;
    int64_t end = 0;
    int64_t writer = -1;
    std::vector<int64_t> readers;
  };
  /*! \brief The bytes [begin, end) a DMA touches in one DRAM address space. */
  struct DramRange {
    DramHazards::Space space;  // placement kind and index (one space for all scratch)
    int64_t begin = 0;
    int64_t end = 0;
  };

  Slot& SlotAt(const TileRef& tile);
  int64_t Append(Command command);
  void AddDeps(Command* command, Slot* slot, bool writes);
  /*! \brief Hands this group's buffers and DRAM uses to the next group as earlier ones. */
  void RetireGroup();
  /*! \brief A first write of [begin, end): waits for earlier groups' writers and readers there. */
  void AfterEarlierOnChip(Command* command, Tier tier, int64_t begin, int64_t end);
  DramRange DramRangeOf(const TensorView& view, const TensorBox& box) const;
  /*! \brief Waits for earlier groups' conflicting DMAs of `range` (see DramHazards). */
  void OrderDram(Command* command, const DramRange& range, bool store);

  const Graph& graph_;
  const LayoutPlan& layout_;
  Program* program_;
  int64_t group_ = 0;
  std::vector<std::vector<Slot>> slots_;
  int64_t chains_ = 0;  // slots handed out over all groups: each is a chain of its own
  /*! \brief Every slot of slots_ by its L1 offset (offsets are distinct within a group). */
  std::unordered_map<int64_t, Slot*> slot_at_offset_;
  std::vector<int64_t> next_slot_;
  std::vector<BufferClass> classes_;
  std::vector<int64_t> l2_offsets_;
  std::vector<int64_t> l2_area_bytes_;
  std::vector<int64_t> l2_stage_command_;
  std::vector<std::vector<int64_t>> l2_readers_;  // [class]: loads from its staged copy
  std::vector<OnChipUse> earlier_on_chip_;
  DramHazards dram_;
};

/*!
 * \brief Bytes a DMA of `box` moves over the DRAM / CMX bus: each contiguous run of the view is
 * rounded up to whole 32-byte bursts, which is what makes short strided runs (layout changes,
 * narrow tiles) expensive.
 */
int64_t BusBytes(const TensorView& view, const TensorBox& box, DType dtype);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_COMPILER_TILE_SCHEDULER_H_
