// The process-wide runtime: initialised devices by visible index (sharing one context per
// platform where several are visible), and the registries of the client's tokens (buffers,
// streams, events, communicators, user programs and kernels, graphs) and pinned host allocations.
//
// Locking: lifecycle_mutex() is shared by every call and exclusive for initialize/shutdown;
// a device's own mutex serialises its streams. Order: lifecycle, then device, then registries.
#pragma once

#include "runtime/buffer_registry.h"
#include "runtime/communicator.h"
#include "runtime/device.h"
#include "runtime/host_memory.h"
#include "runtime/program/user_kernel.h"
#include "runtime/program/user_program.h"
#include "runtime/shared_contexts.h"
#include "runtime/token_table.h"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <vector>

namespace aethercl {

class Graph;  // runtime/graph.h

// What a stream token names: the device and the stream's id there (the Device owns the Stream).
struct StreamEntry {
  int device_index = -1;
  std::uint64_t id = 0;
};

// An event token: a recorded point on a stream of a device.
struct EventRecord {
  int device_index = -1;
  cl::Event event;
  bool timing = false;  // recorded on a timing stream: device timestamps available
};

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
  // At process exit (atexit, registered when AETHERCL_TRACE starts a trace): writes that trace if
  // shutdown_driver never did. Releases nothing; skipped in a forked child and while another
  // thread is inside a call (the trace is then lost, with a warning).
  void write_trace_at_exit() noexcept;
  // At process exit, when the main thread initialised a device (Linux): waits for the work
  // still queued on every device, since an OpenCL runtime still compiling or running it while
  // the process's libraries are torn down can crash (PoCL compiles kernels on its worker
  // threads). Releases nothing; skipped in a forked child, and for a device another thread is
  // using.
  void finish_at_exit() noexcept;
  // Waits for every initialised device's queue (tracing needs all events finished).
  void finish_all();
  // Gives every initialised device a profiling queue (tracing started after initialisation), and
  // back the plain ones when tracing stops.
  void enable_profiling_all();
  void disable_profiling_all();

  // hook runs in every later shutdown (lifecycle lock held exclusively) after the communicators
  // are released and before the devices are: per-device objects kept outside the runtime
  // (multi/engine_peer_copy.cpp) go there. With the lifecycle lock held (shared is enough).
  void add_shutdown_hook(std::function<void()> hook);

  std::shared_mutex& lifecycle_mutex() { return lifecycle_mutex_; }
  BufferRegistry& buffers() { return buffers_; }
  CommRegistry& comms() { return comms_; }
  TokenTable<StreamEntry>& streams() { return streams_; }
  TokenTable<EventRecord>& events() { return events_; }
  HostMemoryRegistry& host_memory() { return host_memory_; }
  TokenTable<UserProgram>& user_programs() { return user_programs_; }
  TokenTable<UserKernel>& user_kernels() { return user_kernels_; }
  TokenTable<Graph>& graphs() { return graphs_; }

  // With the lifecycle lock held: the device a call's gpu_index names (the fallback of
  // docs/ABI.md section 3.2 when exactly one device is initialised). Throws kNotInitialized /
  // kNoDevice.
  Device& resolve(int gpu_index);
  // nullptr when nothing is initialised or the index names no device (no throw).
  Device* try_resolve(int gpu_index) noexcept;
  bool is_initialized(int gpu_index) const { return devices_.count(gpu_index) != 0; }
  // With the lifecycle lock held: throws kNotInitialized when no device is initialised (for
  // calls without a gpu_index whose objects only exist while devices do: events, host memory).
  void require_any_device() const;
  // With the lifecycle lock held: the device of a token's device_index (which is initialised
  // while the token is live).
  Device& device_of(int device_index);

 private:
  Runtime() = default;
  // With lifecycle_mutex_ held exclusively: finishes the queues and writes the AETHERCL_TRACE file.
  void write_environment_trace() noexcept;

  std::shared_mutex lifecycle_mutex_;
  std::map<int, std::unique_ptr<Device>> devices_;
  BufferRegistry buffers_;
  CommRegistry comms_;
  SharedContexts shared_contexts_;  // guarded by lifecycle_mutex_
  TokenTable<StreamEntry> streams_{token_tag::kStream, "stream"};
  TokenTable<EventRecord> events_{token_tag::kEvent, "event"};
  HostMemoryRegistry host_memory_;
  TokenTable<UserProgram> user_programs_{token_tag::kProgram, "program"};
  TokenTable<UserKernel> user_kernels_{token_tag::kKernel, "kernel"};
  TokenTable<Graph> graphs_{token_tag::kGraph, "graph"};
  std::atomic<bool> warned_fallback_{false};
  std::mutex hooks_mutex_;
  std::vector<std::function<void()>> shutdown_hooks_;  // guarded by hooks_mutex_
  bool traced_from_environment_ = false;  // guarded by lifecycle_mutex_
  long trace_process_id_ = 0;             // the process that started it (guarded likewise)
};

}  // namespace aethercl
