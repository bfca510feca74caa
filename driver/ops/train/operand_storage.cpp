// Operand formats of the typed training ops: tag lookup, size checks, build options.
#include "ops/train/operand_storage.h"

#include "ops/train/common.h"
#include "ops/typed_memory.h"

#include <aethercl/driver.h>

namespace aethercl::ops::train {
namespace {

// The tag of a live buffer, -1 when it has none (or the handle resolves to nothing: call.buffer
// reports that).
int tag_of(DeviceCall& call, const void* handle) {
  auto record = call.runtime().buffers().find(handle);
  return record ? record->dtype : -1;
}

// Resolves the buffer first (NULL, foreign and stale handles are refused as by every call), then
// checks its size for the format.
BufferView sized(DeviceCall& call, const void* handle, const char* argument, std::uint64_t count,
                 std::uint64_t element_bytes) {
  const std::uint64_t bytes = bytes_of(count, element_bytes);
  return call.buffer(handle, argument, bytes);
}

}  // namespace

Operand operand(DeviceCall& call, const void* handle, const char* argument, std::uint64_t count) {
  if (handle == nullptr) fail(Status::kInvalidArgument, "{} is NULL", argument);
  const int tag = tag_of(call, handle);
  Storage storage = Storage::kF32;
  if (tag == AETHERCL_F16) storage = Storage::kF16;
  else if (tag == AETHERCL_BF16) storage = Storage::kBF16;
  else if (tag >= 0 && tag != AETHERCL_F32) {
    call.buffer(handle, argument, 0);  // a foreign device's buffer is reported as such first
    fail(Status::kInvalidArgument, "{} is tagged {} ({}); this op reads and writes it as "
         "AETHERCL_F32, AETHERCL_F16 or AETHERCL_BF16", argument, dtype_constant_name(tag), tag);
  }
  return Operand{sized(call, handle, argument, count, storage_bytes(storage)), storage};
}

std::optional<Operand> optional_operand(DeviceCall& call, const void* handle,
                                        const char* argument, std::uint64_t count) {
  if (handle == nullptr) return std::nullopt;
  return operand(call, handle, argument, count);
}

std::optional<BufferView> float32_operand(DeviceCall& call, const void* handle,
                                          const char* argument, std::uint64_t count,
                                          const char* role, bool optional) {
  if (handle == nullptr) {
    if (optional) return std::nullopt;
    fail(Status::kInvalidArgument, "{} is NULL", argument);
  }
  const int tag = tag_of(call, handle);
  if (tag >= 0 && tag != AETHERCL_F32) {
    call.buffer(handle, argument, 0);
    fail(Status::kInvalidArgument, "{} is tagged {} ({}), but it is {}: only AETHERCL_F32 "
         "(or no tag) is accepted", argument, dtype_constant_name(tag), tag, role);
  }
  return sized(call, handle, argument, count, 4);
}

std::string storage_options(std::initializer_list<StorageRole> roles) {
  bool typed = false;
  for (const StorageRole& role : roles) typed = typed || role.storage != Storage::kF32;
  if (!typed) return {};
  std::string options;
  for (const StorageRole& role : roles) {
    if (!options.empty()) options += ' ';
    options += fmt::format("-D{}={}", role.macro, static_cast<int>(role.storage));
  }
  return options;
}

}  // namespace aethercl::ops::train
