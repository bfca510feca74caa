// One initialised device: its context, in-order queue, memory pool, staging, program cache and
// kernel log.
//
// Contract: callers hold mutex() for every member call except info(), index(), context(),
// disk_cache(), the user-program counters and the constructor/destructor (DeviceCall does this). All commands go to the single in-order queue,
// which is what makes asynchronous returns and stream-ordered buffer reuse invisible to clients.
#pragma once

#include "cl/handle.h"
#include "runtime/device_info.h"
#include "runtime/kernel_log.h"
#include "runtime/launch.h"
#include "runtime/memory_pool.h"
#include "runtime/program_cache.h"
#include "runtime/staging.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace aethercl {

class Device {
 public:
  Device(int index, const DeviceInfo& info);
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
  // Immutable after construction: usable without the mutex (user program builds).
  const BinaryCache& disk_cache() const { return disk_cache_; }
  // User programs built for this device, and how many of them came from the disk cache; atomic
  // because user builds run without the device mutex.
  std::atomic<std::uint64_t>& user_program_builds() { return user_program_builds_; }
  std::atomic<std::uint64_t>& user_program_cache_hits() { return user_program_cache_hits_; }
  const Staging& staging() const { return staging_; }
  KernelLog& kernel_log() { return kernel_log_; }
  // Whether the queue records device timestamps (tracing is on).
  bool profiling() const { return profiling_; }

  // Enqueues a kernel launch (runtime/launch.h): every launch of the driver comes through here,
  // and each is recorded in the kernel log.
  void enqueue(const LaunchRecord& record);
  void write(cl_mem mem, std::uint64_t offset, std::uint64_t size, const void* source);
  // Blocking: waits for all earlier work, then reports any deferred execution error.
  void read(cl_mem mem, std::uint64_t offset, std::uint64_t size, void* destination);
  void copy(cl_mem source, cl_mem destination, std::uint64_t size);
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
  // Queues replaced by enable_profiling(): kept until the device goes, because aethercl_cl_queue
  // may have handed them out.
  std::vector<cl::Queue> retired_queues_;
  std::unique_ptr<MemoryPool> pool_;
  BinaryCache disk_cache_;
  std::atomic<std::uint64_t> user_program_builds_{0};
  std::atomic<std::uint64_t> user_program_cache_hits_{0};
  std::unique_ptr<ProgramCache> programs_;
  Staging staging_;
  KernelLog kernel_log_;
  cl::Event last_event_;
  const char* last_command_ = "";
  bool sync_every_call_;
  bool profiling_ = false;
};

}  // namespace aethercl
