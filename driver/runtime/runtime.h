// The process-wide runtime: initialised devices by visible index (sharing one context per
// platform where several are visible), and the buffer and communicator registries.
//
// Locking: lifecycle_mutex() is shared by every call and exclusive for initialize/shutdown;
// a device's own mutex serialises its queue. Order: lifecycle, then device, then registry.
#pragma once

#include "runtime/buffer_registry.h"
#include "runtime/communicator.h"
#include "runtime/device.h"
#include "runtime/shared_contexts.h"

#include <atomic>
#include <map>
#include <memory>
#include <shared_mutex>
#include <vector>

namespace aethercl {

class Runtime {
 public:
  // Intentionally never destroyed: OpenCL objects must not be released from static destructors,
  // when the ICD may already be unloaded. shutdown_driver releases everything explicitly.
  static Runtime& instance();

  // Idempotent. Throws kNoDevice for an out-of-range index (the message lists the devices).
  void initialize(int gpu_index);
  // Releases every device and buffer; harmless when nothing is initialised. Writes the trace
  // started by AETHERCL_TRACE, if any.
  void shutdown() noexcept;
  // Waits for every initialised device's queue (tracing needs all events finished).
  void finish_all();
  // Gives every initialised device a profiling queue (tracing started after initialisation).
  void enable_profiling_all();

  std::shared_mutex& lifecycle_mutex() { return lifecycle_mutex_; }
  BufferRegistry& buffers() { return buffers_; }
  CommRegistry& comms() { return comms_; }

  // With the lifecycle lock held: the device a call's gpu_index names (the fallback of
  // docs/ABI.md section 3.2 when exactly one device is initialised). Throws kNotInitialized /
  // kNoDevice.
  Device& resolve(int gpu_index);
  // nullptr when nothing is initialised or the index names no device (no throw).
  Device* try_resolve(int gpu_index) noexcept;
  bool is_initialized(int gpu_index) const { return devices_.count(gpu_index) != 0; }

 private:
  Runtime() = default;

  std::shared_mutex lifecycle_mutex_;
  std::map<int, std::unique_ptr<Device>> devices_;
  BufferRegistry buffers_;
  CommRegistry comms_;
  SharedContexts shared_contexts_;  // guarded by lifecycle_mutex_
  std::atomic<bool> warned_fallback_{false};
  bool traced_from_environment_ = false;  // guarded by lifecycle_mutex_
};

}  // namespace aethercl
