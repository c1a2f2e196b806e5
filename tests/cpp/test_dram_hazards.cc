// DRAM hazards between groups: the index gives exactly the dependencies a scan of every earlier
// use gives (of a chain's uses, the latest version met), and gives up (the command then waits for
// all earlier groups) instead of growing without bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>
#include <vector>

#include "compiler/dram_hazards.h"

namespace example_npu {
namespace {

/*! \brief The rule as a scan of every use: what DramHazards must answer. */
class ScanReference {
 public:
  void BeginGroup() { ++group_; }
  std::vector<int64_t> Order(int64_t space, int64_t begin, int64_t end, bool store) {
    std::vector<Use> met;
    auto order_after = [&](std::vector<Use>* uses) {
      std::vector<Use> kept;
      for (const Use& use : *uses) {
        const bool earlier = use.group < group_;
        const bool overlaps = use.space == space && use.begin < end && begin < use.end;
        if (earlier && overlaps) met.push_back(use);
        if (store && earlier && overlaps && begin <= use.begin && use.end <= end) continue;
        kept.push_back(use);
      }
      *uses = kept;
    };
    order_after(&stores_);
    if (store) order_after(&loads_);
    // A use is implied by one of a later version on its chain.
    std::vector<int64_t> deps;
    for (const Use& use : met) {
      const bool implied =
          use.chain >= 0 && std::any_of(met.begin(), met.end(), [&](const Use& other) {
            return other.chain == use.chain && other.version > use.version;
          });
      if (!implied) deps.push_back(use.command);
    }
    std::sort(deps.begin(), deps.end());
    return deps;
  }
  void Record(int64_t space, int64_t begin, int64_t end, int64_t id, bool store, int64_t chain = -1,
              int64_t version = 0) {
    (store ? stores_ : loads_).push_back(Use{space, begin, end, id, group_, chain, version});
  }

