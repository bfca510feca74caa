// Owning RAII wrappers for OpenCL objects: move-only, release in the destructor, never throw.
#pragma once

#include "cl/opencl.h"

#include <utility>

namespace aethercl::cl {

template <typename T, cl_int (*Release)(T)>
class Handle {
 public:
  Handle() = default;
  // Adopts an object the caller already holds a reference to.
  explicit Handle(T object) noexcept : object_(object) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) reset(std::exchange(other.object_, nullptr));
    return *this;
  }
  ~Handle() { reset(); }

  T get() const noexcept { return object_; }
  explicit operator bool() const noexcept { return object_ != nullptr; }
  void reset(T object = nullptr) noexcept {
    if (object_ != nullptr) Release(object_);  // a failing release has nothing left to do
    object_ = object;
  }
  T release() noexcept { return std::exchange(object_, nullptr); }

 private:
  T object_ = nullptr;
};

using Context = Handle<cl_context, clReleaseContext>;
using Queue = Handle<cl_command_queue, clReleaseCommandQueue>;
using Program = Handle<cl_program, clReleaseProgram>;
using Kernel = Handle<cl_kernel, clReleaseKernel>;
using Mem = Handle<cl_mem, clReleaseMemObject>;
using Event = Handle<cl_event, clReleaseEvent>;

}  // namespace aethercl::cl
