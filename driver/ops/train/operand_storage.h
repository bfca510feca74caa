// Storage formats of the float operands of the typed training ops (docs/ARCHITECTURE.md,
// decision 17): a buffer's dtype tag (aethercl_buffer_set_dtype) selects float32, IEEE half or
// bfloat16; the kernels read each operand in its format, compute in float32 and round each
// result once.
#pragma once

#include "runtime/device_call.h"

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

namespace aethercl::ops::train {

// Codes as kernels/operand_storage.cl's build options take them (equal to the aethercl_dtype
// codes of the three formats).
enum class Storage : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

inline std::uint64_t storage_bytes(Storage s) { return s == Storage::kF32 ? 4 : 2; }

// A resolved operand: the buffer and the format its tag selects.
struct Operand {
  BufferView view;
  Storage storage = Storage::kF32;
};

// An activation or gradient operand of count elements: untagged or AETHERCL_F32 is float32,
// AETHERCL_F16 and AETHERCL_BF16 their formats; any other tag is refused (kInvalidArgument naming
// the argument). The buffer must hold count elements of its format (call.buffer's refusals).
Operand operand(DeviceCall& call, const void* handle, const char* argument, std::uint64_t count);
// As operand(), NULL giving nullopt.
std::optional<Operand> optional_operand(DeviceCall& call, const void* handle,
                                        const char* argument, std::uint64_t count);
// An operand that stays float32 (weights, their gradients, losses): refuses any tag but
// AETHERCL_F32, saying why (role: "a float32 master weight", ...). NULL is accepted when
// `optional` (nullopt).
std::optional<BufferView> float32_operand(DeviceCall& call, const void* handle,
                                          const char* argument, std::uint64_t count,
                                          const char* role, bool optional);

// Build options naming each role's format ("-DUN_X=1 -DUN_Y=1"), or "" when every role is
// float32: the float32 program is then the one built without options.
struct StorageRole {
  const char* macro;
  Storage storage;
};
std::string storage_options(std::initializer_list<StorageRole> roles);

}  // namespace aethercl::ops::train
