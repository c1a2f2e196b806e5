#include "compiler/dram_hazards.h"

namespace example_npu {

void DramHazards::BeginGroup() {
  for (const Space& space : touched_) {
    SpaceUses& uses = spaces_[space];
    for (Uses* kind : {&uses.loads, &uses.stores}) {
      for (const auto& [begin, use] : kind->current) {
        kind->earlier.emplace(begin, use);
        kind->lengths.insert(use.end - begin);
      }
      kind->current.clear();
    }
  }
  touched_.clear();
}

bool DramHazards::Visit(Uses* uses, int64_t begin, int64_t end, bool drop_covered,
                        std::vector<int64_t>* deps, int64_t* visits) {
  if (uses->earlier.empty()) return true;
  // A use [b, b + length) meets [begin, end) when b < end and b + length > begin: uses that
  // begin at or before begin - longest end before it.
  const int64_t longest = *uses->lengths.rbegin();
  auto it = uses->earlier.upper_bound(begin - longest);
  while (it != uses->earlier.end() && it->first < end) {
    if (++*visits > kMaxVisits) return false;
    const int64_t use_begin = it->first;
    const Use& use = it->second;
    if (use.end > begin) {
      deps->push_back(use.command);
      if (drop_covered && begin <= use_begin && use.end <= end) {
        uses->lengths.erase(uses->lengths.find(use.end - use_begin));
        it = uses->earlier.erase(it);
        continue;
      }
    }
    ++it;
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
  (store ? uses.stores : uses.loads).current.emplace_back(begin, Use{end, id});
  touched_.insert(space);
}

}  // namespace example_npu