 private:
  struct Use {
    int64_t space, begin, end, command, group, chain, version;
  };
  std::vector<Use> loads_, stores_;
  int64_t group_ = 0;
};

/*! \brief One DMA's access of DRAM, as a test draws it. */
struct Access {
  int64_t space = 0;
  int64_t begin = 0;
  int64_t end = 0;
  bool store = false;
  int64_t chain = -1;
  int64_t version = 0;
};

/*!
 * \brief 30 groups of 40 accesses, `draw(rng, group, id)` each, through the index and the scan:
 * the same lists every time. Returns how many lists had more than one command.
 */
template <typename Draw>
int64_t ExpectTheScansLists(unsigned seed, Draw draw) {
  std::mt19937_64 rng(seed);
  DramHazards index;
  ScanReference reference;
  int64_t id = 0, several = 0;
  for (int group = 0; group < 30; ++group) {
    index.BeginGroup();
    reference.BeginGroup();
    for (int access = 0; access < 40; ++access, ++id) {
      const Access a = draw(&rng, group, id);
      std::vector<int64_t> deps;
      EXPECT_TRUE(index.Order({0, a.space}, a.begin, a.end, a.store, &deps));
      std::sort(deps.begin(), deps.end());
      EXPECT_EQ(deps, reference.Order(a.space, a.begin, a.end, a.store))
          << "seed " << seed << " command " << id;
      index.Record({0, a.space}, a.begin, a.end, id, a.store, a.chain, a.version);
      reference.Record(a.space, a.begin, a.end, id, a.store, a.chain, a.version);
      several += deps.size() > 1;
    }
  }
  return several;
}

TEST(DramHazardsTest, SameDependenciesAsAScanOfEveryEarlierUse) {
  for (unsigned seed = 0; seed < 20; ++seed) {
    const int64_t several = ExpectTheScansLists(seed, [](std::mt19937_64* rng, int, int64_t) {
      Access a;
      a.space = static_cast<int64_t>((*rng)() % 3);
      a.begin = static_cast<int64_t>((*rng)() % 2000);
      // Mostly tile-sized ranges, sometimes a wide one (a tile spanning many rows).
      a.end = a.begin + 1 + static_cast<int64_t>((*rng)() % ((*rng)() % 8 == 0 ? 1500 : 64));
      a.store = (*rng)() % 2 == 0;
      return a;
    });
    EXPECT_GT(several, 50) << "seed " << seed;
  }
}

TEST(DramHazardsTest, OfAChainsUsesOnlyTheLatestVersionMetIsListed) {
  // Uses on a few chains (slots), with versions that repeat (two stores of one tile) and uses on
  // no chain: a query lists, per chain, the uses of the latest version among those it overlaps.
  for (unsigned seed = 0; seed < 20; ++seed) {
    std::mt19937_64 rng(100 + seed);
    DramHazards index;
    ScanReference reference, unchained;
    int64_t id = 0, pruned = 0;
    for (int group = 0; group < 30; ++group) {
      index.BeginGroup();
      reference.BeginGroup();
      unchained.BeginGroup();
      for (int access = 0; access < 40; ++access) {
        const int64_t begin = static_cast<int64_t>(rng() % 2000);
        const int64_t length = 1 + static_cast<int64_t>(rng() % (rng() % 4 == 0 ? 1500 : 64));
        const bool store = rng() % 2 == 0;
        const int64_t chain = rng() % 4 == 0 ? -1 : 4 * group + static_cast<int64_t>(rng() % 4);
        const int64_t version = id - static_cast<int64_t>(rng() % 3);
        std::vector<int64_t> deps;
        ASSERT_TRUE(index.Order({0, 0}, begin, begin + length, store, &deps));
        std::sort(deps.begin(), deps.end());
        const std::vector<int64_t> expected = reference.Order(0, begin, begin + length, store);
        EXPECT_EQ(deps, expected) << "seed " << seed << " command " << id;
        pruned += expected.size() < unchained.Order(0, begin, begin + length, store).size();
        index.Record({0, 0}, begin, begin + length, id, store, chain, version);
        reference.Record(0, begin, begin + length, id, store, chain, version);
        unchained.Record(0, begin, begin + length, id, store);
        ++id;
      }
    }
    EXPECT_GT(pruned, 100) << "seed " << seed;  // the chains left uses out
  }
}

TEST(DramHazardsTest, RepeatedRangesAnswerAsTheScanDoes) {
  // A group loads the same boxes again and again (one tile for every tile it meets) and stores
  // over boxes that earlier groups loaded: ranges from a small set, some inside others, so that
  // loads repeat between stores that drop what they cover. The answers kept for repeated loads
  // and the uses of one range kept as one must list what the scan lists.
  const std::vector<std::pair<int64_t, int64_t>> ranges = {
      {0, 64}, {64, 128}, {0, 128}, {32, 96}, {128, 256}, {0, 256}, {200, 210}, {96, 400}};
  for (unsigned seed = 0; seed < 20; ++seed) {
    const int64_t several =
        ExpectTheScansLists(200 + seed, [&](std::mt19937_64* rng, int group, int64_t id) {
          Access a;
          std::tie(a.begin, a.end) = ranges[(*rng)() % ranges.size()];
          a.store = (*rng)() % 4 == 0;
          a.chain = (*rng)() % 5 == 0 ? -1 : 3 * group + static_cast<int64_t>((*rng)() % 3);
          a.version = id;
          return a;
        });
    EXPECT_GT(several, 100) << "seed " << seed;
  }
}

TEST(DramHazardsTest, UsesKeptAsOneStillCountAsVisits) {
  // One tile loaded kMaxVisits + 1 times through one slot: a store over it waits for the last
  // load only, but gives up where it met as many uses before.
  for (const int64_t loads : {DramHazards::kMaxVisits, DramHazards::kMaxVisits + 1}) {
    DramHazards index;
    index.BeginGroup();
    for (int64_t t = 0; t < loads; ++t) index.Record({0, 0}, 0, 64, t, false, /*chain=*/0, t);
    index.BeginGroup();
    std::vector<int64_t> deps;
    const bool complete = index.Order({0, 0}, 0, 64, /*store=*/true, &deps);
    EXPECT_EQ(complete, loads <= DramHazards::kMaxVisits) << loads << " loads";
    if (complete) EXPECT_EQ(deps, std::vector<int64_t>{loads - 1});
  }
}

TEST(DramHazardsTest, ManyOverlappingUsesGiveUpInsteadOfListingThemAll) {
  // Tiles of one tensor tiled along its last dim: each store spans the bytes of all its rows, so
  // every earlier store meets every later load.
  const int64_t tiles = 4 * DramHazards::kMaxVisits;
  DramHazards index;
  index.BeginGroup();
  for (int64_t t = 0; t < tiles; ++t) index.Record({0, 0}, 4 * t, 4 * t + 1'000'000, t, true);
  index.BeginGroup();
  std::vector<int64_t> deps;
  EXPECT_FALSE(index.Order({0, 0}, 4 * tiles, 4 * tiles + 4, /*store=*/false, &deps));
  EXPECT_LE(static_cast<int64_t>(deps.size()), DramHazards::kMaxVisits);
  // A few overlapping uses are listed exactly.
  deps.clear();
  EXPECT_TRUE(index.Order({0, 1}, 0, 4, /*store=*/false, &deps));
  EXPECT_TRUE(deps.empty());
  deps.clear();
  EXPECT_TRUE(index.Order({0, 0}, 4 * tiles + 1'000'000, 4 * tiles + 1'000'004, false, &deps));
  EXPECT_TRUE(deps.empty());
}

/*!
 * \brief The same rule with the visit limit, walked as the index walks: a space's earlier uses by
 * where they begin (equal begins in recording order), from the longest use's length before the
 * query; a query that gives up has listed and dropped only the uses it visited.
 */
class LimitedScanReference {
 public:
  void BeginGroup() { ++group_; }
  bool Order(int64_t begin, int64_t end, bool store, std::vector<int64_t>* deps) {
    int64_t visits = 0;
    if (!Walk(&stores_, begin, end, store, deps, &visits)) return false;
    return !store || Walk(&loads_, begin, end, /*drop_covered=*/true, deps, &visits);
  }
  void Record(int64_t begin, int64_t end, int64_t id, bool store) {
    (store ? stores_ : loads_).push_back(Use{begin, end, id, group_});
  }

