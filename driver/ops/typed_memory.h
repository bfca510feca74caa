// Typed memory: dtype tags on buffers and conversions between element types.
#pragma once

#include "runtime/device_call.h"

#include <cstddef>
#include <cstdint>

namespace aethercl::ops {

// "f32", "f16", ... for an aethercl_dtype code; nullptr for an unknown code.
const char* dtype_name(int dtype) noexcept;
// "AETHERCL_F32", "AETHERCL_F16", ... (the header's constant) for messages; "an unknown dtype".
const char* dtype_constant_name(int dtype) noexcept;
// Bytes per element of a known code.
std::size_t dtype_size(int dtype) noexcept;

void set_dtype(DeviceCall& call, void* buffer, int dtype);
void convert(DeviceCall& call, void* src, int src_dtype, void* dst, int dst_dtype,
             std::size_t count, void* stream);

}  // namespace aethercl::ops
