// Host memory and transfers (the contract's "Host memory and transfers" functions): pinned host
// allocations, asynchronous writes and reads on a stream, device copies within and between
// buffers, and memset.
#pragma once

#include "runtime/device_call.h"

#include <cstddef>

namespace aethercl::ops {

void* host_alloc(DeviceCall& call, std::size_t size);
// Takes no device: holds the runtime's lifecycle lock itself.
void host_free(void* host_pointer);
void write_async(DeviceCall& call, void* buffer, std::size_t offset, std::size_t size,
                 const void* source, void* stream);
void read_async(DeviceCall& call, void* buffer, std::size_t offset, std::size_t size,
                void* destination, void* stream);
void copy(DeviceCall& call, void* dst, std::size_t dst_offset, void* src, std::size_t src_offset,
          std::size_t size, void* stream);
void memset(DeviceCall& call, void* buffer, std::size_t offset, std::size_t size, int value,
            void* stream);

}  // namespace aethercl::ops
