// A kernel launch as a value (the launch record) and the one function that hands records to
// OpenCL. Every launch of the driver, op families and user kernels alike, is built as a record and
// goes through Device::enqueue (runtime/device.h), which either submits it at once or queues it for
// the device's submission thread; both end in submit_launch below, the only caller of
// clSetKernelArg and clEnqueueNDRangeKernel for launches.
//
// A record holds everything a launch needs by value (kernel, argument bytes, geometry, and the
// exported function that caused it), so it can be submitted later on another thread and logged.
// What it points to must outlive that: the Kernel (and every cl_mem among the arguments) stays
// alive until the device has drained its submission thread (Device::drain, which every
// synchronising call does) — code that releases a kernel or buffer a record may name drains
// first, as MemoryPool does before clReleaseMemObject.
//
// For code outside the op families (user kernels, GEMM): build the record with make_launch, or
// fill LaunchRecord::args from any argument list (add_bytes / add_local), and hand it to
// DeviceCall::enqueue (the call's stream) or Device::enqueue(stream, record). The kernel log
// hooks in at Device::enqueue / execute (runtime/command.cpp), where the stream, the record and,
// when requested, the event are all at hand.
#pragma once

#include "cl/opencl.h"
#include "runtime/kernel.h"
#include "support/entry_point.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

namespace aethercl {

// A __local argument: bytes of local memory, no value.
struct LocalBytes {
  std::size_t bytes;
};

// Kernel arguments in order, by value: scalars and cl_mem as their bytes, local memory as a size.
// Sixteen arguments of up to 160 bytes in all are stored inline (every op family fits); more spill
// to the heap.
class LaunchArgs {
 public:
  struct Arg {
    const void* value;  // nullptr for a __local argument
    std::size_t size;   // bytes of the value, or of local memory
  };

  LaunchArgs() = default;
  LaunchArgs(const LaunchArgs& other) { *this = other; }
  LaunchArgs& operator=(const LaunchArgs& other);

  template <typename T>
  void add(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "kernel arguments are plain values");
    add_bytes(&value, sizeof(T));
  }
  void add(const LocalBytes& local) { add_local(local.bytes); }
  void add_bytes(const void* value, std::size_t size);
  void add_local(std::size_t bytes);

  std::size_t count() const { return count_; }
  Arg operator[](std::size_t index) const;

 private:
  struct Entry {
    std::uint32_t offset;  // into the byte storage
    std::uint32_t size;
    bool local;
  };
  static constexpr std::size_t kInlineArgs = 16;
  static constexpr std::size_t kInlineBytes = 160;

  const unsigned char* bytes() const { return spilled_ ? spill_bytes_.data() : inline_bytes_.data(); }
  const Entry& entry(std::size_t index) const {
    return spilled_ ? spill_entries_[index] : inline_entries_[index];
  }
  void spill();

  std::size_t count_ = 0;
  std::size_t used_bytes_ = 0;
  bool spilled_ = false;
  std::array<Entry, kInlineArgs> inline_entries_{};
  alignas(8) std::array<unsigned char, kInlineBytes> inline_bytes_{};
  std::vector<Entry> spill_entries_;
  std::vector<unsigned char> spill_bytes_;
};

// The NDRange: 1 to 3 dimensions, global sizes and either local sizes or "the runtime picks".
struct LaunchGeometry {
  cl_uint dimensions = 1;
  std::array<std::size_t, 3> global{1, 1, 1};
  std::array<std::size_t, 3> local{1, 1, 1};
  bool runtime_picks_local = false;  // true: local is passed to OpenCL as NULL

  // One dimension: global items in work-groups of local items (global a multiple of local).
  static LaunchGeometry linear(std::size_t global, std::size_t local) {
    LaunchGeometry geometry;
    geometry.global[0] = global;
    geometry.local[0] = local;
    return geometry;
  }
  // dimensions sizes from global and local (NULL local: the runtime picks).
  static LaunchGeometry grid(cl_uint dimensions, const std::size_t* global,
                             const std::size_t* local);
};

struct LaunchRecord {
  Kernel* kernel = nullptr;        // owned by the device's program cache (or a user kernel)
  LaunchArgs args;
  LaunchGeometry geometry;
  const char* entry_point = "";    // the exported function that caused the launch
  // Keeps a user kernel (whose token may be destroyed at any time) alive while the record waits
  // to be submitted; empty for the program cache's kernels, which live as long as the device.
  std::shared_ptr<const void> owner;
};

// A record of kernel with args in order (any trivially copyable value, cl_mem, LocalBytes) over
// geometry, attributed to the entry point running on this thread.
template <typename... Args>
LaunchRecord make_launch(Kernel& kernel, const LaunchGeometry& geometry, const Args&... args) {
  LaunchRecord record;
  record.kernel = &kernel;
  record.geometry = geometry;
  (record.args.add(args), ...);
  record.entry_point = current_entry_point();
  return record;
}

// Binds the record's arguments to its kernel, skipping arguments whose value is already bound (the
// same contract as submit_launch: the caller owns the kernel's argument state).
void bind_launch_args(const LaunchRecord& record);

// Binds the record's arguments to its kernel (skipping arguments whose value is already bound)
// and enqueues it on queue, after the wait_count events of wait_list (collectives order launches
// after transfers of other queues); event, when not NULL, receives the launch's event. Throws
// Error naming the OpenCL call that failed. The caller owns the kernel's argument state for the
// duration (kernel objects are not thread-safe to bind).
void submit_launch(cl_command_queue queue, const LaunchRecord& record, cl_event* event,
                   cl_uint wait_count = 0, const cl_event* wait_list = nullptr);

}  // namespace aethercl
