// Ordered locking of several devices and buffer resolution against any of them.
#include "multi/multi_call.h"

#include <algorithm>

namespace aethercl::multi {

MultiDeviceCall::MultiDeviceCall(Runtime& runtime)
    : runtime_(runtime), lifecycle_lock_(runtime.lifecycle_mutex()) {}

void MultiDeviceCall::lock(std::vector<Device*> devices) {
  std::sort(devices.begin(), devices.end(),
            [](const Device* a, const Device* b) { return a->index() < b->index(); });
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  for (Device* device : devices) device_locks_.emplace_back(device->mutex());
}

Stream& MultiDeviceCall::drained_current_stream(Device& device) {
  Stream& stream = device.current_stream();
  device.refuse_during_capture(stream, "calls across devices (peer copies, collectives) cannot "
                                       "be recorded");
  device.drain();
  return stream;
}

BufferView MultiDeviceCall::buffer(int device_index, std::uint64_t stream_id, const void* handle,
                                   const std::string& argument, std::uint64_t min_bytes) {
  if (handle == nullptr) fail(Status::kInvalidArgument, "{} is NULL", argument);
  TokenProblem problem = TokenProblem::kNone;
  auto record = runtime_.buffers().use(handle, device_index, stream_id, &problem);
  if (!record) {
    fail(Status::kInvalidHandle, "{} ({}) {}", argument, handle, BufferRegistry::describe(problem));
  }
  if (record->device_index != device_index) {
    fail(Status::kInvalidHandle, "{} ({}) belongs to device {}, but it must be on device {}",
         argument, handle, record->device_index, device_index);
  }
  if (record->size < min_bytes) {
    auto full = runtime_.buffers().find(handle);
    std::string label = !full || full->label.empty() ? "" : fmt::format(" '{}'", full->label);
    fail(Status::kOutOfRange, "{}{} ({}) holds {} bytes, but the call needs {} bytes", argument,
         label, handle, record->size, min_bytes);
  }
  return BufferView{record->mem, record->size};
}

}  // namespace aethercl::multi
