// A user program: an OpenCL program built from the caller's source, SPIR-V or device binary for
// one device, with its device binary kept for aethercl_program_binary.
//
// Contract: programs are immutable once built and shared (std::shared_ptr) by their token and
// every kernel created from them; OpenCL calls on a built program are thread-safe.
#pragma once

#include "cl/handle.h"
#include "runtime/binary_cache.h"
#include "runtime/device_info.h"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace aethercl {

enum class ProgramOrigin { kSource, kIl, kBinary };

struct UserProgram {
  int device_index = -1;
  ProgramOrigin origin = ProgramOrigin::kSource;
  cl::Program program;
  std::string options;                 // as built (the caller's options plus the driver's)
  std::vector<unsigned char> binary;   // the device binary; empty if the runtime gives none
  std::vector<std::string> kernel_names;
  bool from_disk_cache = false;
};

// Where a program is built: the device, its context and the on-disk cache.
struct BuildTarget {
  int device_index;
  const DeviceInfo& info;
  cl_context context;
  const BinaryCache& disk;
};

// Each throws Error: kInvalidArgument for bad bytes or options, kBuildFailed with the compiler's
// log, kNotImplemented for SPIR-V on a device without IL support.
std::shared_ptr<UserProgram> build_from_source(const BuildTarget& target, const char* source,
                                               const char* options);
std::shared_ptr<UserProgram> build_from_il(const BuildTarget& target, const void* il,
                                           std::size_t size, const char* options);
std::shared_ptr<UserProgram> build_from_binary(const BuildTarget& target, const void* binary,
                                               std::size_t size, const char* options);

// Whether the device accepts SPIR-V, and if not, what it lacks (for messages and docs).
bool device_takes_spirv(const DeviceInfo& info, std::string* missing = nullptr);

}  // namespace aethercl
