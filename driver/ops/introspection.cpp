// Device and memory-statistics JSON, buffer labels.
#include "ops/introspection.h"

#include "ops/typed_memory.h"
#include "runtime/device_list.h"
#include "support/error.h"
#include "support/utf8.h"

#include <cstring>
#include <shared_mutex>

namespace aethercl::ops {

std::string device_json(int gpu_index) {
  const auto& devices = enumerated_devices();
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
  auto on_device = [index = device.index()](const auto& object) {
    return object.device_index == index;
  };
  std::size_t user_programs = call.runtime().user_programs().count_if(on_device);
  std::size_t user_kernels = call.runtime().user_kernels().count_if(on_device);
  return fmt::format(
      "{{\"device\": {}, \"limit_bytes\": {}, \"live_buffers\": {}, \"bytes_in_use\": {}, "
      "\"bytes_reserved\": {}, \"bytes_cached\": {}, \"peak_bytes_reserved\": {}, "
      "\"pool_hits\": {}, \"pool_misses\": {}, \"device_allocations\": {}, "
      "\"device_releases\": {}, \"pool_trims\": {}, \"staging_pending_bytes\": {}, "
      "\"staging_cached_bytes\": {}, \"streams\": {}, \"submission_thread\": {}, "
      "\"pinned_host_bytes\": {}, \"programs\": {}, \"kernels\": {}, "
      "\"program_source_builds\": {}, \"program_cache_hits\": {}, \"user_programs\": {}, "
      "\"user_kernels\": {}, \"user_program_builds\": {}, \"user_program_cache_hits\": {}, "
      "\"labelled_buffers\": [{}]}}",
      device.index(), device.pool().limit_bytes(), buffers.live_count(device.index()),
      buffers.live_bytes(device.index()), pool.bytes_reserved, pool.bytes_cached,
      pool.peak_bytes_reserved, pool.hits, pool.misses, pool.device_allocations,
      pool.device_releases, pool.trims, device.staging_used_bytes(),
      device.staging_capacity_bytes(), device.stream_count() - 1,
      device.submission_thread() ? "true" : "false",
      call.runtime().host_memory().bytes(device.index()), programs.programs, programs.kernels,
      programs.source_builds, programs.disk_hits, user_programs, user_kernels,
      device.user_program_builds().load(), device.user_program_cache_hits().load(), labelled);
}

std::string kernel_log_json(DeviceCall& call) { return call.device().kernel_log().json(); }

namespace {

// At most 63 bytes of well-formed UTF-8 (labels end up in JSON and messages): ill-formed
// sequences become U+FFFD and a character is never cut in half.
std::string sanitized_label(const char* label) {
  constexpr std::size_t kMaxBytes = 63;
  if (label == nullptr) return {};
  // Each input byte yields at least one output byte, so 63 bytes of input (+ a cut sequence) do.
  std::string text = to_valid_utf8(std::string_view(label, strnlen(label, kMaxBytes + 4)));
  return std::string(utf8_prefix(text, kMaxBytes));
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
