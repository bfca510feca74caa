// One initialised device: its context, streams, memory pool, staging ring, program cache, kernel
// log and, where enabled, its submission thread.
//
// Contract: callers hold mutex() for every member call except info(), index(), context(),
// disk_cache(), the user-program counters, the constructor and destructor, and the
// deferred-error functions (DeviceCall does this). Commands are issued on a Stream of this device;
// on one stream they run in the order issued. With a submission thread (runtime/submitter.h)
// commands are recorded and enqueued by that thread in the same order; every synchronising member
// drains it first, so the difference is invisible to callers except that errors raised while
// enqueueing surface at the next synchronising call (deferred errors).
#pragma once

#include "cl/handle.h"
#include "runtime/command.h"
#include "runtime/device_info.h"
#include "runtime/graph_holds.h"
#include "runtime/kernel_log.h"
#include "runtime/launch.h"
#include "runtime/memory_pool.h"
#include "runtime/pinned_memory.h"
#include "runtime/program_cache.h"
#include "runtime/stream.h"
#include "runtime/submitter.h"
#include "support/error.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace aethercl {

class BoundsCheck;
class Graph;

// State that a higher layer keeps per device (GEMM plans, ...), owned and destroyed by the Device
// before its kernels and buffers.
class DeviceExtension {
 public:
  virtual ~DeviceExtension() = default;
};

class Device {
 public:
  // shared_context: a context reference handed over (the platform's shared context, see
  // runtime/shared_contexts.h), or nullptr for a context of the device's own.
  Device(int index, const DeviceInfo& info, cl_context shared_context = nullptr);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  // Drains the submission thread, waits for every stream, then releases programs, buffers,
  // queues and context, in that order.
  ~Device();

  int index() const { return index_; }
  const DeviceInfo& info() const { return info_; }
  std::mutex& mutex() { return mutex_; }

  cl_context context() const { return context_.get(); }
  // Whether this device shares its context with other devices of its platform.
  bool shares_context() const { return shares_context_; }
  MemoryPool& pool() { return *pool_; }
  ProgramCache& programs() { return *programs_; }
  // Immutable after construction: usable without the mutex (user program builds).
  const BinaryCache& disk_cache() const { return disk_cache_; }
  // User programs built for this device, and how many of them came from the disk cache; atomic
  // because user builds run without the device mutex.
  std::atomic<std::uint64_t>& user_program_builds() { return user_program_builds_; }
  std::atomic<std::uint64_t>& user_program_cache_hits() { return user_program_cache_hits_; }
  // The most recent launches of every stream (runtime/kernel_log.h), recorded by enqueue().
  KernelLog& kernel_log() { return kernel_log_; }

  // The device's instance of T, made on first use (T: a DeviceExtension, default-constructible).
  template <typename T>
  T& extension() {
    static_assert(std::is_base_of_v<DeviceExtension, T>);
    static const char key = 0;
    std::unique_ptr<DeviceExtension>& slot = extensions_[&key];
    if (!slot) slot = std::make_unique<T>();
    return static_cast<T&>(*slot);
  }

  // ---- streams -------------------------------------------------------------------------------
  Stream& default_stream() { return *streams_.front(); }
  // The live stream with this id, or nullptr (destroyed, or another device's).
  Stream* find_stream(std::uint64_t id);
  // The calling thread's current stream (runtime/stream.h), the default stream when none is set
  // or the one set was destroyed.
  Stream& current_stream();
  // A new in-order queue; timing streams profile so their events carry timestamps.
  Stream& create_stream(std::uint64_t id, void* token, bool timing);
  // Work already issued still completes; blocks of its pool serve other streams afterwards.
  void destroy_stream(Stream& stream);
  // The stream of the entry-point call that holds this device's lock (DeviceCall sets it: the
  // thread's current stream, or the one a stream argument named), for code that has the Device
  // but not the call (GEMM internals, scratch memory). The default stream outside a call.
  Stream& call_stream() { return call_stream_ != nullptr ? *call_stream_ : default_stream(); }
  void set_call_stream(Stream* stream) { call_stream_ = stream; }
  std::size_t stream_count() const { return streams_.size(); }

