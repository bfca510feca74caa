// Binds kernel arguments in order: cl_mem, scalars (by exact type) and LocalBytes (local memory).
#pragma once

#include "cl/cl_error.h"

#include <cstddef>
#include <type_traits>

namespace aethercl {

struct LocalBytes {
  std::size_t bytes;
};

namespace detail {

inline void set_arg(cl_kernel kernel, cl_uint index, const LocalBytes& local) {
  cl::check(clSetKernelArg(kernel, index, local.bytes, nullptr), "clSetKernelArg");
}

template <typename T>
void set_arg(cl_kernel kernel, cl_uint index, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>, "kernel arguments are plain values");
  cl::check(clSetKernelArg(kernel, index, sizeof(T), &value), "clSetKernelArg");
}

}  // namespace detail

// Kernel objects are shared per device; call with the device's mutex held.
template <typename... Args>
void set_kernel_args(cl_kernel kernel, const Args&... args) {
  cl_uint index = 0;
  (detail::set_arg(kernel, index++, args), ...);
}

// Rounds a global size up to a multiple of the work-group size.
inline std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace aethercl
