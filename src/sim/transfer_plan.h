/*!
 * \file sim/transfer_plan.h
 * \brief How the emulator carries out each DMA command on the host, decided once per program.
 *
 * Every DMA gets its BoxCopy (coalesced dims, transposes, narrowing) and the element offset of
 * its box. With forwarding on, a transfer that is a plain contiguous copy of unchanged bytes is
 * not performed: the compute commands that would read the loaded tile read the DRAM bytes in
 * place, and a result whose only use is one contiguous store is computed straight into DRAM.
 * A group's copies of tensors into L2 are not performed either when nothing in the group reads L2
 * on the host (its tiles' loads were forwarded or come from arranged tiles). The bytes computed are
 * the same (the skipped copy is exact), and cycles, traffic and energy still count every transfer:
 * they come from the command stream (sim/timing.h), not from here. Forwarding off makes the
 * emulator move every byte through L1, as the tests also check.
 */
#ifndef EXAMPLE_NPU_SIM_TRANSFER_PLAN_H_
#define EXAMPLE_NPU_SIM_TRANSFER_PLAN_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "compiler/command_stream.h"
#include "sim/dma.h"

namespace example_npu {

/*!
 * \brief A place in a DRAM tensor's storage: graph node and element offset (tensor -1: none),
 * dense, or seen through the box strides of DMA command `view` (see StridedView in engines.h),
 * or one of the emulator's arranged constant tiles.
 */
struct DramRef {
  int64_t tensor = -1;
  int64_t offset = 0;
  int64_t view = -1;
  /*! \brief An arranged tile (TransferPlan::arranged) read in place, or -1. */
  int64_t arranged = -1;
  bool valid() const { return tensor >= 0; }
};

/*!
 * \brief A box of a read-only tensor that loads gather into their tile (OIHW weights transposed
 * into HWIO tiles, a weight's column slice as strided rows; again for every output tile), kept by
 * the emulator already arranged as that tile,
 * the way an NPU compiler stores weights in the order the engine streams them. Each such load
 * then copies (or forwards) a dense run instead of gathering. Constant boxes are arranged once
 * into the emulator's arena (constants are immutable; rebuilt when others are bound). Boxes of
 * a call's inputs that a group loads more than once are arranged into the run's arena when that
 * group starts. The loads still move every byte of their tile, and timing is unchanged (it
 * comes from the command stream).
 */
struct ArrangedTile {
  int64_t tensor = -1;
  /*! \brief Element offset of the box in the tensor's storage, and the copy that arranges it. */
  int64_t storage_offset = 0;
  BoxCopy arrange;
  /*! \brief In the constant arena, or (an input's box) in the run arena. */
  bool constant = true;
  /*! \brief Where the arranged tile lies in its arena. */
  int64_t arena_offset = 0;
};

/*! \brief Calls fn(begin, end) with each group's commands [begin, end), in stream order. */
template <typename Fn>
void ForEachGroup(const Program& program, Fn fn) {
  const int64_t count = static_cast<int64_t>(program.commands.size());
  for (int64_t begin = 0, end = 0; begin < count; begin = end) {
    for (end = begin; end < count && program.commands[end].group == program.commands[begin].group;
         ++end) {
    }
    fn(begin, end);
  }
}

/*! \brief Whether two tile references name the same on-chip buffer (tier, offset and shape). */
bool SameTile(const TileRef& a, const TileRef& b);

/*! \brief The DRAM storage a DMA reads or writes: placement kind and index. */
using DramKey = std::pair<int, int64_t>;
DramKey DramKeyOf(const Program& program, const DmaCommand& dma);

struct TransferPlan {
  /*! \brief Per command (default-constructed for compute commands). */
  std::vector<BoxCopy> copies;
  /*! \brief Per DMA command: element offset of the box in its remote tensor storage. */
  std::vector<int64_t> remote_offset;
  /*! \brief Per DMA command: element strides of the box in its remote storage, in tile order. */
  std::vector<std::vector<int64_t>> remote_strides;
  /*! \brief Per DMA command: the arranged tile it loads from instead of its remote tensor (-1:
   * none); its copy is then a dense run from there. */
  std::vector<int64_t> arranged_of;
  std::vector<ArrangedTile> arranged;
  /*! \brief Per group (Command::group): the input boxes arranged when it starts. */
  std::vector<std::vector<int64_t>> arranged_at_group;
  int64_t const_arena_bytes = 0;
  /*! \brief The run arena: the most any one group arranges. */
  int64_t run_arena_bytes = 0;
  /*! \brief Per group (Command::group): the DRAM storage it both loads and stores, or stores
   * overlapping boxes of (DramConflicts), whose transfers are never forwarded. */
  std::vector<std::set<DramKey>> conflicted;
  /*! \brief Per command: forwarded (or an unread L2 staging), so the emulator does not
   * perform it. */
  std::vector<bool> skipped;
  /*! \brief Per compute command, per input: the DRAM bytes it reads instead of its L1 tile. */
  std::vector<std::vector<DramRef>> input_from;
  /*! \brief Per compute command: the DRAM bytes it writes instead of its L1 result tile. */
  std::vector<DramRef> output_to;

