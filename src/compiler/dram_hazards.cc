#include "compiler/dram_hazards.h"

#include <algorithm>

namespace example_npu {

void DramHazards::BeginGroup() {
  for (const Space& space : touched_) {
    SpaceUses& uses = spaces_[space];
    if (!uses.stores.current.empty()) {
      uses.load_answers.clear();
      uses.dropped_stores.clear();
    }
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
  // Then a later version on the same chain and bytes stands for the earlier ones it follows.
  auto kept = uses->current.begin();
  for (auto use = uses->current.begin(); use != uses->current.end(); ++use) {
    if (use != uses->current.begin() && use->chain >= 0 && kept[-1].chain == use->chain &&
        kept[-1].begin == use->begin && kept[-1].end == use->end &&
        kept[-1].version < use->version) {
      const int64_t weight = kept[-1].weight + use->weight;
      kept[-1] = *use;
      kept[-1].weight = weight;
      continue;
    }
    *kept++ = *use;
  }
  uses->current.erase(kept, uses->current.end());
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
                        std::vector<int64_t>* deps, int64_t* visits,
                        std::vector<std::pair<int64_t, int64_t>>* dropped) {
  if (uses->lengths.empty()) return true;
  // A use [b, b + length) meets [begin, end) when b < end and b + length > begin: uses that
  // begin after begin - longest and before end.
  const int64_t longest = *uses->lengths.rbegin();
  auto it = std::upper_bound(uses->earlier.begin(), uses->earlier.end(), begin - longest,
                             [](int64_t value, const Use& use) { return value < use.begin; });
  // The hot loop of compilation (tens of millions of uses met on ViT-B/16): the visit count in
  // a local, Meet inlined.
  int64_t count = *visits;
  bool complete = true;
  for (const auto last = uses->earlier.end(); it != last && it->begin < end; ++it) {
    if (it->command < 0) continue;  // dropped
    if (count + it->weight > kMaxVisits) {
      // The scan used to meet this use's first members one by one and give up part way; a
      // store dropped those it met (all alike), and later queries count only the rest.
      if (drop_covered && begin <= it->begin && it->end <= end) {
        it->weight -= std::max<int64_t>(kMaxVisits - count, 0);
      }
      complete = false;
      break;
    }
    count += it->weight;
    if (it->end <= begin) continue;
    Meet(*it, deps);
    if (drop_covered && begin <= it->begin && it->end <= end) {
      uses->lengths.erase(uses->lengths.find(it->end - it->begin));
      if (dropped != nullptr) dropped->emplace_back(it->begin, it->end);
      it->command = -1;
    }
  }
  *visits = count;
  return complete;
}

inline void DramHazards::Meet(const Use& use, std::vector<int64_t>* deps) {
  if (use.chain < 0) {
    deps->push_back(use.command);
    return;
  }
  Latest& latest = latest_[use.chain];  // sized by Record
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
  SpaceUses& uses = found->second;
  if (store) return Query(&uses, begin, end, /*store=*/true, deps);
  LoadAnswer& answer = uses.load_answers[{begin, end}];
  const std::vector<std::pair<int64_t, int64_t>>& dropped = uses.dropped_stores;
  const bool still =
      answer.valid &&
      std::none_of(dropped.begin() + answer.drops_seen, dropped.end(),
                   [&](const auto& range) { return range.first < end && begin < range.second; });
  if (!still) {
    answer.deps.clear();
    answer.valid = Query(&uses, begin, end, /*store=*/false, &answer.deps);
    if (!answer.valid) {
      deps->insert(deps->end(), answer.deps.begin(), answer.deps.end());
      return false;
    }
  }
  answer.drops_seen = dropped.size();
  deps->insert(deps->end(), answer.deps.begin(), answer.deps.end());
  return true;
}

bool DramHazards::Query(SpaceUses* uses, int64_t begin, int64_t end, bool store,
                        std::vector<int64_t>* deps) {
  int64_t visits = 0;
  ++query_;
  chains_met_.clear();
  ties_.clear();
  // Read-after-write and write-after-write; for a store, write-after-read too.
  const bool complete =
      Visit(&uses->stores, begin, end, store, deps, &visits, &uses->dropped_stores) &&
      (!store ||
       Visit(&uses->loads, begin, end, /*drop_covered=*/true, deps, &visits, /*dropped=*/nullptr));
  for (int64_t chain : chains_met_) deps->push_back(latest_[chain].command);
  for (const Use& tie : ties_) {
    if (tie.version == latest_[tie.chain].version) deps->push_back(tie.command);
  }
  return complete;
}

void DramHazards::Record(const Space& space, int64_t begin, int64_t end, int64_t id, bool store,
                         int64_t chain, int64_t version) {
  if (begin >= end) return;
  if (chain >= static_cast<int64_t>(latest_.size())) latest_.resize(chain + 1);
  SpaceUses& uses = spaces_[space];
  (store ? uses.stores : uses.loads).current.push_back(Use{begin, end, id, chain, version});
  touched_.insert(space);
}

}  // namespace example_npu
