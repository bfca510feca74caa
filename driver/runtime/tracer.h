// Tracing: a Chrome-trace JSON of every kernel and transfer with device timestamps from OpenCL
// profiling events, plus a per-kernel summary. Off unless AETHERCL_TRACE or aethercl_trace_start.
//
// Contract: record() is called with the owning device's mutex held; everything else takes the
// tracer's own lock. Events are resolved lazily, at synchronising calls and when tracing stops.
#pragma once

#include "cl/handle.h"
#include "support/entry_point.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace aethercl {

class Tracer {
 public:
  static Tracer& instance();

  bool active() const { return active_.load(std::memory_order_relaxed); }
  // Starts a new trace written to path when it stops; throws kInvalidArgument when already on.
  void start(std::string path);
  // Writes the trace file and returns the summary text; throws kDeviceError if the file cannot be
  // written. Callers must have finished the devices' queues.
  std::string stop();

  // Takes a reference to event; name is the kernel or transfer, api the entry point.
  void record(int device_index, cl_event event, std::string name, const char* category,
              const char* api, std::uint64_t bytes);
  // Resolves every finished event into a trace record.
  void collect();
  // The per-kernel summary so far as JSON.
  std::string summary_json();

 private:
  struct Pending {
    int device_index;
    cl::Event event;
    std::string name;
    const char* category;
    const char* api;
    std::uint64_t bytes;
  };
  struct Record {
    int device_index;
    std::string name;
    const char* category;
    const char* api;
    std::uint64_t bytes;
    std::uint64_t start_ns;
    std::uint64_t end_ns;
  };
  struct Totals {
    std::uint64_t count = 0;
    std::uint64_t total_ns = 0;
    std::uint64_t bytes = 0;
  };
  void collect_locked(bool wait);
  std::string summary_text_locked() const;

  std::atomic<bool> active_{false};
  std::mutex mutex_;
  std::string path_;
  std::vector<Pending> pending_;
  std::vector<Record> records_;
  std::map<std::string, Totals> totals_;
};

}  // namespace aethercl
