// Launch records: argument storage, and submission to OpenCL (the driver's only
// clEnqueueNDRangeKernel for launches).
#include "runtime/launch.h"

#include "cl/cl_error.h"
#include "runtime/launch_capture.h"
#include "support/error.h"

#include <algorithm>
#include <limits>

namespace aethercl {

LaunchArgs& LaunchArgs::operator=(const LaunchArgs& other) {
  if (this == &other) return *this;
  count_ = other.count_;
  used_bytes_ = other.used_bytes_;
  spilled_ = other.spilled_;
  if (spilled_) {
    spill_entries_ = other.spill_entries_;
    spill_bytes_ = other.spill_bytes_;
  } else {
    std::copy_n(other.inline_entries_.begin(), count_, inline_entries_.begin());
    std::copy_n(other.inline_bytes_.begin(), used_bytes_, inline_bytes_.begin());
  }
  return *this;
}

void LaunchArgs::spill() {
  spill_entries_.assign(inline_entries_.begin(), inline_entries_.begin() + count_);
  spill_bytes_.assign(inline_bytes_.begin(), inline_bytes_.begin() + used_bytes_);
  spilled_ = true;
}

void LaunchArgs::add_bytes(const void* value, std::size_t size) {
  if (size > std::numeric_limits<std::uint32_t>::max()) {
    fail(Status::kInvalidArgument, "a kernel argument of {} bytes is too large", size);
  }
  // Values start at 8-byte boundaries, so every scalar type is read back aligned.
  std::size_t offset = (used_bytes_ + 7) / 8 * 8;
  if (!spilled_ && (count_ == kInlineArgs || offset + size > kInlineBytes)) spill();
  Entry entry{static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(size), false};
  if (spilled_) {
    spill_bytes_.resize(offset + size);
    if (size > 0) std::memcpy(spill_bytes_.data() + offset, value, size);
    spill_entries_.push_back(entry);
  } else {
    if (size > 0) std::memcpy(inline_bytes_.data() + offset, value, size);
    inline_entries_[count_] = entry;
  }
  used_bytes_ = offset + size;
  ++count_;
}

void LaunchArgs::add_local(std::size_t bytes) {
  if (bytes > std::numeric_limits<std::uint32_t>::max()) {
    fail(Status::kInvalidArgument, "{} bytes of local memory are too many", bytes);
  }
  if (!spilled_ && count_ == kInlineArgs) spill();
  Entry entry{0, static_cast<std::uint32_t>(bytes), true};
  if (spilled_) spill_entries_.push_back(entry);
  else inline_entries_[count_] = entry;
  ++count_;
}

LaunchArgs::Arg LaunchArgs::operator[](std::size_t index) const {
  const Entry& e = entry(index);
  if (e.local) return Arg{nullptr, e.size};
  return Arg{bytes() + e.offset, e.size};
}

LaunchGeometry LaunchGeometry::grid(cl_uint dimensions, const std::size_t* global,
                                    const std::size_t* local) {
  LaunchGeometry geometry;
  geometry.dimensions = dimensions;
  geometry.runtime_picks_local = local == nullptr;
  for (cl_uint d = 0; d < dimensions && d < 3; ++d) {
    geometry.global[d] = global[d];
    if (local != nullptr) geometry.local[d] = local[d];
  }
  return geometry;
}

void bind_launch_args(const LaunchRecord& record) {
  Kernel& target = *record.kernel;
  cl_kernel kernel = target.get();
  if (target.bound.size() < record.args.count()) target.bound.resize(record.args.count());
  for (std::size_t i = 0; i < record.args.count(); ++i) {
    LaunchArgs::Arg arg = record.args[i];
    BoundArg& bound = target.bound[i];
    bool local = arg.value == nullptr;
    if (bound.known && bound.local == local && bound.size == arg.size &&
        (local || std::memcmp(bound.bytes, arg.value, arg.size) == 0)) {
      continue;  // OpenCL keeps argument values between launches
    }
    bound.known = false;  // unknown until clSetKernelArg has succeeded
    cl::check(clSetKernelArg(kernel, static_cast<cl_uint>(i), arg.size, arg.value),
              "clSetKernelArg");
    if (arg.size <= BoundArg::kMaxBytes) {
      bound.known = true;
      bound.local = local;
      bound.size = static_cast<std::uint32_t>(arg.size);
      if (!local) std::memcpy(bound.bytes, arg.value, arg.size);
    }
  }
}

void submit_launch(cl_command_queue queue, const LaunchRecord& record, cl_event* event,
                   cl_uint wait_count, const cl_event* wait_list) {
  bind_launch_args(record);
  cl_kernel kernel = record.kernel->get();
  capture_launch(queue, record);
  const LaunchGeometry& g = record.geometry;
  cl::check(clEnqueueNDRangeKernel(queue, kernel, g.dimensions, nullptr, g.global.data(),
                                   g.runtime_picks_local ? nullptr : g.local.data(), wait_count,
                                   wait_list, event),
            "clEnqueueNDRangeKernel");
}

}  // namespace aethercl
