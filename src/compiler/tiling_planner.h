/*!
 * \file compiler/tiling_planner.h
 * \brief Tiling: per fused group, tile shapes whose double-buffered working set fits L1.
 *
 * Each anchor kind has a rule that knows its geometry: which output dims it may split, the halo
 * a convolution or pooling window needs, the reduction a matmul may split (accumulating partial
 * sums), and which operand stays resident. Plan() searches tile sizes aligned to the 16x16 matrix
 * engine / 16-element vectors for the least DRAM traffic that fits; an infeasible group is a
 * value with a reason, not an exception. Emit() then walks the tiles through the scheduler.
 */
#ifndef EXAMPLE_NPU_COMPILER_TILING_PLANNER_H_
#define EXAMPLE_NPU_COMPILER_TILING_PLANNER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/fusion.h"
#include "compiler/layout.h"
#include "compiler/tile_scheduler.h"
#include "config/npu_config.h"

namespace example_npu {

struct TilePlan {
  bool ok = false;
  std::string reason;
  std::vector<BufferClass> buffers;
  /*! \brief Tile extents (rule-specific dims) and tile count, for reports. */
  std::vector<int64_t> tile_shape;
  int64_t tiles = 0;
  Engine engine = Engine::kVector;
};

class TilingRule {
 public:
  virtual ~TilingRule() = default;
  virtual TilePlan Plan() = 0;
  /*! \brief Emits every tile of the last successful Plan(). */
  virtual void Emit(TileScheduler* scheduler) const = 0;
};

std::unique_ptr<TilingRule> MakeTilingRule(const Graph& graph, const FusedGroup& group,
                                           const LayoutPlan& layout, const NPUConfig& config);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_COMPILER_TILING_PLANNER_H_
