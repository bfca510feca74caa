// MultiDeviceCall: the scope of one call that spans several devices (peer copies, collectives).
// It holds the runtime's lifecycle lock (shared) for its whole life and then the mutexes of the
// devices it is given, always in ascending device index, so two such calls cannot deadlock.
#pragma once

#include "runtime/device_call.h"

#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

namespace aethercl::multi {

class MultiDeviceCall {
 public:
  explicit MultiDeviceCall(Runtime& runtime = Runtime::instance());

  Runtime& runtime() { return runtime_; }
  // Locks the given devices (duplicates allowed) in ascending index order; call once.
  void lock(std::vector<Device*> devices);
  // A buffer token of device_index with at least min_bytes, refused like DeviceCall::buffer;
  // notes stream_id (the stream the call's commands are ordered with) as a user of the buffer.
  BufferView buffer(int device_index, std::uint64_t stream_id, const void* handle,
                    const std::string& argument, std::uint64_t min_bytes);
  // The device's current stream, with everything recorded so far handed to OpenCL, so commands
  // enqueued directly on its queue (under the device lock) come after them.
  static Stream& drained_current_stream(Device& device);

 private:
  Runtime& runtime_;
  std::shared_lock<std::shared_mutex> lifecycle_lock_;
  std::vector<std::unique_lock<std::mutex>> device_locks_;
};

}  // namespace aethercl::multi
