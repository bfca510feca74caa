// DeviceCall: the scope of one entry-point call on one device. It holds the runtime's lifecycle
// lock (shared) and the device's lock for its whole life, resolves buffer tokens against the
// registry (checking owner device and size) and knows the stream the call's commands go to: the
// calling thread's current stream, or the one an explicit `stream` argument names (use_stream).
//
// This is the seam for code that issues work (op families, user-kernel launches, GEMM, ...):
//   DeviceCall call(gpu_index);
//   call.use_stream(stream_token, "stream");          // only for entry points with a stream
//   BufferView a = call.buffer(handle, "a", bytes);    // after use_stream: marks the stream
//   call.launch(kernel, geometry, a.mem, ...);         // or call.enqueue(launch_record)
#pragma once

#include "runtime/runtime.h"
#include "support/error.h"

#include <cstdint>
#include <mutex>
#include <optional>
#include <shared_mutex>

namespace aethercl {

struct BufferView {
  cl_mem mem = nullptr;
  std::uint64_t size = 0;  // bytes the client allocated
};

class DeviceCall {
 public:
  // Throws kNotInitialized / kNoDevice when gpu_index resolves to no device.
  explicit DeviceCall(int gpu_index, Runtime& runtime = Runtime::instance());
  DeviceCall(const DeviceCall&) = delete;
  DeviceCall& operator=(const DeviceCall&) = delete;
  ~DeviceCall();

  Device& device() { return *device_; }
  Runtime& runtime() { return runtime_; }
  // The stream this call's commands go to.
  Stream& stream() { return *stream_; }

  // An explicit `stream` argument of an entry point: NULL is the device's default stream (the
  // contract's rule for stream arguments); anything else must be a live stream token of this
  // device (kInvalidHandle otherwise, naming `argument`). Call it before buffer(), which notes
  // the stream on each buffer it resolves.
  Stream& use_stream(const void* token, const char* argument);
  // The live stream a token names on this call's device (NULL: the default stream), without
  // making it the call's stream.
  Stream& resolve_stream(const void* token, const char* argument);

  // A required buffer with at least min_bytes: throws kInvalidArgument for NULL, kInvalidHandle
  // for an unknown/freed/other-device token, kOutOfRange when it is smaller than min_bytes.
  // `argument` names the parameter in the message.
  BufferView buffer(const void* handle, const char* argument, std::uint64_t min_bytes);
  // NULL is allowed and yields nullopt; anything else as buffer().
  std::optional<BufferView> optional_buffer(const void* handle, const char* argument,
                                            std::uint64_t min_bytes);

  // Enqueues kernel with args (in order: cl_mem, scalars of their exact kernel type, LocalBytes)
  // over geometry: the launch path of every op family (runtime/launch.h).
  template <typename... Args>
  void launch(Kernel& kernel, const LaunchGeometry& geometry, const Args&... args) {
    device_->enqueue(*stream_, make_launch(kernel, geometry, args...));
  }
  // Zero counters for one launch's hand-offs between its work-groups (runtime/launch_counters.h):
  // the stream's, or the capturing graph's own for this op; nullptr when count exceeds
  // kMaxLaunchCounters or the device has no room for them (the op's other form takes over).
  cl_mem counters(std::size_t count);
  // Enqueues a launch record built elsewhere (user kernels) on the call's stream.
  void enqueue(const LaunchRecord& record) { device_->enqueue(*stream_, record); }

  // Gives up the device's lock early, for calls that end by waiting on the host (stream and
  // event synchronisation) so other threads can keep issuing work meanwhile. Nothing of the
  // device may be used afterwards.
  void release_device() {
    device_->set_call_stream(nullptr);
    device_lock_.unlock();
  }

 private:
  Runtime& runtime_;
  std::shared_lock<std::shared_mutex> lifecycle_lock_;
  Device* device_;
  std::unique_lock<std::mutex> device_lock_;
  Stream* stream_;
  // A call that fails part-way leaves nothing in a capture (include/aethercl/driver.h, Graphs):
  // what its stream's graph held when the stream was chosen, and the exceptions in flight then.
  void mark_capture();
  int uncaught_ = 0;
  Graph* capture_ = nullptr;
  std::size_t capture_mark_ = 0;
  std::uint64_t capture_stream_ = 0;
};

// The scope of a call that needs a device's immutable parts only (its info, context and disk
// cache: program builds, interop): the lifecycle lock (shared) without the device's mutex, so a
// long compile does not stall the device's other calls.
class DeviceScope {
 public:
  explicit DeviceScope(int gpu_index, Runtime& runtime = Runtime::instance());
  Device& device() { return *device_; }
  Runtime& runtime() { return runtime_; }

 private:
  Runtime& runtime_;
  std::shared_lock<std::shared_mutex> lifecycle_lock_;
  Device* device_;
};

// The scope of a call that names its object by token alone (programs, kernels): the runtime's
// lifecycle lock (shared) for its whole life, so shutdown_driver cannot release the object under
// it. Throws kNotInitialized when no device is initialised.
class TokenCall {
 public:
  explicit TokenCall(Runtime& runtime = Runtime::instance());
  Runtime& runtime() { return runtime_; }

 private:
  Runtime& runtime_;
  std::shared_lock<std::shared_mutex> lifecycle_lock_;
};

// Element count of a tensor from int dimensions: throws kInvalidArgument naming the dimension for
// a negative one and for a product that overflows 64 bits. Zero when any dimension is zero.
struct Dim {
  const char* name;
  long long value;
};
std::uint64_t element_count(std::initializer_list<Dim> dims);
// bytes = elements * element_size, overflow-checked.
std::uint64_t byte_count(std::uint64_t elements, std::uint64_t element_size);

}  // namespace aethercl
