// Shared plumbing of the training-op family: descriptor reading, checked
// float hyper-parameters, scratch device memory and the 1-D launch.
#pragma once

#include "runtime/device_call.h"
#include "runtime/family_launch.h"
#include "runtime/scratch.h"
#include "support/error.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace aethercl::ops::train {

// Reads a descriptor that grew after version 3: refuses NULL and a struct_size below `minimum`
// (the version-3 prefix); a larger struct (a newer header) is accepted, only the known prefix is
// read, and the fields past the caller's size read as zero.
template <typename Desc>
Desc read_desc_from(const Desc* desc, std::size_t minimum) {
  if (desc == nullptr) fail(Status::kInvalidArgument, "desc is NULL");
  std::size_t size = 0;
  std::memcpy(&size, desc, sizeof size);
  if (size < minimum) {
    fail(Status::kInvalidArgument, "desc.struct_size = {} is smaller than the version-3 size {}",
         size, minimum);
  }
  Desc copy{};
  std::memcpy(&copy, desc, std::min(size, sizeof(Desc)));
  return copy;
}

// read_desc_from for a descriptor that has not grown: the whole struct is the minimum.
template <typename Desc>
Desc read_desc(const Desc* desc) {
  return read_desc_from(desc, sizeof(Desc));
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

// The kernel `name` of `family`, looked up by the strings' contents: names here are often built
// at run time (unary_<op>_backward), which ops::family_kernel's address-keyed cache must not see.
inline Kernel& named_kernel(DeviceCall& call, const char* family, const char* name) {
  return call.device().programs().kernel(family, name);
}

// A kernel family built with extra options (operand formats, ...); "" is the plain build.
struct FamilyVariant {
  const char* family;
  std::string options;
};

inline Kernel& named_kernel(DeviceCall& call, const FamilyVariant& variant, const char* name) {
  return call.device().programs().kernel(variant.family, name, variant.options);
}

// Launches a grid-stride kernel of `family` over n items (runtime/family_launch.h geometry);
// arguments are bound in order.
template <typename... Args>
void launch_linear(DeviceCall& call, const char* family, const char* name, std::uint64_t n,
                   const Args&... args) {
  Kernel& kernel = named_kernel(call, family, name);
  call.launch(kernel, linear_geometry(call.device(), kernel, n), args...);
}

template <typename... Args>
void launch_linear(DeviceCall& call, const FamilyVariant& family, const char* name,
                   std::uint64_t n, const Args&... args) {
  Kernel& kernel = named_kernel(call, family, name);
  call.launch(kernel, linear_geometry(call.device(), kernel, n), args...);
}

// Launches a kernel that reduces slices (a row, a channel, a chunk) with one work-group each:
// the row-kernel geometry of runtime/family_launch.h (a power-of-two local size, 1 on CPU
// devices; at most 64 groups per compute unit, the kernel walks the rest). A local scratch of
// local-size elements of scratch_bytes each is bound after args.
template <typename... Args>
void launch_slices(DeviceCall& call, const char* family, const char* name, std::uint64_t slices,
                   std::uint64_t slice_length, std::size_t scratch_bytes, const Args&... args) {
  Kernel& kernel = named_kernel(call, family, name);
  RowGeometry geometry = row_geometry(call.device(), kernel, slices, slice_length, scratch_bytes);
  call.launch(kernel, LaunchGeometry::linear(geometry.global, geometry.local), args...,
              LocalBytes{geometry.local * scratch_bytes});
}

template <typename... Args>
void launch_slices(DeviceCall& call, const FamilyVariant& family, const char* name,
                   std::uint64_t slices, std::uint64_t slice_length, std::size_t scratch_bytes,
                   const Args&... args) {
  Kernel& kernel = named_kernel(call, family, name);
  RowGeometry geometry = row_geometry(call.device(), kernel, slices, slice_length, scratch_bytes);
  call.launch(kernel, LaunchGeometry::linear(geometry.global, geometry.local), args...,
              LocalBytes{geometry.local * scratch_bytes});
}

// Launches a kernel as one work-item (ordered final sums of a few partial values).
template <typename... Args>
void launch_single(DeviceCall& call, const char* family, const char* name, const Args&... args) {
  call.launch(named_kernel(call, family, name), LaunchGeometry::linear(1, 1), args...);
}

// Bytes of the kernels' acc_t (double on FP64 devices, else float).
inline std::size_t acc_bytes(const Device& device) { return accumulator_bytes(device); }

inline cl_ulong ul(std::uint64_t value) { return static_cast<cl_ulong>(value); }

}  // namespace aethercl::ops::train
