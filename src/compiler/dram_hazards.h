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
 *
 * Most of what a query finds is implied: a store's byte range spans the loads of many tiles of an
 * earlier group, and those tiles passed through the same few L1 slots, each write of a slot
 * waiting for the previous one and its readers. A use may therefore name a chain (its slot) and a
 * version (the slot's write it belongs to): waiting for a use of a later version on a chain
 * already waits for every use of an earlier version there, so a query lists only the latest
 * version it met on each chain. The start of every command stays what it was; the lists are
 * shorter (ViT-B/16: 3.2 million dependencies where there were 36 million). For the same reason a
 * group's uses of one byte range on one chain (a tile loaded again for each tile it meets) are
 * kept as one use of the latest version, weighted by how many it stands for, so that a query's
 * visits and when it gives up stay as they were.
 */
#ifndef EXAMPLE_NPU_COMPILER_DRAM_HAZARDS_H_
#define EXAMPLE_NPU_COMPILER_DRAM_HAZARDS_H_

#include <cstddef>
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

  /*!
   * \brief Records command `id`'s access of [begin, end) in `space` for later groups. Uses of one
   * `chain` (>= 0) are ordered by `version`: whatever waits for one waits for all of lower
   * version on that chain. A chain of -1 is a use ordered with no other.
   */
  void Record(const Space& space, int64_t begin, int64_t end, int64_t id, bool store,
              int64_t chain = -1, int64_t version = 0);

 private:
  struct Use {
    int64_t begin = 0;
    int64_t end = 0;
    int64_t command = -1;  // -1: dropped (skipped, removed at the next merge)
    int64_t chain = -1;
    int64_t version = 0;
    /*! \brief The recorded uses this one stands for: older versions of its chain on the same
     * bytes are implied by it, but each still counts as a visit (kMaxVisits). */
    int64_t weight = 1;
  };
  /*! \brief The loads or the stores of one space. */
  struct Uses {
    std::vector<Use> earlier;        // by begin; equal begins in the order they were recorded
    std::multiset<int64_t> lengths;  // of the live `earlier`: the longest bounds a query's scan
    std::vector<Use> current;        // this group's, merged in at the next group
  };
  /*! \brief What a load of one byte range waits for, while the earlier stores it met stay. */
  struct LoadAnswer {
    std::vector<int64_t> deps;
    size_t drops_seen = 0;  // entries of dropped_stores known not to meet the range
    bool valid = false;
  };
  struct SpaceUses {
    Uses loads;
    Uses stores;
    /*!
     * \brief Complete answers of load queries by byte range. A group loads the same boxes again
     * and again (ViT-B/16: 136,000 of its 155,000 load queries repeat one), and a load's answer
     * depends only on the earlier stores it meets: it holds until new stores are merged in or a
     * store it met is dropped. (A drop elsewhere only shortens later scans: an answer that was
     * complete stays complete.)
     */
    std::map<std::pair<int64_t, int64_t>, LoadAnswer> load_answers;
    /*! \brief [begin, end) of the earlier stores dropped since the answers were last cleared. */
    std::vector<std::pair<int64_t, int64_t>> dropped_stores;
  };

  /*! \brief Latest version of a chain met by query `query`, and its command. */
  struct Latest {
    int64_t query = -1;
    int64_t version = 0;
    int64_t command = -1;
  };

  /*! \brief Files `uses->current` into `uses->earlier`, leaving out the dropped uses. */
  static void Merge(Uses* uses);
  /*!
   * \brief Meets the uses of `uses` overlapping [begin, end); false after kMaxVisits - *visits
   * more. Drops covered uses if `drop_covered`, noting their ranges in `dropped` (if given).
   */
  bool Visit(Uses* uses, int64_t begin, int64_t end, bool drop_covered, std::vector<int64_t>* deps,
             int64_t* visits, std::vector<std::pair<int64_t, int64_t>>* dropped);
  /*! \brief Order() without the answers kept for loads; false when it gave up. */
  bool Query(SpaceUses* uses, int64_t begin, int64_t end, bool store, std::vector<int64_t>* deps);
  /*! \brief Lists a use on no chain in `deps`; keeps the latest version of a chain's uses. */
  void Meet(const Use& use, std::vector<int64_t>* deps);

  std::map<Space, SpaceUses> spaces_;
  std::set<Space> touched_;  // spaces with uses in `current`
  // The current query: a number, the chains it met, their latest uses (by chain id, valid where
  // Latest::query is this query) and uses tying a chain's latest version.
  int64_t query_ = 0;
  std::vector<int64_t> chains_met_;
  std::vector<Latest> latest_;
  std::vector<Use> ties_;
};

}  // namespace example_npu

#endif  // EXAMPLE_NPU_COMPILER_DRAM_HAZARDS_H_
