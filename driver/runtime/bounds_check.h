// AETHERCL_CHECK_BOUNDS: guard zones after client buffers, and the launches that may have hit them.
//
// A guarded buffer of size bytes is a pool block of at least size + guard bytes; the guard,
// [size, size + guard), is filled with kPattern's bytes when the buffer is allocated (fresh or
// reused) and compared at checks. A kernel that writes past the buffer's end lands in the guard,
// inside the block's own allocation, so the host heap (PoCL keeps buffers there) stays intact for
// overruns up to the guard's length; the next check names the buffer, how far past its end the
// writes went and the launches since the last clean check that took the buffer.
//
// Contract: every call is made with the owning device's mutex held. The class keeps bookkeeping
// and formats reports; the Device issues the fills and reads (runtime/device_bounds.cpp).
#pragma once

#include "cl/handle.h"
#include "runtime/launch.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace aethercl {

class BoundsCheck {
 public:
  // Bytes of guard after each buffer: one work-group of 256 items of float4 past the end (a
  // global size rounded up to whole groups with no `if (i < n)`) stays inside it.
  static constexpr std::uint64_t kGuardBytes = 4096;
  // Launches remembered between full checks; older ones are counted, not kept.
  static constexpr std::size_t kHistory = 1024;
  // kGuardBytes bytes of a fixed pseudo-random pattern (no run of equal bytes, so a write of
  // zeros or of any constant shows).
  static const unsigned char* pattern();

  struct Guarded {
    std::uint64_t size = 0;    // the client's bytes
    std::uint64_t guard = 0;   // guard bytes after them (less than kGuardBytes near max_alloc)
    // Completes with the guard's fill, issued on the home stream; reset once it has. Until then
    // the guard is not compared: the fill is ordered after a reused block's earlier owner, whose
    // commands may still write there, and any stream may use the buffer meanwhile.
    cl::Event fill;
    // A launch took the buffer since its guard was last compared at a full check. Only kernels
    // can write past the end (transfers are range-checked), so untouched guards are not read.
    bool touched = false;
  };

  // The guard for a buffer of size bytes on a device whose largest allocation is max_alloc.
  static std::uint64_t guard_for(std::uint64_t size, std::uint64_t max_alloc);

  void track(cl_mem mem, Guarded guarded) { guarded_[mem] = std::move(guarded); }
  std::optional<Guarded> untrack(cl_mem mem);
  std::unordered_map<cl_mem, Guarded>& guarded() { return guarded_; }

  // Remembers a launch (kernel, entry point, stream token, the cl_mem among its arguments) and
  // marks the guarded buffers among its arguments touched.
  void note(const LaunchRecord& launch, std::uintptr_t stream);
  // Whether the guard's fill has run (every stream finished: all_done), resetting its event.
  static bool armed(Guarded& guarded, bool all_done);
  // A full check came out clean or was reported: the history starts again.
  void forget_launches();

  // Bytes past the end that were written, judged from the guard's bytes as read back (0: intact).
  static std::uint64_t overrun(const unsigned char* guard_bytes, std::uint64_t guard);
  // The report for one damaged buffer: its name (name, else the namer's), size, the overrun and
  // the suspect launches.
  std::string describe(cl_mem mem, const Guarded& guarded, std::uint64_t overrun,
                       const std::string& name = {}) const;

  void set_namer(std::function<std::string(cl_mem)> namer) { namer_ = std::move(namer); }
  // Host memory the guards are read into, kept between checks.
  std::vector<unsigned char>& read_buffer() { return read_buffer_; }

 private:
  struct Launch {
    std::string kernel;
    const char* entry_point;
    std::uintptr_t stream;
    std::vector<cl_mem> buffers;
  };

  std::unordered_map<cl_mem, Guarded> guarded_;
  std::deque<Launch> launches_;
  std::uint64_t dropped_ = 0;  // launches since the last full check that are no longer kept
  std::function<std::string(cl_mem)> namer_;
  std::vector<unsigned char> read_buffer_;
};

}  // namespace aethercl
