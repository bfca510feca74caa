// Pinned host allocations by address range.
#include "runtime/host_memory.h"

namespace aethercl {

void HostMemoryRegistry::insert(std::shared_ptr<HostAllocation> allocation) {
  std::lock_guard lock(mutex_);
  auto address = reinterpret_cast<std::uintptr_t>(allocation->memory->data());
  by_address_[address] = std::move(allocation);
}

std::shared_ptr<HostAllocation> HostMemoryRegistry::find(const void* pointer,
                                                         std::uint64_t size) const {
  auto address = reinterpret_cast<std::uintptr_t>(pointer);
  std::lock_guard lock(mutex_);
  auto it = by_address_.upper_bound(address);
  if (it == by_address_.begin()) return nullptr;
  --it;
  std::uint64_t offset = address - it->first;
  std::uint64_t capacity = it->second->memory->size();
  if (offset >= capacity || size > capacity - offset) return nullptr;
  return it->second;
}

std::shared_ptr<HostAllocation> HostMemoryRegistry::remove(const void* pointer) {
  std::lock_guard lock(mutex_);
  auto node = by_address_.extract(reinterpret_cast<std::uintptr_t>(pointer));
  if (node.empty()) return nullptr;
  return std::move(node.mapped());
}

std::vector<std::shared_ptr<HostAllocation>> HostMemoryRegistry::remove_device(int device_index) {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<HostAllocation>> removed;
  for (auto it = by_address_.begin(); it != by_address_.end();) {
    if (it->second->device_index == device_index) {
      removed.push_back(std::move(it->second));
      it = by_address_.erase(it);
    } else {
      ++it;
    }
  }
  return removed;
}

std::uint64_t HostMemoryRegistry::bytes(int device_index) const {
  std::lock_guard lock(mutex_);
  std::uint64_t total = 0;
  for (const auto& [address, allocation] : by_address_) {
    if (allocation->device_index == device_index) total += allocation->memory->size();
  }
  return total;
}

}  // namespace aethercl
