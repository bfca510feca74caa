// Allocation through the pool and registry; transfers range-checked without overflow.
#include "ops/memory_ops.h"

#include "support/checked.h"

namespace aethercl::ops {
namespace {

// The span [offset, offset + size) must lie inside the buffer.
BufferView checked_span(DeviceCall& call, void* handle, const char* argument, std::size_t offset,
                        std::size_t size) {
  auto end = checked_add(offset, size);
  if (!end) {
    fail(Status::kOutOfRange, "offset {} + size {} overflows", offset, size);
  }
  BufferView view = call.buffer(handle, argument, 0);
  if (*end > view.size) {
    fail(Status::kOutOfRange,
         "offset {} + size {} = {} bytes runs past the end of {} ({} bytes)", offset, size, *end,
         argument, view.size);
  }
  return view;
}

}  // namespace

void* allocate(DeviceCall& call, std::size_t size) {
  if (size == 0) fail(Status::kInvalidArgument, "size is 0 (allocations must be at least 1 byte)");
  PoolBlock block = call.device().allocate_buffer(call.stream(), size);
  BufferRecord record{call.device().index(), block, size, {}, {}};
  try {
    return call.runtime().buffers().insert(std::move(record));
  } catch (...) {
    call.device().discard_buffer(block);
    throw;
  }
}

void free_buffer(DeviceCall& call, void* handle) {
  if (handle == nullptr) return;  // harmless, like free(NULL)
  // Check ownership before removing, so a foreign token stays valid on its own device.
  call.buffer(handle, "buffer_handle", 0);
  auto record = call.runtime().buffers().remove(handle);
  if (!record) return;
  std::string name =
      call.device().checks_bounds() ? BufferRegistry::name(handle, record->label) : std::string();
  call.device().free_buffer(record->block, record->used_on, name);
}

void write(DeviceCall& call, void* handle, std::size_t offset, std::size_t size,
           const void* source) {
  BufferView view = checked_span(call, handle, "gpu_buffer_handle", offset, size);
  if (size == 0) return;
  if (source == nullptr) fail(Status::kInvalidArgument, "host_source_ptr is NULL");
  call.device().refuse_during_capture(call.stream(), "write_host_to_gpu_blocking is a blocking "
                                                     "transfer");
  // Staged even from pinned memory: the caller may reuse source as soon as this returns.
  call.device().write(call.stream(), view.mem, offset, size, source, false);
}

void read(DeviceCall& call, void* handle, std::size_t offset, std::size_t size,
          void* destination) {
  BufferView view = checked_span(call, handle, "gpu_buffer_handle", offset, size);
  if (size == 0) return;
  if (destination == nullptr) fail(Status::kInvalidArgument, "host_destination_ptr is NULL");
  call.device().read(call.stream(), view.mem, offset, size, destination);
}

void clone(DeviceCall& call, void* source, void* destination, std::size_t size) {
  BufferView from = call.buffer(source, "src_buffer", size);
  BufferView to = call.buffer(destination, "dst_buffer", size);
  if (size == 0 || source == destination) return;
  call.device().copy(call.stream(), from.mem, 0, to.mem, 0, size);
}

}  // namespace aethercl::ops
