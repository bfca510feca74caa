// Which pool blocks of a device live graphs (and captures in progress) keep allocated: memory a
// graph's commands name is not handed back to the pool while the graph lives, even when the op
// that used it (scratch) or the client (free_gpu_memory) releases it.
//
// Contract: used with the owning device's mutex held. reference()/release() count graphs per
// cl_mem value; keep() is asked at every free of a block and takes the block over when a graph
// references its memory; the block comes back from release() of the last such graph.
#pragma once

#include "runtime/memory_pool.h"

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace aethercl {

class GraphHolds {
 public:
  // A block whose free waited for the graphs that reference it.
  struct Kept {
    PoolBlock block;
    std::vector<std::uint64_t> used_on;  // as the free passed them
  };

  // One more graph names mem.
  void reference(cl_mem mem);
  // One graph fewer names mem: the kept block when no graph names it any more and it was freed.
  std::optional<Kept> release(cl_mem mem);
  // At the free of block: true when a graph names its memory (the block is kept until then).
  bool keep(const PoolBlock& block, const std::vector<std::uint64_t>& used_on);
  // Capacity of mem's block when it is kept for graphs (freed by its user), else 0.
  std::uint64_t kept_bytes(cl_mem mem) const;
  // How many graphs name mem.
  std::uint32_t graphs(cl_mem mem) const;
  // A kept block handed to a new user (a capture's later allocation): no longer kept, still named.
  void take(cl_mem mem);

 private:
  struct Entry {
    std::uint32_t graphs = 0;
    std::optional<Kept> kept;
  };
  std::unordered_map<cl_mem, Entry> entries_;
};

}  // namespace aethercl
