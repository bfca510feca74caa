// The process-wide runtime: initialised devices by visible index, and the registries of the
// tokens it issues (buffers, user programs, user kernels).
//
// Locking: lifecycle_mutex() is shared by every call and exclusive for initialize/shutdown;
// a device's own mutex serialises its queue. Order: lifecycle, then device, then registry.
#pragma once

#include "program/user_kernel.h"
#include "program/user_program.h"
#include "runtime/buffer_registry.h"
#include "runtime/device.h"
#include "runtime/token_registry.h"

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
  TokenRegistry<std::shared_ptr<UserProgram>>& user_programs() { return user_programs_; }
  TokenRegistry<std::shared_ptr<UserKernel>>& user_kernels() { return user_kernels_; }

  // With the lifecycle lock held: the device a call's gpu_index names (the fallback of
  // docs/ABI.md section 3.2 when exactly one device is initialised). Throws kNotInitialized /
  // kNoDevice.
  Device& resolve(int gpu_index);
  // nullptr when nothing is initialised or the index names no device (no throw).
  Device* try_resolve(int gpu_index) noexcept;
  bool is_initialized(int gpu_index) const { return devices_.count(gpu_index) != 0; }
  // With the lifecycle lock held: throws kNotInitialized when no device is initialised (calls
  // that take a token instead of a gpu_index).
  void require_initialized() const;
  // With the lifecycle lock held: the device of a token's device_index (which is initialised
  // while the token is live).
  Device& device_of(int device_index);

 private:
  Runtime() = default;

  std::shared_mutex lifecycle_mutex_;
  std::map<int, std::unique_ptr<Device>> devices_;
  BufferRegistry buffers_;
  TokenRegistry<std::shared_ptr<UserProgram>> user_programs_{token_tag::kProgram, "program"};
  TokenRegistry<std::shared_ptr<UserKernel>> user_kernels_{token_tag::kKernel, "kernel"};
  std::atomic<bool> warned_fallback_{false};
  bool traced_from_environment_ = false;  // guarded by lifecycle_mutex_
};

}  // namespace aethercl
