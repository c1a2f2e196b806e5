#include "compiler/dram_hazards.h"

#include <algorithm>

namespace example_npu {

void DramHazards::BeginGroup() {
  for (const Space& space : touched_) {
    SpaceUses& uses = spaces_[space];
    Merge(&uses.loads);
    Merge(&uses.stores);
  }
  touched_.clear();
}

void DramHazards::Merge(Uses* uses) {
  if (uses->current.empty()) return;
  // Stable: uses that begin at the same byte stay in the order they were recorded, earlier
  // groups' first, so a query visits them (and gives up) in the same order as ever.
  std::stable_sort(uses->current.begin(), uses->current.end(),
                   [](const Use& a, const Use& b) { return a.begin < b.begin; });
  std::vector<Use> merged;
  merged.reserve(uses->lengths.size() + uses->current.size());
  auto next = uses->current.begin();
  for (const Use& use : uses->earlier) {
    if (use.command < 0) continue;
    for (; next != uses->current.end() && next->begin < use.begin; ++next) merged.push_back(*next);
    merged.push_back(use);
  }
  merged.insert(merged.end(), next, uses->current.end());
  for (const Use& use : uses->current) uses->lengths.insert(use.end - use.begin);
  uses->earlier = std::move(merged);
  uses->current.clear();
}

bool DramHazards::Visit(Uses* uses, int64_t begin, int64_t end, bool drop_covered,
                        std::vector<int64_t>* deps, int64_t* visits) {
  if (uses->lengths.empty()) return true;
  // A use [b, b + length) meets [begin, end) when b < end and b + length > begin: uses that
  // begin after begin - longest and before end.
  const int64_t longest = *uses->lengths.rbegin();
  auto it = std::upper_bound(uses->earlier.begin(), uses->earlier.end(), begin - longest,
                             [](int64_t value, const Use& use) { return value < use.begin; });
  for (; it != uses->earlier.end() && it->begin < end; ++it) {
    if (it->command < 0) continue;  // dropped
    if (++*visits > kMaxVisits) return false;
    if (it->end <= begin) continue;
    deps->push_back(it->command);
    if (drop_covered && begin <= it->begin && it->end <= end) {
      uses->lengths.erase(uses->lengths.find(it->end - it->begin));
      it->command = -1;
    }
  }
  return true;
}

bool DramHazards::Order(const Space& space, int64_t begin, int64_t end, bool store,
                        std::vector<int64_t>* deps) {
  if (begin >= end) return true;
  auto found = spaces_.find(space);
  if (found == spaces_.end()) return true;
  int64_t visits = 0;
  // Read-after-write and write-after-write; for a store, write-after-read too.
  if (!Visit(&found->second.stores, begin, end, store, deps, &visits)) return false;
  return !store || Visit(&found->second.loads, begin, end, /*drop_covered=*/true, deps, &visits);
}

void DramHazards::Record(const Space& space, int64_t begin, int64_t end, int64_t id, bool store) {
  if (begin >= end) return;
  SpaceUses& uses = spaces_[space];
  (store ? uses.stores : uses.loads).current.push_back(Use{begin, end, id});
  touched_.insert(space);
}

}  // namespace example_npu
