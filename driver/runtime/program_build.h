// Building OpenCL programs: the steps shared by the driver's kernel families and user programs
// (build logs, device binaries, loading a binary, the on-disk cache key).
#pragma once

#include "cl/handle.h"
#include "runtime/device_info.h"

#include <string>
#include <string_view>
#include <vector>

namespace aethercl {

// The device's build log of program, trimmed; "(no build log)" when the runtime has none.
std::string build_log(cl_program program, cl_device_id device);

// The device binary of a built program; empty when the runtime does not provide one.
std::vector<unsigned char> program_binary(cl_program program);

// Creates and builds a program from a device binary. On failure returns an empty Program and sets
// *reason to the runtime's error (and build log when there is one).
cl::Program program_from_binary(cl_context context, const DeviceInfo& info,
                                const unsigned char* binary, std::size_t size,
                                const std::string& options, std::string* reason = nullptr);

// The on-disk cache key of a program: a hash of its kind ("source", "il", ...), bytes, build
// options, the device, driver and platform identity, and the library version.
std::string program_cache_key(const DeviceInfo& info, std::string_view kind,
                              std::string_view bytes, std::string_view options);

}  // namespace aethercl
