// Shared plumbing of the training-op family: the stream argument, descriptor reading, checked
// float hyper-parameters, scratch device memory and the 1-D launch.
#pragma once

#include "ops/kernel_limits.h"
#include "runtime/device_call.h"
#include "runtime/kernel_args.h"
#include "support/error.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace aethercl::ops::train {

// NULL is the calling thread's current stream of the device. Until this build has streams,
// every other value is refused.
void require_current_stream(const void* stream);

// Reads a version-3 descriptor: refuses NULL and a struct_size below sizeof(Desc); a larger
// struct (a newer header) is accepted and only the known prefix is read.
template <typename Desc>
Desc read_desc(const Desc* desc) {
  if (desc == nullptr) fail(Status::kInvalidArgument, "desc is NULL");
  std::size_t size = 0;
  std::memcpy(&size, desc, sizeof size);
  if (size < sizeof(Desc)) {
    fail(Status::kInvalidArgument, "desc.struct_size = {} is smaller than the version-3 size {}",
         size, sizeof(Desc));
  }
  Desc copy;
  std::memcpy(&copy, desc, sizeof(Desc));
  return copy;
}

// Float arguments: NaN fails every comparison, so each check refuses NaN as well.
void require_finite(const char* name, float value);
void require_at_least(const char* name, float value, float minimum);            // finite, >= min
void require_in_closed(const char* name, float value, float low, float high);  // [low, high]
void require_in_half_open(const char* name, float value, float low, float high);  // [low, high)

// A non-negative int dimension as uint64 (kInvalidArgument naming it when negative).
std::uint64_t dim(const char* name, int value);
// A positive int parameter (stride, dilation, ...).
std::uint64_t positive(const char* name, int value);

// Bytes of count elements of element_size, overflow-checked.
inline std::uint64_t bytes_of(std::uint64_t count, std::uint64_t element_size) {
  return byte_count(count, element_size);
}

// Product of dimensions, overflow-checked (kInvalidArgument naming `what`).
std::uint64_t product(const char* what, std::initializer_list<std::uint64_t> dims);

// Device memory for intermediate results, from the device's pool; returned to the pool when the
// op's scope ends. Commands are stream-ordered, so commands enqueued by this op finish with it
// before a later command can reuse the block.
class Scratch {
 public:
  Scratch(Device& device, std::uint64_t bytes);
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch();
  cl_mem mem() const { return block_.mem; }
  BufferView view() const { return BufferView{block_.mem, bytes_}; }

 private:
  Device& device_;
  PoolBlock block_;
  std::uint64_t bytes_;
};

// Builds (once) and returns kernel `name` of the kernel family `family`.
inline cl_kernel kernel_of(Device& device, const char* family, const char* name) {
  return device.programs().kernel(family, name);
}

// Launches a grid-stride kernel over n items: arguments are bound in order.
template <typename... Args>
void launch_linear(Device& device, const char* family, const char* name, std::uint64_t n,
                   const Args&... args) {
  cl_kernel kernel = kernel_of(device, family, name);
  set_kernel_args(kernel, args...);
  Geometry1D geometry = kernel_linear_geometry(device, kernel, n);
  device.launch(kernel, 1, &geometry.global, &geometry.local);
}

// Launch shape for one-work-group-per-slice reductions (a row, a channel): a power-of-two local
// size (1 on CPU devices, where one item reducing serially is fastest), one group per slice up to
// 64 per compute unit (kernels walk the rest). The kernel gets local-size scratch elements of
// scratch_bytes each as its last argument.
struct SliceGeometry {
  std::size_t global;
  std::size_t local;
};
SliceGeometry slice_geometry(Device& device, cl_kernel kernel, std::uint64_t slices,
                             std::uint64_t slice_length, std::size_t scratch_bytes);

template <typename... Args>
void launch_slices(Device& device, const char* family, const char* name, std::uint64_t slices,
                   std::uint64_t slice_length, std::size_t scratch_bytes, const Args&... args) {
  cl_kernel kernel = kernel_of(device, family, name);
  SliceGeometry geometry = slice_geometry(device, kernel, slices, slice_length, scratch_bytes);
  set_kernel_args(kernel, args..., LocalBytes{geometry.local * scratch_bytes});
  device.launch(kernel, 1, &geometry.global, &geometry.local);
}

// Bytes of the kernels' acc_t (double on FP64 devices, else float).
inline std::size_t acc_bytes(const Device& device) {
  return device.info().fp64 ? sizeof(double) : sizeof(float);
}

inline cl_ulong ul(std::uint64_t value) { return static_cast<cl_ulong>(value); }

}  // namespace aethercl::ops::train
