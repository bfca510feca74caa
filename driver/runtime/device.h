// One initialised device: its context, in-order queue, memory pool, staging and program cache.
//
// Contract: callers hold mutex() for every member call except info(), index() and the
// constructor/destructor (DeviceCall does this). All commands go to the single in-order queue,
// which is what makes asynchronous returns and stream-ordered buffer reuse invisible to clients.
#pragma once

#include "cl/handle.h"
#include "runtime/device_info.h"
#include "runtime/launch.h"
#include "runtime/memory_pool.h"
#include "runtime/program_cache.h"
#include "runtime/staging.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace aethercl {

class Device {
 public:
  // shared_context: a context reference handed over (the platform's shared context), or nullptr
  // for a context of the device's own.
  Device(int index, const DeviceInfo& info, cl_context shared_context = nullptr);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  // Waits for the queue, then releases programs, buffers, queue and context, in that order.
  ~Device();

  int index() const { return index_; }
  const DeviceInfo& info() const { return info_; }
  std::mutex& mutex() { return mutex_; }

  cl_context context() const { return context_.get(); }
  cl_command_queue queue() const { return queue_.get(); }
  MemoryPool& pool() { return *pool_; }
  ProgramCache& programs() { return *programs_; }
  const Staging& staging() const { return staging_; }

  // Enqueues a kernel launch (runtime/launch.h): every launch of the driver comes through here.
  void enqueue(const LaunchRecord& record);
  void write(cl_mem mem, std::uint64_t offset, std::uint64_t size, const void* source);
  // Blocking: waits for all earlier work, then reports any deferred execution error.
  void read(cl_mem mem, std::uint64_t offset, std::uint64_t size, void* destination);
  void copy(cl_mem source, cl_mem destination, std::uint64_t size);
  // Peer copies and collectives: an event that completes once everything enqueued so far has
  // (owned by the caller), and a barrier making later work wait for events of other queues of
  // this context, tracked like any command.
  cl_event marker();
  void wait_for(const std::vector<cl_event>& events, const char* what);
  // Whether this device shares its context with other devices of its platform.
  bool shares_context() const { return shares_context_; }
  // Waits for all enqueued work; throws Error(kDeviceError) for a deferred execution failure.
  void synchronize();
  // Switches to a profiling queue (for tracing) after finishing the current one.
  void enable_profiling();

 private:
  // Keeps the event of the newest command (to detect execution failures later); finishes at once
  // under AETHERCL_SYNC=1.
  void track(cl_event event, const char* what, const Kernel* kernel, std::uint64_t bytes);
  void check_last_event();
  cl::Queue create_queue(bool profiling);

  int index_;
  DeviceInfo info_;
  std::mutex mutex_;
  cl::Context context_;
  cl::Queue queue_;
  std::unique_ptr<MemoryPool> pool_;
  std::unique_ptr<ProgramCache> programs_;
  Staging staging_;
  cl::Event last_event_;
  const char* last_command_ = "";
  bool sync_every_call_;
  bool profiling_ = false;
  bool shares_context_ = false;
};

}  // namespace aethercl
