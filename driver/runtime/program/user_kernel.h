// A user kernel: one __kernel function of a user program, with what OpenCL reports about its
// parameters and limits on its device (queried once, at creation).
//
// Contract: immutable once created. Launches of one kernel from many threads are safe because
// every launch binds its arguments in Device::enqueue, which runs under the device's mutex (one
// launch path per device), so argument binding and enqueue never interleave on the cl_kernel.
#pragma once

#include "runtime/kernel.h"
#include "runtime/program/kernel_arg_types.h"
#include "runtime/program/user_program.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace aethercl {

struct KernelParameter {
  ArgKind kind = ArgKind::kUnknown;
  std::string type;                  // OpenCL type name; empty when not reported
  std::string name;                  // parameter name; empty when not reported
  std::optional<std::size_t> size;   // bytes of a value parameter, when known
};

struct UserKernel {
  int device_index = -1;
  std::shared_ptr<const UserProgram> program;
  Kernel kernel;  // handle, function name, CL_KERNEL_WORK_GROUP_SIZE: what launch records need
  std::vector<KernelParameter> parameters;
  bool arg_info = false;  // whether OpenCL reported parameter types
  std::uint64_t local_mem_bytes = 0;    // the kernel's own (static) local memory
  std::uint64_t private_mem_bytes = 0;
  std::size_t preferred_multiple = 1;
};

// Throws kInvalidArgument when name is NULL or not a kernel of the program (listing them).
std::shared_ptr<UserKernel> create_user_kernel(std::shared_ptr<const UserProgram> program,
                                               const DeviceInfo& info, const char* name);

// {"name", "num_args", "args": [...], "max_work_group_size", "local_mem_bytes", ...}
std::string kernel_info_json(const UserKernel& kernel);

}  // namespace aethercl
