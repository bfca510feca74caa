// Device memory entry points: allocation, free, host transfers and device copies.
#pragma once

#include "runtime/device_call.h"

#include <cstddef>

namespace aethercl::ops {

void* allocate(DeviceCall& call, std::size_t size);
// Frees a token; refusals are reported by throwing (the void entry point keeps only the message).
void free_buffer(DeviceCall& call, void* handle);
void write(DeviceCall& call, void* handle, std::size_t offset, std::size_t size,
           const void* source);
void read(DeviceCall& call, void* handle, std::size_t offset, std::size_t size,
          void* destination);
void clone(DeviceCall& call, void* source, void* destination, std::size_t size);

}  // namespace aethercl::ops
