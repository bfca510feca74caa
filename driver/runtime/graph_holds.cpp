// Graph holds: per-cl_mem graph counts and the blocks kept for them.
#include "runtime/graph_holds.h"

namespace aethercl {

void GraphHolds::reference(cl_mem mem) { ++entries_[mem].graphs; }

std::optional<GraphHolds::Kept> GraphHolds::release(cl_mem mem) {
  auto it = entries_.find(mem);
  if (it == entries_.end()) return std::nullopt;
  if (--it->second.graphs > 0) return std::nullopt;
  if (!it->second.kept) {
    entries_.erase(it);
    return std::nullopt;
  }
  Kept kept = std::move(*it->second.kept);
  entries_.erase(it);
  return kept;
}

bool GraphHolds::keep(const PoolBlock& block, const std::vector<std::uint64_t>& used_on) {
  auto it = entries_.find(block.mem);
  if (it == entries_.end() || it->second.graphs == 0) return false;
  it->second.kept = Kept{block, used_on};
  return true;
}

std::uint64_t GraphHolds::kept_bytes(cl_mem mem) const {
  auto it = entries_.find(mem);
  return it != entries_.end() && it->second.kept ? it->second.kept->block.capacity : 0;
}

std::uint32_t GraphHolds::graphs(cl_mem mem) const {
  auto it = entries_.find(mem);
  return it != entries_.end() ? it->second.graphs : 0;
}

void GraphHolds::take(cl_mem mem) {
  auto it = entries_.find(mem);
  if (it != entries_.end()) it->second.kept.reset();
}

}  // namespace aethercl
