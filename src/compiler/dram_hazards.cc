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
    Meet(*it, deps);
    if (drop_covered && begin <= it->begin && it->end <= end) {
      uses->lengths.erase(uses->lengths.find(it->end - it->begin));
      it->command = -1;
    }
  }
  return true;
}

void DramHazards::Meet(const Use& use, std::vector<int64_t>* deps) {
  if (use.chain < 0) {
    deps->push_back(use.command);
    return;
  }
  if (use.chain >= static_cast<int64_t>(latest_.size())) latest_.resize(use.chain + 1);
  Latest& latest = latest_[use.chain];
  if (latest.query != query_) {
    latest = Latest{query_, use.version, use.command};
    chains_met_.push_back(use.chain);
  } else if (use.version > latest.version) {
    latest.version = use.version;
    latest.command = use.command;
  } else if (use.version == latest.version) {
    ties_.push_back(use);  // two stores of one tile: neither implies the other
  }
}

bool DramHazards::Order(const Space& space, int64_t begin, int64_t end, bool store,
                        std::vector<int64_t>* deps) {
  if (begin >= end) return true;
  auto found = spaces_.find(space);
  if (found == spaces_.end()) return true;
  int64_t visits = 0;
  ++query_;
  chains_met_.clear();
  ties_.clear();
  // Read-after-write and write-after-write; for a store, write-after-read too.
  const bool complete =
      Visit(&found->second.stores, begin, end, store, deps, &visits) &&
      (!store || Visit(&found->second.loads, begin, end, /*drop_covered=*/true, deps, &visits));
  for (int64_t chain : chains_met_) deps->push_back(latest_[chain].command);
  for (const Use& tie : ties_) {
    if (tie.version == latest_[tie.chain].version) deps->push_back(tie.command);
  }
  return complete;
}

void DramHazards::Record(const Space& space, int64_t begin, int64_t end, int64_t id, bool store,
                         int64_t chain, int64_t version) {
  if (begin >= end) return;
  SpaceUses& uses = spaces_[space];
  (store ? uses.stores : uses.loads).current.push_back(Use{begin, end, id, chain, version});
  touched_.insert(space);
}

}  // namespace example_npu
