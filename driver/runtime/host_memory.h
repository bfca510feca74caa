// Registry of the page-locked host allocations made by aethercl_host_alloc: pointer ranges to the
// pinned memory behind them, so transfers can tell pinned host memory (asynchronous DMA) from
// ordinary memory (staged or waited for), and host_free can refuse pointers it never returned.
#pragma once

#include "runtime/pinned_memory.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace aethercl {

struct HostAllocation {
  int device_index;  // the device whose context pins it
  std::unique_ptr<PinnedMemory> memory;
};

class HostMemoryRegistry {
 public:
  void insert(std::shared_ptr<HostAllocation> allocation);
  // The allocation that holds all of [pointer, pointer + size), or nullptr.
  std::shared_ptr<HostAllocation> find(const void* pointer, std::uint64_t size) const;
  // The allocation starting exactly at pointer, removed; nullptr when pointer is not one.
  std::shared_ptr<HostAllocation> remove(const void* pointer);
  // Removes every allocation of a device (shutdown).
  std::vector<std::shared_ptr<HostAllocation>> remove_device(int device_index);
  std::uint64_t bytes(int device_index) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, std::shared_ptr<HostAllocation>> by_address_;
};

}  // namespace aethercl
