// What a kernel parameter is, from OpenCL's argument info: its kind and, for values, its size.
#pragma once

#include "cl/opencl.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace aethercl {

enum class ArgKind { kBuffer, kScalar, kLocal, kUnknown };

const char* arg_kind_name(ArgKind kind) noexcept;

// The kind of a parameter from its address qualifier and type name: __global/__constant
// pointers are buffers, __local pointers local memory, __private values scalars; images, samplers,
// pipes and queues are kUnknown (not launchable through aethercl_launch).
ArgKind arg_kind_of(cl_kernel_arg_address_qualifier qualifier, const std::string& type_name);

// Bytes of an OpenCL C value type such as "float", "uint4", "size_t", "half8"; nullopt for types
// whose size the driver cannot know (structs, unions, typedefs of them). address_bits sizes
// size_t, ptrdiff_t, intptr_t and uintptr_t.
std::optional<std::size_t> scalar_type_size(std::string type_name, std::uint32_t address_bits);

}  // namespace aethercl