 private:
  struct Use {
    int64_t begin, end, command, group;
  };
  bool Walk(std::vector<Use>* uses, int64_t begin, int64_t end, bool drop_covered,
            std::vector<int64_t>* deps, int64_t* visits) {
    std::vector<size_t> earlier;
    int64_t longest = 0;
    for (size_t i = 0; i < uses->size(); ++i) {
      if ((*uses)[i].group >= group_) continue;
      earlier.push_back(i);
      longest = std::max(longest, (*uses)[i].end - (*uses)[i].begin);
    }
    std::stable_sort(earlier.begin(), earlier.end(),
                     [&](size_t a, size_t b) { return (*uses)[a].begin < (*uses)[b].begin; });
    std::vector<bool> dropped(uses->size(), false);
    bool complete = true;
    for (size_t i : earlier) {
      const Use& use = (*uses)[i];
      if (use.begin <= begin - longest || use.begin >= end) continue;
      if (++*visits > DramHazards::kMaxVisits) {
        complete = false;
        break;
      }
      if (use.end <= begin) continue;
      deps->push_back(use.command);
      dropped[i] = drop_covered && begin <= use.begin && use.end <= end;
    }
    std::vector<Use> kept;
    for (size_t i = 0; i < uses->size(); ++i) {
      if (!dropped[i]) kept.push_back((*uses)[i]);
    }
    *uses = kept;
    return complete;
  }
  std::vector<Use> loads_, stores_;
  int64_t group_ = 0;
};

TEST(DramHazardsTest, GivingUpListsAndDropsTheUsesVisitedInAddressOrder) {
  // Many equal and overlapping ranges: queries give up part way, and what they dropped before
  // giving up decides what later queries see.
  std::mt19937_64 rng(7);
  DramHazards index;
  LimitedScanReference reference;
  int64_t id = 0, gave_up = 0, listed = 0;
  for (int group = 0; group < 80; ++group) {
    index.BeginGroup();
    reference.BeginGroup();
    for (int access = 0; access < 150; ++access) {
      // Narrow stores drop little; wide loads (a tile spanning many rows) pile up.
      const bool store = rng() % 2 == 0;
      const int64_t begin = 16 * static_cast<int64_t>(rng() % 256);
      const int64_t length = !store && rng() % 4 == 0 ? 8192 : 16 * (1 + rng() % 4);
      std::vector<int64_t> deps, expected;
      const bool complete = index.Order({0, 0}, begin, begin + length, store, &deps);
      ASSERT_EQ(complete, reference.Order(begin, begin + length, store, &expected))
          << "command " << id;
      std::sort(deps.begin(), deps.end());
      std::sort(expected.begin(), expected.end());
      ASSERT_EQ(deps, expected) << "command " << id;
      index.Record({0, 0}, begin, begin + length, id, store);
      reference.Record(begin, begin + length, id, store);
      ++id;
      gave_up += !complete;
      listed += complete && !deps.empty();
    }
  }
  EXPECT_GT(gave_up, 100);
  EXPECT_GT(listed, 1000);
}

}  // namespace
}  // namespace example_npu
