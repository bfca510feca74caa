// Scratch device memory for the intermediate results of one op.
#pragma once

#include "runtime/device_call.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace aethercl {

// Device memory for intermediate results, from the device's pool on the call's stream; returned
// to the pool when the op's scope ends. The block's home is that stream and only this op's
// commands on it use the block, so a later allocation on the stream (whose commands run after
// these) may reuse it at once (the pool's stream-ordered rule). During a graph capture the graph
// keeps the block instead, until it is destroyed: every captured op has scratch of its own, which
// each replay reuses (replays of one graph never overlap: runtime/graph.h).
class Scratch {
 public:
  Scratch(DeviceCall& call, std::uint64_t bytes);
  // An intrinsic workspace (no path does without it): where the pool refuses it, the
  // kOutOfMemory message says that `purpose` needs bytes.
  Scratch(DeviceCall& call, std::uint64_t bytes, std::string_view purpose);
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch();
  cl_mem mem() const { return block_.mem; }
  BufferView view() const { return BufferView{block_.mem, bytes_}; }

 private:
  Device& device_;
  PoolBlock block_;
  std::uint64_t bytes_;
};

// Several workspace blocks of one op (operand copies made before a product), from the pool on
// the call's stream and returned as Scratch returns its block (a capturing graph keeps them) when
// the guard's scope ends, whether the op was enqueued or threw.
class ScratchBlocks {
 public:
  explicit ScratchBlocks(DeviceCall& call) : call_(call) {}
  ScratchBlocks(const ScratchBlocks&) = delete;
  ScratchBlocks& operator=(const ScratchBlocks&) = delete;
  ~ScratchBlocks() { release(); }
  // A block of at least bytes; the pool's kOutOfMemory propagates (the caller may fall back).
  PoolBlock add(std::uint64_t bytes);
  // Returns every block now (a fallback that will not use them).
  void release() noexcept;

 private:
  DeviceCall& call_;
  std::vector<PoolBlock> blocks_;
};

// Scratch an op can do without (split-K partials, operand copies, column buffers of more images
// than one), emplaced in slot (emptied first): false, slot empty, when the pool refuses bytes with
// kOutOfMemory, after a debug line naming `purpose`, so that the caller takes a path that needs
// less memory. Other failures propagate. The rule for every such site is docs/RELIABILITY.md's
// "Optional workspaces".
bool optional_scratch(std::optional<Scratch>& slot, DeviceCall& call, std::uint64_t bytes,
                      std::string_view purpose);

// Whether error is a refusal for memory, which an optional workspace answers with a fallback.
bool out_of_memory(const std::exception& error) noexcept;

}  // namespace aethercl
