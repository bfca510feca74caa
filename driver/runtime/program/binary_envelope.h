// The envelope around a program binary handed to callers (aethercl_program_binary): a header that
// names the device it was built for and checksums the payload, so aethercl_program_create_binary
// refuses a damaged, truncated or foreign binary before the OpenCL runtime sees it (PoCL aborts
// the process on a truncated binary of its own).
//
// Layout: "AECLPRG1" | device identity (32 hex chars) | payload size (u64 LE) | payload hash
// (u64 LE) | payload (the runtime's device binary, unchanged).
#pragma once

#include "runtime/device_info.h"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace aethercl {

inline constexpr std::size_t kEnvelopeHeaderBytes = 8 + 32 + 8 + 8;

// The identity of a device and its driver that a device binary depends on.
std::string device_identity(const DeviceInfo& info);

std::vector<unsigned char> wrap_binary(const DeviceInfo& info,
                                       const std::vector<unsigned char>& payload);

// Whether data starts with the envelope's magic.
bool is_enveloped(const void* data, std::size_t size);

// The payload of an enveloped binary; throws Error(kInvalidArgument) naming what is wrong
// (truncated, corrupt, built for another device or driver).
std::vector<unsigned char> unwrap_binary(const DeviceInfo& info, const void* data,
                                         std::size_t size);

}  // namespace aethercl
