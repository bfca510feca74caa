// Device and memory-statistics JSON, buffer labels.
#include "ops/introspection.h"

#include "ops/typed_memory.h"
#include "runtime/device_list.h"
#include "support/error.h"

#include <cstring>
#include <shared_mutex>

namespace aethercl::ops {

std::string device_json(int gpu_index) {
  const auto& devices = visible_devices();
  if (gpu_index < 0 || static_cast<std::size_t>(gpu_index) >= devices.size()) {
    fail(Status::kNoDevice, "gpu_index {} is out of range; the devices are: {}", gpu_index,
         describe_devices(devices));
  }
  Runtime& runtime = Runtime::instance();
  std::shared_lock lock(runtime.lifecycle_mutex());
  return device_info_json(devices[gpu_index], gpu_index, runtime.is_initialized(gpu_index));
}

std::string memory_stats_json(DeviceCall& call) {
  Device& device = call.device();
  const PoolStats& pool = device.pool().stats();
  const ProgramStats& programs = device.programs().stats();
  BufferRegistry& buffers = call.runtime().buffers();
  std::string labelled;
  for (const auto& [token, size, label, dtype] : buffers.labelled(device.index())) {
    const char* type = dtype_name(dtype);
    labelled += fmt::format(
        "{}{{\"handle\": \"0x{:x}\", \"bytes\": {}, \"label\": \"{}\", \"dtype\": {}}}",
        labelled.empty() ? "" : ", ", token, size, json_escape(label),
        type ? fmt::format("\"{}\"", type) : std::string("null"));
  }
  auto on_device = [index = device.index()](const auto& record) {
    return record->device_index == index;
  };
  std::size_t user_programs = call.runtime().user_programs().count_if(on_device);
  std::size_t user_kernels = call.runtime().user_kernels().count_if(on_device);
  return fmt::format(
      "{{\"device\": {}, \"limit_bytes\": {}, \"live_buffers\": {}, \"bytes_in_use\": {}, "
      "\"bytes_reserved\": {}, \"bytes_cached\": {}, \"peak_bytes_reserved\": {}, "
      "\"pool_hits\": {}, \"pool_misses\": {}, \"device_allocations\": {}, "
      "\"device_releases\": {}, \"pool_trims\": {}, \"staging_pending_bytes\": {}, "
      "\"staging_cached_bytes\": {}, \"programs\": {}, \"kernels\": {}, "
      "\"program_source_builds\": {}, \"program_cache_hits\": {}, \"user_programs\": {}, "
      "\"user_kernels\": {}, \"user_program_builds\": {}, \"user_program_cache_hits\": {}, "
      "\"labelled_buffers\": [{}]}}",
      device.index(), device.pool().limit_bytes(), buffers.live_count(device.index()),
      buffers.live_bytes(device.index()), pool.bytes_reserved, pool.bytes_cached,
      pool.peak_bytes_reserved, pool.hits, pool.misses, pool.device_allocations,
      pool.device_releases, pool.trims, device.staging().pending_bytes(),
      device.staging().cached_bytes(), programs.programs, programs.kernels,
      programs.source_builds, programs.disk_hits, user_programs, user_kernels,
      device.user_program_builds().load(), device.user_program_cache_hits().load(), labelled);
}

std::string kernel_log_json(DeviceCall& call) { return call.device().kernel_log().json(); }

namespace {

// Length of the well-formed UTF-8 sequence starting at text[0] (0 if it is not one).
std::size_t utf8_sequence(const unsigned char* text, std::size_t available) {
  unsigned char lead = text[0];
  std::size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3
                     : (lead >> 3) == 0x1E ? 4 : 0;
  if (length == 0 || length > available) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    if ((text[i] & 0xC0) != 0x80) return 0;
  }
  return length;
}

// At most 63 bytes of valid UTF-8 (labels end up in JSON and messages): a byte that starts no
// valid sequence becomes '?', and a character is never cut in half.
std::string sanitized_label(const char* label) {
  constexpr std::size_t kMaxBytes = 63;
  std::string text;
  if (label == nullptr) return text;
  const auto* bytes = reinterpret_cast<const unsigned char*>(label);
  std::size_t size = strnlen(label, 4 * kMaxBytes);
  for (std::size_t i = 0; i < size;) {
    std::size_t length = utf8_sequence(bytes + i, size - i);
    std::size_t kept = length == 0 ? 1 : length;
    if (text.size() + kept > kMaxBytes) break;
    if (length == 0) text.push_back('?');
    else text.append(label + i, length);
    i += kept;
  }
  return text;
}

}  // namespace

void set_label(DeviceCall& call, void* handle, const char* label) {
  call.buffer(handle, "buffer_handle", 0);
  call.runtime().buffers().set_label(handle, sanitized_label(label));
}

std::size_t copy_out(const std::string& text, char* buffer, std::size_t capacity) {
  if (buffer != nullptr && capacity > 0) {
    std::size_t count = std::min(text.size(), capacity - 1);
    std::memcpy(buffer, text.data(), count);
    buffer[count] = '\0';
  }
  return text.size();
}

}  // namespace aethercl::ops
