// The kernel log: the most recent kernel launches of one device (every op family, conversions and
// user launches: every launch record that reaches Device::enqueue), kept in a fixed ring so that
// recording costs a few stores and no allocation.
//
// Contract: every call is made with the owning device's mutex held. Events handed to record() are
// retained and resolved into device times lazily, when the log is read.
#pragma once

#include "cl/opencl.h"
#include "runtime/launch.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace aethercl {

class KernelLog {
 public:
  static constexpr std::size_t kCapacity = 4096;

  explicit KernelLog(bool enabled) : enabled_(enabled) {}
  KernelLog(const KernelLog&) = delete;
  KernelLog& operator=(const KernelLog&) = delete;
  ~KernelLog() { clear(); }

  bool enabled() const { return enabled_; }

  // Records one launch. stream: 0 for the default stream. event may be nullptr (no device times);
  // otherwise it is retained until its times are read.
  void record(const LaunchRecord& launch, std::uintptr_t stream, cl_event event);

  // The JSON array of aethercl_kernel_log, oldest first.
  std::string json();
  // Releases every retained event and forgets every entry.
  void clear() noexcept;

 private:
  struct Entry {
    char kernel[96];
    const char* entry_point;
    std::uintptr_t stream;
    cl_uint work_dim;
    bool has_local;
    bool timed;  // start_ns/end_ns are valid
    std::size_t global[3];
    std::size_t local[3];
    std::uint64_t queued_ns;
    std::uint64_t start_ns;
    std::uint64_t end_ns;
    cl_event event;  // retained until resolved or overwritten
  };
  static void resolve(Entry& entry) noexcept;

  bool enabled_;
  std::vector<Entry> ring_;   // allocated on the first record
  std::uint64_t recorded_ = 0;
};

}  // namespace aethercl
