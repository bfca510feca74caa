// Ring-buffer recording of kernel launches and their JSON form.
#include "runtime/kernel_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <ctime>

namespace aethercl {
namespace {

std::uint64_t monotonic_ns() noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(now.tv_nsec);
}

// Kernel names are C identifiers; anything else is dropped so the JSON needs no escaping.
void copy_name(char* target, std::size_t capacity, const char* name) {
  std::size_t out = 0;
  for (std::size_t i = 0; name[i] != '\0' && out + 1 < capacity; ++i) {
    char c = name[i];
    bool identifier = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '_';
    if (identifier) target[out++] = c;
  }
  target[out] = '\0';
}

}  // namespace

void KernelLog::record(const LaunchRecord& launch, std::uintptr_t stream, cl_event event) {
  if (!enabled_) return;
  if (ring_.empty()) ring_.resize(kCapacity);
  Entry& entry = ring_[recorded_ % kCapacity];
  if (entry.event != nullptr) clReleaseEvent(entry.event);
  copy_name(entry.kernel, sizeof(entry.kernel), launch.kernel->name.c_str());
  entry.entry_point = launch.entry_point != nullptr ? launch.entry_point : "";
  entry.stream = stream;
  const LaunchGeometry& geometry = launch.geometry;
  entry.work_dim = std::min<cl_uint>(geometry.dimensions, 3);
  for (cl_uint d = 0; d < 3; ++d) {
    entry.global[d] = geometry.global[d];
    entry.local[d] = geometry.local[d];
  }
  entry.has_local = !geometry.runtime_picks_local;
  entry.queued_ns = monotonic_ns();
  entry.timed = false;
  // Without a reference of its own (the runtime refused one) the entry has no event to time.
  entry.event = event != nullptr && clRetainEvent(event) == CL_SUCCESS ? event : nullptr;
  ++recorded_;
}

void KernelLog::resolve(Entry& entry) noexcept {
  if (entry.event == nullptr) return;
  cl_int status = CL_QUEUED;
  if (clGetEventInfo(entry.event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status,
                     nullptr) != CL_SUCCESS) {
    status = -1;
  }
  if (status > CL_COMPLETE) return;  // still running: ask again next time
  if (status == CL_COMPLETE) {
    cl_ulong start = 0;
    cl_ulong end = 0;
    entry.timed =
        clGetEventProfilingInfo(entry.event, CL_PROFILING_COMMAND_START, sizeof(start), &start,
                                nullptr) == CL_SUCCESS &&
        clGetEventProfilingInfo(entry.event, CL_PROFILING_COMMAND_END, sizeof(end), &end,
                                nullptr) == CL_SUCCESS;
    entry.start_ns = start;
    entry.end_ns = end;
  }
  clReleaseEvent(entry.event);
  entry.event = nullptr;
}

std::string KernelLog::json() {
  std::uint64_t kept = std::min<std::uint64_t>(recorded_, kCapacity);
  std::string out = "[";
  out.reserve(2 + kept * 200);
  auto dims = [](const std::size_t* values, cl_uint count) {
    std::string text = "[";
    for (cl_uint d = 0; d < count; ++d) text += fmt::format("{}{}", d ? ", " : "", values[d]);
    return text + "]";
  };
  for (std::uint64_t i = recorded_ - kept; i < recorded_; ++i) {
    Entry& entry = ring_[i % kCapacity];
    resolve(entry);
    out += fmt::format(
        "{}{{\"kernel\": \"{}\", \"entry_point\": \"{}\", \"stream\": {}, \"global\": {}, "
        "\"local\": {}, \"queued_ns\": {}, \"start_ns\": {}, \"end_ns\": {}}}",
        i == recorded_ - kept ? "" : ", ", entry.kernel, entry.entry_point,
        entry.stream == 0 ? std::string("null") : fmt::format("\"0x{:x}\"", entry.stream),
        dims(entry.global, entry.work_dim),
        entry.has_local ? dims(entry.local, entry.work_dim) : std::string("null"),
        entry.queued_ns, entry.timed ? std::to_string(entry.start_ns) : std::string("null"),
        entry.timed ? std::to_string(entry.end_ns) : std::string("null"));
  }
  return out + "]";
}

void KernelLog::clear() noexcept {
  for (Entry& entry : ring_) {
    if (entry.event != nullptr) clReleaseEvent(entry.event);
    entry.event = nullptr;
  }
  ring_.clear();
  recorded_ = 0;
}

}  // namespace aethercl
