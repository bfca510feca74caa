// JSON descriptions of devices, memory statistics and the kernel log for the aethercl_*
// introspection calls.
#pragma once

#include "runtime/device_call.h"

#include <string>

namespace aethercl::ops {

std::string device_json(int gpu_index);
std::string memory_stats_json(DeviceCall& call);
std::string kernel_log_json(DeviceCall& call);
void set_label(DeviceCall& call, void* handle, const char* label);

// Copies text into buffer (truncated to capacity-1 bytes, NUL-terminated when capacity > 0) and
// returns the full length.
std::size_t copy_out(const std::string& text, char* buffer, std::size_t capacity);

}  // namespace aethercl::ops