  // ---- memory ------------------------------------------------------------------------------
  // A block homed on stream (runtime/memory_pool.h). While stream captures a graph, a block the
  // capture allocated and freed again may serve (runtime/graph.h).
  PoolBlock allocate(Stream& stream, std::uint64_t size);
  // Returns a block to the pool; used_on lists the streams other than its home that used it, on
  // which events are recorded so the block is reused only after that work.
  void free_block(PoolBlock block, const std::vector<std::uint64_t>& used_on);
  // A client buffer's block. With AETHERCL_CHECK_BOUNDS a guard zone follows its size bytes
  // (runtime/bounds_check.h), armed on stream and checked at every synchronising call.
  PoolBlock allocate_buffer(Stream& stream, std::uint64_t size);
  // Frees a block of allocate_buffer. With AETHERCL_CHECK_BOUNDS its guard is checked first
  // (after the work that uses it); a damaged guard throws Error(kOutOfRange), naming the buffer
  // as name, once the block has been freed all the same.
  void free_buffer(PoolBlock block, const std::vector<std::uint64_t>& used_on,
                   const std::string& name);
  bool checks_bounds() const { return bounds_ != nullptr; }
  // Frees a block of allocate_buffer without checking it (failure paths, shutdown). noexcept.
  void discard_buffer(PoolBlock block) noexcept;
  // How reports name a client buffer (the runtime looks its token and label up); set once.
  void set_buffer_namer(std::function<std::string(cl_mem)> namer);

  // ---- commands ----------------------------------------------------------------------------
  // Every kernel launch of the driver comes through here (runtime/launch.h).
  void enqueue(Stream& stream, const LaunchRecord& record);
  // A host-to-device write that returns before the copy has run: pinned source memory is
  // transferred from directly (the caller keeps it untouched until the stream passes this point);
  // other memory is copied into the staging ring first (or, beyond the ring, written blocking).
  void write(Stream& stream, cl_mem mem, std::uint64_t offset, std::uint64_t size,
             const void* source, bool source_pinned);
  // The seed read: waits for every stream of the device, then reads; reports deferred errors.
  void read(Stream& stream, cl_mem mem, std::uint64_t offset, std::uint64_t size,
            void* destination);
  // A read ordered on one stream only: into pinned destination memory it returns once enqueued;
  // otherwise it returns after the data has arrived (waiting for that stream, not the others).
  void read_async(Stream& stream, cl_mem mem, std::uint64_t offset, std::uint64_t size,
                  void* destination, bool destination_pinned);
  void copy(Stream& stream, cl_mem source, std::uint64_t source_offset, cl_mem destination,
            std::uint64_t destination_offset, std::uint64_t size);
  void fill(Stream& stream, cl_mem mem, std::uint64_t offset, std::uint64_t size,
            unsigned char value);
  // The stream waits (on the device) for event, an event of this device's context.
  void wait_for_event(Stream& stream, cl_event event);
  // An event that completes when everything issued on the stream so far has. With timing, it is
  // a real (tiny) command, so device timestamps exist for it on every runtime.
  cl::Event record_event(Stream& stream);

  // ---- graphs (runtime/graph.h, device_graphs.cpp) -----------------------------------------
  // While a stream captures, enqueue, write, copy, fill and pinned read_async record into its
  // graph instead of running; reads that wait and event waits are refused.
  // Throws kInvalidArgument when the stream already captures.
  void begin_capture(Stream& stream, std::shared_ptr<Graph> graph);
  // The stream's graph, the capture ended. Throws kInvalidArgument when it captures nothing.
  std::shared_ptr<Graph> end_capture(Stream& stream);
  // Throws kInvalidArgument naming the capture when stream captures: what is the refused work
  // ("read_gpu_to_host_blocking waits for the device"); the capture stays as it was.
  void refuse_during_capture(const Stream& stream, const std::string& what) const;
  // As refuse_during_capture, for any capturing stream of the device.
  void refuse_during_any_capture(const std::string& what) const;
  // Enqueues the graph's commands on stream, ordered after its previous launch (or, before the
  // first, after the capture stream's work issued so far); returns once they are handed over.
  void launch_graph(Graph& graph, Stream& stream);
  // Waits for the graph's last launch, then releases its commands and the memory only it kept.
  void destroy_graph(Graph& graph);
  // Device bytes kept allocated for the graph alone (scratch of captured ops, freed buffers).
  std::uint64_t graph_bytes_held(const Graph& graph) const;
  // Shutdown: drops every capture still in progress.
  void abandon_captures();
  // A Scratch block back to the pool, unless a graph references it.
  void release_scratch(PoolBlock block);

  // ---- synchronisation --------------------------------------------------------------------
  // Waits for every stream; throws Error for a deferred error (execution or enqueue failure).
  void synchronize();
  // Waits for one stream (still reporting the device's deferred errors).
  void synchronize(Stream& stream);
  // Every recorded command has been handed to OpenCL.
  void drain();
  // Throws the first deferred error, if any, and forgets it. Thread-safe.
  void raise_deferred_error();
  // Records a failure found outside a synchronising call (first one wins). Thread-safe.
  void defer_error(Status status, std::string message);

