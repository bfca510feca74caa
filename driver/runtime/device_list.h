// The visible device list: all devices of all platforms in a stable order, narrowed by
// AETHERCL_DEVICES. gpu_index is an index into this list.
#pragma once

#include "runtime/device_info.h"

#include <string>
#include <vector>

namespace aethercl {

// Enumerates once per process (thread-safe); an empty list when no platform or device exists.
// An enumeration in which an OpenCL call failed is not kept: the next call enumerates again, and
// until then enumeration_failures() names the failed calls ("" after a complete enumeration).
const std::vector<DeviceInfo>& visible_devices();
std::string enumeration_failures();
// visible_devices(), or an Error (kDeviceError) naming the calls that failed in the enumeration.
const std::vector<DeviceInfo>& enumerated_devices();

// Stable order: GPUs, then accelerators, then CPUs, then others; ties keep platform/device order.
std::vector<DeviceInfo> order_devices(std::vector<DeviceInfo> devices);

// Applies a selector list like CUDA_VISIBLE_DEVICES: comma-separated entries, each an index into
// the ordered list or a case-insensitive substring of "<name> <vendor> <platform>". The result
// keeps the selector order, without duplicates. An empty spec selects everything. Entries that
// select nothing (an index past the end, a name part no device has, an empty entry) are appended
// to *unmatched when it is given.
std::vector<DeviceInfo> select_devices(const std::vector<DeviceInfo>& ordered,
                                       const std::string& spec,
                                       std::vector<std::string>* unmatched = nullptr);

// "0: NVIDIA H100 (NVIDIA CUDA, gpu); 1: pthread-... (Portable Computing Language, cpu)"
std::string describe_devices(const std::vector<DeviceInfo>& devices);

}  // namespace aethercl