  /*! \brief How many transfers are forwarded (skipped). */
  int64_t forwarded() const { return std::count(skipped.begin(), skipped.end(), true); }
};

/*!
 * \brief Plans every transfer of `program`; forwards contiguous ones when `forward` is set. A
 * transfer is forwarded only when no command of its group writes the DRAM tensor it reads (or
 * reads or overlappingly writes the one it writes), so moving the access in time is invisible.
 */
TransferPlan PlanTransfers(const Program& program, bool forward);

/*!
 * \brief Elements between consecutive pixels (rows of the innermost, dense dim) of store
 * `command`'s box in its DRAM tensor, when every pixel of the tile lies at one stride: 0 if not.
 */
int64_t PixelStrideInDram(const TransferPlan& plan, const DmaCommand& dma, int64_t command);

/*!
 * \brief Plans store `command` again as reading a tile of `tile_type` instead of the type the
 * command names (the emulator's fused requantization writes a stored tile's output integers
 * themselves, sim/emulator.h).
 */
void ReplanStore(const Program& program, int64_t command, DType tile_type, TransferPlan* plan);

/*!
 * \brief The DRAM storage the commands [begin, end) (one group) both load and store, or store
 * overlapping boxes of: a transfer of it cannot move in time, so it is never forwarded.
 */
std::set<DramKey> DramConflicts(const Program& program, int64_t begin, int64_t end);

/*!
 * \brief Whether two DMA boxes of one tensor may touch the same bytes. Exact for boxes seen
 * through the same strides; any other pair is assumed to overlap.
 */
bool BoxesMayOverlap(const DmaCommand& a, const DmaCommand& b);

/*!
 * \brief The DRAM boxes of one tensor seen so far, queried for BoxesMayOverlap without comparing
 * against every earlier box. Boxes seen through one stride vector are filed under the cells of a
 * grid whose cell is the first such box (a tiling walk starts with a full tile, so its tiles fall
 * into one cell each and halo boxes into a few), and a query compares only the boxes filed under
 * the cells it covers. That makes a query independent of the tile count, along any tiled dim.
 * The answers are exactly those of BoxesMayOverlap against every box added.
 */
class DramBoxIndex {
 public:
  void Add(int64_t id, const DmaCommand* dma);
  /*! \brief Calls fn(id) once for every added box that BoxesMayOverlap with `dma`. */
  void ForEachOverlap(const DmaCommand& dma, const std::function<void(int64_t)>& fn) const;

 private:
  struct Entry {
    int64_t id;
    const DmaCommand* dma;
  };
  using Cell = std::vector<int64_t>;
  struct Bucket {
    std::vector<int64_t> cell_extent;  // the first box's extent
    std::map<Cell, std::vector<Entry>> cells;
    std::vector<Entry> wide;  // boxes covering too many cells to file: always compared
  };
  /*! \brief The cells `box` covers; false (and nothing) when there are too many. */
  static bool CellsOf(const Bucket& bucket, const TensorBox& box, std::vector<Cell>* cells);

  std::map<std::vector<int64_t>, Bucket> buckets_;
  std::vector<Entry> empty_;  // boxes with an empty extent: always compared
};

}  // namespace example_npu

#endif  // EXAMPLE_NPU_SIM_TRANSFER_PLAN_H_