  // Switches every stream to a profiling queue (for tracing) after finishing the current ones;
  // disable_profiling switches back all but timing streams (a profiling stream's launches run
  // on the calling thread, past the submission thread, to keep their events).
  void enable_profiling();
  void disable_profiling();
  // Whether commands go through a submission thread (AETHERCL_SUBMIT_THREAD, else per device).
  bool submission_thread() const { return submitter_ != nullptr; }
  // The stream's queue for code outside the driver (aethercl_cl_queue). Stops the submission
  // thread for good (after draining it), so that work the caller enqueues there is ordered with
  // the driver's own exactly as issued; the queue stays valid until the device is released.
  cl_command_queue queue_for_interop(Stream& stream);

  // For memory statistics.
  std::uint64_t staging_used_bytes() const { return ring_ ? ring_->used() : 0; }
  std::uint64_t staging_capacity_bytes() const { return ring_ ? ring_->capacity() : 0; }

 private:
  // Records command into the stream's graph when it captures (true), else does nothing.
  bool record_if_capturing(Stream& stream, Command& command);
  // A launch through the graph's command buffer for stream's queue (recorded at the first launch
  // there); false where the graph replays in batches instead.
  bool launch_command_buffer(Graph& graph, Stream& stream);
  // An event that completes when the work issued so far on stream id has (empty: none left).
  cl::Event stream_tail(std::uint64_t id);
  // Records or runs a command (the single path to execute()).
  void submit(Command&& command, std::uint64_t traced_bytes = 0);
  // Runs a command on this thread with the tracing/sync bookkeeping; with keep, *keep receives a
  // retained reference to the command's event.
  void run_now(const Command& command, std::uint64_t traced_bytes, cl_event* keep = nullptr);
  cl::Queue create_queue(bool profiling);
  bool tracking() const;
  // Waits for every stream's queue (drained first); the staging ring is free afterwards.
  void finish_all_streams();
  // Waits for the last work of every destroyed stream and forgets those streams.
  void wait_for_retired_streams();
  void check_last_event();
  PinnedRing& ring();
  // AETHERCL_CHECK_BOUNDS: compares the guards of the buffers homed on only (every buffer when
  // nullptr, which needs every stream finished) and throws Error(kOutOfRange) for damaged ones.
  void check_guards(Stream* only);

  int index_;
  DeviceInfo info_;
  std::mutex mutex_;
  cl::Context context_;
  std::vector<std::unique_ptr<Stream>> streams_;  // [0] is the default stream
  Stream* call_stream_ = nullptr;
  std::unique_ptr<MemoryPool> pool_;
  BinaryCache disk_cache_;
  std::atomic<std::uint64_t> user_program_builds_{0};
  std::atomic<std::uint64_t> user_program_cache_hits_{0};
  std::unique_ptr<ProgramCache> programs_;
  KernelLog kernel_log_;
  GraphHolds holds_;  // memory that graphs keep allocated
  // holds_.keep, offering the block to the capture that allocated it where only that capture's
  // graph names it and only its stream used it.
  bool keep_for_graphs(const PoolBlock& block, const std::vector<std::uint64_t>& used_on);
  std::unique_ptr<BoundsCheck> bounds_;  // null unless AETHERCL_CHECK_BOUNDS is on
  // Queues handed to callers by interop (queue_for_interop): kept until the device goes, since a
  // queue a stream replaces (tracing) may still be in the caller's hands.
  std::vector<cl::Queue> interop_queues_;
  std::unique_ptr<PinnedRing> ring_;              // created at the first staged transfer
  std::unique_ptr<Submitter> submitter_;
  // Destroyed streams and the event of their last command (until it has completed).
  std::vector<std::pair<std::uint64_t, cl::Event>> retired_;
  cl::Mem timing_scratch_;                        // target of timing events' tiny fills
  cl::Event last_event_;
  const char* last_command_ = "";
  bool sync_every_call_;
  bool profiling_ = false;
  // Seed reads: straight into the caller's memory, through the pinned ring, or through the ring
  // for the sizes where that measured faster (AETHERCL_READ_PATH=direct|pinned; default: by
  // device kind, runtime/device.cpp).
  enum class ReadPath { kDirect, kRing, kRingForMidSizes };
  ReadPath read_path_ = ReadPath::kDirect;
  bool shares_context_ = false;
  std::map<const void*, std::unique_ptr<DeviceExtension>> extensions_;

  std::mutex deferred_mutex_;
  std::optional<Error> deferred_;
};

}  // namespace aethercl
