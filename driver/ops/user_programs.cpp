// Programs and kernels as tokens: each build runs for the call's device; tokens are registered in
// the runtime and refused by type, age and origin on every use.
#include "ops/user_programs.h"

#include "runtime/program/binary_envelope.h"
#include "support/log.h"

#include <cstring>

namespace aethercl::ops {
namespace {

// The context and the disk cache are fixed for the device's life, so builds need no device mutex.
BuildTarget target_of(DeviceScope& call) {
  Device& device = call.device();
  return BuildTarget{device.index(), device.info(), device.context(), device.disk_cache()};
}

void* register_program(DeviceScope& call, std::shared_ptr<UserProgram> program) {
  Device& device = call.device();
  ++(program->from_disk_cache ? device.user_program_cache_hits() : device.user_program_builds());
  log().debug("user program built for device {} ({} kernels{})", program->device_index,
              program->kernel_names.size(), program->from_disk_cache ? ", from the disk cache" : "");
  return call.runtime().user_programs().insert(std::move(program));
}

}  // namespace

void* create_program(DeviceScope& call, const char* source, const char* options) {
  return register_program(call, build_from_source(target_of(call), source, options));
}

void* create_program_il(DeviceScope& call, const void* il, std::size_t size, const char* options) {
  return register_program(call, build_from_il(target_of(call), il, size, options));
}

void* create_program_binary(DeviceScope& call, const void* binary, std::size_t size,
                            const char* options) {
  return register_program(call, build_from_binary(target_of(call), binary, size, options));
}

std::size_t program_binary(TokenCall& call, void* program, void* out, std::size_t capacity) {
  auto record = call.runtime().user_programs().get(program, "program");
  if (record->binary.empty()) {
    fail(Status::kNotImplemented, "the OpenCL runtime of device {} gives no program binaries",
         record->device_index);
  }
  std::vector<unsigned char> binary =
      wrap_binary(call.runtime().device_of(record->device_index).info(), record->binary);
  if (out != nullptr) {
    if (capacity < binary.size()) {
      fail(Status::kOutOfRange, "capacity {} is smaller than the binary ({} bytes)", capacity,
           binary.size());
    }
    std::memcpy(out, binary.data(), binary.size());
  }
  return binary.size();
}

void destroy_program(TokenCall& call, void* program) {
  call.runtime().user_programs().remove(program, "program");
}

void* create_kernel(TokenCall& call, void* program, const char* name) {
  std::shared_ptr<UserProgram> record = call.runtime().user_programs().get(program, "program");
  const DeviceInfo& info = call.runtime().device_of(record->device_index).info();
  return call.runtime().user_kernels().insert(create_user_kernel(std::move(record), info, name));
}

std::string kernel_info(TokenCall& call, void* kernel) {
  return kernel_info_json(*call.runtime().user_kernels().get(kernel, "kernel"));
}

void destroy_kernel(TokenCall& call, void* kernel) {
  call.runtime().user_kernels().remove(kernel, "kernel");
}

}  // namespace aethercl::ops
