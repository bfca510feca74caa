// Pinned host memory through the runtime's host-memory registry; transfers range-checked without
// overflow and issued on the stream the caller names.
#include "ops/transfer_ops.h"

#include "runtime/graph.h"
#include "runtime/stream.h"
#include "support/checked.h"

#include <shared_mutex>

namespace aethercl::ops {
namespace {

// The span [offset, offset + size) of a buffer, checked against its size.
BufferView checked_span(DeviceCall& call, void* handle, const char* argument, std::size_t offset,
                        std::size_t size, const char* offset_name) {
  BufferView view = call.buffer(handle, argument, 0);
  auto end = checked_add(offset, size);
  if (!end) fail(Status::kOutOfRange, "{} {} + size {} overflows", offset_name, offset, size);
  if (*end > view.size) {
    fail(Status::kOutOfRange, "{} {} + size {} = {} bytes runs past the end of {} ({} bytes)",
         offset_name, offset, size, *end, argument, view.size);
  }
  return view;
}

// Whether [pointer, pointer + size) lies in pinned memory of this device's context (pinned memory
// of another device is treated as ordinary memory there: correct, just not asynchronous).
// Whether [pointer, pointer + size) is pinned memory of this call's device. A transfer recorded
// into a graph names it by address, so the graph keeps the allocation (host_free cannot release
// memory a replay will still read or write).
bool pinned_here(DeviceCall& call, Stream& stream, const void* pointer, std::size_t size) {
  auto allocation = call.runtime().host_memory().find(pointer, size);
  if (!allocation || allocation->device_index != call.device().index()) return false;
  if (Graph* graph = stream.capture()) graph->keep_host_memory(std::move(allocation));
  return true;
}

}  // namespace

void* host_alloc(DeviceCall& call, std::size_t size) {
  if (size == 0) fail(Status::kInvalidArgument, "size is 0 (allocations must be at least 1 byte)");
  Device& device = call.device();
  auto allocation = std::make_shared<HostAllocation>();
  allocation->device_index = device.index();
  allocation->memory = std::make_unique<PinnedMemory>(device.context(),
                                                      device.default_stream().queue(), size);
  void* pointer = allocation->memory->data();
  call.runtime().host_memory().insert(std::move(allocation));
  return pointer;
}

void host_free(void* host_pointer) {
  if (host_pointer == nullptr) return;  // like free(NULL)
  Runtime& runtime = Runtime::instance();
  std::shared_lock lock(runtime.lifecycle_mutex());
  runtime.require_any_device();
  auto allocation = runtime.host_memory().remove(host_pointer);
  if (!allocation) {
    fail(Status::kInvalidHandle, "host_ptr ({}) was not returned by aethercl_host_alloc, or was "
         "freed already", host_pointer);
  }
  // As cudaFreeHost: transfers still using the memory finish first.
  if (Device* device = runtime.try_resolve(allocation->device_index)) {
    std::lock_guard device_lock(device->mutex());
    device->synchronize();  // every stream: a pinned transfer may be on any of them
  }
}

void write_async(DeviceCall& call, void* buffer, std::size_t offset, std::size_t size,
                 const void* source, void* stream) {
  Stream& target = call.use_stream(stream, "stream");
  BufferView view = checked_span(call, buffer, "buffer", offset, size, "offset");
  if (size == 0) return;
  if (source == nullptr) fail(Status::kInvalidArgument, "source is NULL");
  bool pinned = pinned_here(call, target, source, size);
  if (!pinned) {
    call.device().refuse_during_capture(
        target, "aethercl_write_async from pageable host memory (not from aethercl_host_alloc) "
                "copies it at the call; only pinned memory can be recorded");
  }
  call.device().write(target, view.mem, offset, size, source, pinned);
}

void read_async(DeviceCall& call, void* buffer, std::size_t offset, std::size_t size,
                void* destination, void* stream) {
  Stream& target = call.use_stream(stream, "stream");
  BufferView view = checked_span(call, buffer, "buffer", offset, size, "offset");
  if (size == 0) return;
  if (destination == nullptr) fail(Status::kInvalidArgument, "destination is NULL");
  call.device().read_async(target, view.mem, offset, size, destination,
                           pinned_here(call, target, destination, size));
}

void copy(DeviceCall& call, void* dst, std::size_t dst_offset, void* src, std::size_t src_offset,
          std::size_t size, void* stream) {
  Stream& target = call.use_stream(stream, "stream");
  BufferView to = checked_span(call, dst, "dst", dst_offset, size, "dst_offset");
  BufferView from = checked_span(call, src, "src", src_offset, size, "src_offset");
  if (size == 0) return;
  if (to.mem == from.mem && dst_offset < src_offset + size && src_offset < dst_offset + size) {
    fail(Status::kInvalidArgument, "the ranges overlap: [{}, {}) and [{}, {}) of one buffer",
         src_offset, src_offset + size, dst_offset, dst_offset + size);
  }
  call.device().copy(target, from.mem, src_offset, to.mem, dst_offset, size);
}

void memset(DeviceCall& call, void* buffer, std::size_t offset, std::size_t size, int value,
            void* stream) {
  Stream& target = call.use_stream(stream, "stream");
  BufferView view = checked_span(call, buffer, "buffer", offset, size, "offset");
  if (size == 0) return;
  // As C's memset: the value converted to unsigned char fills every byte.
  call.device().fill(target, view.mem, offset, size, static_cast<unsigned char>(value));
}

}  // namespace aethercl::ops
