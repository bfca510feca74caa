// User programs and kernels: build, binary, kernel creation and description, release.
#pragma once

#include "runtime/device_call.h"

#include <cstddef>
#include <string>

namespace aethercl::ops {

void* create_program(DeviceScope& call, const char* source, const char* options);
void* create_program_il(DeviceScope& call, const void* il, std::size_t size, const char* options);
void* create_program_binary(DeviceScope& call, const void* binary, std::size_t size,
                            const char* options);
std::size_t program_binary(TokenCall& call, void* program, void* out, std::size_t capacity);
void destroy_program(TokenCall& call, void* program);

void* create_kernel(TokenCall& call, void* program, const char* name);
std::string kernel_info(TokenCall& call, void* kernel);
void destroy_kernel(TokenCall& call, void* kernel);

}  // namespace aethercl::ops
