/*!
 * \file compiler/dram_hazards.h
 * \brief DRAM hazards between groups, by the byte range each DMA box spans.
 *
 * A load waits for every store of an earlier group whose bytes overlap its own
 * (read-after-write); a store waits for every earlier group's overlapping load and store too
 * (write-after-read, write-after-write). A use wholly inside a later group's store is ordered
 * before that store, and so before everything that will wait for it: it is dropped.
 *
 * Uses are indexed by where they begin, so a query visits only the uses that begin within the
 * longest recorded range before its own end; the uses of the current group are kept apart (they
 * never order each other) and merged into the index when the next group starts. The index is a
 * vector sorted by begin (a dropped use is marked, and removed at the next merge): a query's
 * visits walk contiguous memory, not tree nodes. Compile time then stays linear in the commands
 * when tiles follow a grid. A tile's byte range can still meet thousands of others (a tensor tiled
 * along its last dim: each tile spans its rows' bytes); beyond kMaxVisits uses a query gives up and
 * the command waits for all earlier groups instead, as groups did before they could overlap. That
 * is never early, only later than needed, and bounds the work and the dependency lists of any
 * input.
 */
#ifndef EXAMPLE_NPU_COMPILER_DRAM_HAZARDS_H_
#define EXAMPLE_NPU_COMPILER_DRAM_HAZARDS_H_

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace example_npu {

class DramHazards {
 public:
  /*! \brief One DRAM address space: placement kind and index (one space for all scratch). */
  using Space = std::pair<int, int64_t>;
  /*! \brief Earlier uses a query may visit before it orders after all earlier groups. */
  static constexpr int64_t kMaxVisits = 1024;

  /*! \brief Starts the next group: the uses recorded so far become earlier groups' uses. */
  void BeginGroup();

  /*!
   * \brief Appends to `deps` the earlier groups' uses that an access of [begin, end) in `space`
   * must wait for, and drops those a store covers. Returns false when the query gave up (more
   * than kMaxVisits uses on its way): the access must then wait for all earlier groups.
   */
  bool Order(const Space& space, int64_t begin, int64_t end, bool store,
             std::vector<int64_t>* deps);

  /*! \brief Records command `id`'s access of [begin, end) in `space` for later groups. */
  void Record(const Space& space, int64_t begin, int64_t end, int64_t id, bool store);

 private:
  struct Use {
    int64_t begin = 0;
    int64_t end = 0;
    int64_t command = -1;  // -1: dropped (skipped, removed at the next merge)
  };
  /*! \brief The loads or the stores of one space. */
  struct Uses {
    std::vector<Use> earlier;        // by begin; equal begins in the order they were recorded
    std::multiset<int64_t> lengths;  // of the live `earlier`: the longest bounds a query's scan
    std::vector<Use> current;        // this group's, merged in at the next group
  };
  struct SpaceUses {
    Uses loads;
    Uses stores;
  };

  /*! \brief Files `uses->current` into `uses->earlier`, leaving out the dropped uses. */
  static void Merge(Uses* uses);
  /*! \brief Visits `uses` overlapping [begin, end); false after kMaxVisits - *visits more. */
  static bool Visit(Uses* uses, int64_t begin, int64_t end, bool drop_covered,
                    std::vector<int64_t>* deps, int64_t* visits);

  std::map<Space, SpaceUses> spaces_;
  std::set<Space> touched_;  // spaces with uses in `current`
};

}  // namespace example_npu

#endif  // EXAMPLE_NPU_COMPILER_DRAM_HAZARDS_H_
