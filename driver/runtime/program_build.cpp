// Build logs, binaries and cache keys for every program the driver builds.
#include "runtime/program_build.h"

#include "cl/cl_error.h"
#include "support/hash.h"

#include <aethercl/driver.h>
#include <fmt/format.h>

namespace aethercl {

std::string build_log(cl_program program, cl_device_id device) {
  size_t size = 0;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) !=
          CL_SUCCESS ||
      size == 0) {
    return "(no build log)";
  }
  std::string text(size, '\0');
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, text.data(), nullptr) !=
      CL_SUCCESS) {
    return "(no build log)";
  }
  while (!text.empty() && (text.back() == '\0' || text.back() == '\n')) text.pop_back();
  return text.empty() ? "(empty build log)" : text;
}

std::vector<unsigned char> program_binary(cl_program program) {
  size_t size = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr) !=
          CL_SUCCESS ||
      size == 0) {
    return {};
  }
  std::vector<unsigned char> binary(size);
  unsigned char* target = binary.data();
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof(target), &target, nullptr) !=
      CL_SUCCESS) {
    return {};
  }
  return binary;
}

cl::Program program_from_binary(cl_context context, const DeviceInfo& info,
                                const unsigned char* binary, std::size_t size,
                                const std::string& options, std::string* reason) {
  cl_int binary_status = CL_SUCCESS;
  cl_int status = CL_SUCCESS;
  cl::Program program(
      clCreateProgramWithBinary(context, 1, &info.id, &size, &binary, &binary_status, &status));
  if (status != CL_SUCCESS || binary_status != CL_SUCCESS) {
    cl_int code = status != CL_SUCCESS ? status : binary_status;
    if (reason) *reason = fmt::format("clCreateProgramWithBinary: {} ({})", cl::error_name(code), code);
    return cl::Program();
  }
  status = clBuildProgram(program.get(), 1, &info.id, options.c_str(), nullptr, nullptr);
  if (status != CL_SUCCESS) {
    if (reason) {
      *reason = fmt::format("clBuildProgram: {} ({}):\n{}", cl::error_name(status), status,
                            build_log(program.get(), info.id));
    }
    return cl::Program();
  }
  return program;
}

std::string program_cache_key(const DeviceInfo& info, std::string_view kind,
                              std::string_view bytes, std::string_view options) {
  Hasher hasher;
  // The seed families keep their historic key (no kind), so existing cache entries stay valid.
  if (kind != "family") hasher.add(std::string(kind));
  return hasher.add(std::string(bytes))
      .add(std::string(options))
      .add(info.name)
      .add(info.vendor)
      .add(info.device_version)
      .add(info.driver_version)
      .add(info.platform_name)
      .add(info.platform_version)
      .add(AETHERCL_VERSION_STRING)
      .hex();
}

}  // namespace aethercl
