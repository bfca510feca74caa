// A stream: one in-order OpenCL queue of a device. Every device has a default stream (id 0, the
// queue every seed entry point used before streams existed) and any number of user streams.
// Commands on one stream run in order; streams of a device are ordered only by events and
// synchronisation. Owned by its Device; the client holds a typed token (runtime/token_table.h).
#pragma once

#include "cl/handle.h"
#include "runtime/launch_counters.h"

#include <cstdint>
#include <memory>

namespace aethercl {

class Graph;

class Stream {
 public:
  Stream(int device_index, std::uint64_t id, void* token, cl::Queue queue, bool timing,
         bool profiling)
      : device_index_(device_index), id_(id), token_(token), queue_(std::move(queue)),
        timing_(timing), profiling_(profiling) {}
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device_index() const { return device_index_; }
  // 0 for the default stream; otherwise the id inside the client's token.
  std::uint64_t id() const { return id_; }
  bool is_default() const { return id_ == 0; }
  // The client's token (NULL for the default stream, as the API spells it).
  void* token() const { return token_; }
  cl_command_queue queue() const { return queue_.get(); }
  // Created with AETHERCL_STREAM_TIMING: events recorded on it carry device timestamps.
  bool timing() const { return timing_; }
  // Whether the queue profiles (timing streams, and every stream while tracing).
  bool profiling() const { return profiling_; }

  // The graph this stream's commands are recorded into instead of running (runtime/graph.h),
  // or nullptr; read and set with the device's mutex held.
  Graph* capture() const { return capture_.get(); }
  const std::shared_ptr<Graph>& capture_graph() const { return capture_; }
  void set_capture(std::shared_ptr<Graph> graph) { capture_ = std::move(graph); }

  // Launch counters for the stream's kernels (runtime/launch_counters.h), made at first use;
  // with the device's mutex held.
  cl_mem counters(cl_context context) {
    if (!counters_) counters_ = make_launch_counters(context, kMaxLaunchCounters);
    return counters_.get();
  }

  // With the device's mutex held and the stream idle: a new queue (tracing turns profiling on).
  void replace_queue(cl::Queue queue, bool profiling) {
    queue_ = std::move(queue);
    profiling_ = profiling;
  }

 private:
  int device_index_;
  std::uint64_t id_;
  void* token_;
  cl::Queue queue_;
  bool timing_;
  bool profiling_;
  std::shared_ptr<Graph> capture_;
  cl::Mem counters_;
};

// This thread's current stream of a device, as a stream id (0: the default stream). Ids are
// never reused, so an id whose stream was destroyed simply no longer resolves (the device then
// uses its default stream).
std::uint64_t current_stream_id(int device_index) noexcept;
void set_current_stream_id(int device_index, std::uint64_t id);

}  // namespace aethercl
