// Token resolution and argument-size validation shared by every entry point.
#include "runtime/device_call.h"

#include "runtime/graph.h"
#include "runtime/stream.h"
#include "runtime/token_table.h"
#include "support/checked.h"
#include "support/env.h"
#include "support/log.h"

namespace aethercl {

DeviceCall::DeviceCall(int gpu_index, Runtime& runtime)
    : runtime_(runtime),
      lifecycle_lock_(runtime.lifecycle_mutex()),
      device_(&runtime.resolve(gpu_index)),
      device_lock_(device_->mutex()),
      stream_(&device_->current_stream()),
      uncaught_(std::uncaught_exceptions()) {
  device_->set_call_stream(stream_);
  mark_capture();
}

DeviceCall::~DeviceCall() {
  if (!device_lock_.owns_lock()) return;
  device_->set_call_stream(nullptr);
  if (capture_ == nullptr || std::uncaught_exceptions() <= uncaught_) return;
  Stream* stream = device_->find_stream(capture_stream_);  // the call may have destroyed it
  if (stream != nullptr && stream->capture() == capture_) capture_->truncate(capture_mark_);
}

void DeviceCall::mark_capture() {
  capture_ = stream_->capture();
  capture_stream_ = stream_->id();
  capture_mark_ = capture_ != nullptr ? capture_->nodes() : 0;
}

Stream& DeviceCall::resolve_stream(const void* token, const char* argument) {
  if (token == nullptr) return device_->default_stream();
  auto entry = runtime_.streams().get(token, argument);
  Stream* stream = entry->device_index == device_->index() ? device_->find_stream(entry->id)
                                                           : nullptr;
  if (stream == nullptr) {
    fail(Status::kInvalidHandle, "{} ({}) belongs to device {}, but this call runs on device {}",
         argument, token, entry->device_index, device_->index());
  }
  return *stream;
}

Stream& DeviceCall::use_stream(const void* token, const char* argument) {
  stream_ = &resolve_stream(token, argument);
  device_->set_call_stream(stream_);
  mark_capture();
  return *stream_;
}

DeviceScope::DeviceScope(int gpu_index, Runtime& runtime)
    : runtime_(runtime),
      lifecycle_lock_(runtime.lifecycle_mutex()),
      device_(&runtime.resolve(gpu_index)) {}

TokenCall::TokenCall(Runtime& runtime)
    : runtime_(runtime), lifecycle_lock_(runtime.lifecycle_mutex()) {
  runtime_.require_any_device();
}

std::optional<BufferView> DeviceCall::optional_buffer(const void* handle, const char* argument,
                                                      std::uint64_t min_bytes) {
  if (handle == nullptr) return std::nullopt;
  return buffer(handle, argument, min_bytes);
}

BufferView DeviceCall::buffer(const void* handle, const char* argument, std::uint64_t min_bytes) {
  if (handle == nullptr) fail(Status::kInvalidArgument, "{} is NULL", argument);
  TokenProblem problem = TokenProblem::kNone;
  auto use = runtime_.buffers().use(handle, device_->index(), stream_->id(), &problem);
  if (!use) {
    const char* other = describe_token_tag(reinterpret_cast<std::uintptr_t>(handle) & 0xFF);
    if (problem == TokenProblem::kMalformed && other != nullptr) {
      fail(Status::kInvalidHandle, "{} ({}) is {}, not a buffer handle", argument, handle, other);
    }
    fail(Status::kInvalidHandle, "{} ({}) {}", argument, handle, BufferRegistry::describe(problem));
  }
  if (use->device_index != device_->index()) {
    fail(Status::kInvalidHandle, "{} ({}) belongs to device {}, but this call runs on device {}",
         argument, handle, use->device_index, device_->index());
  }
  if (use->size < min_bytes) {
    auto record = runtime_.buffers().find(handle);
    std::string label =
        !record || record->label.empty() ? "" : fmt::format(" '{}'", record->label);
    fail(Status::kOutOfRange, "{}{} ({}) holds {} bytes, but the call needs {} bytes", argument,
         label, handle, use->size, min_bytes);
  }
  return BufferView{use->mem, use->size};
}

std::uint64_t element_count(std::initializer_list<Dim> dims) {
  std::uint64_t count = 1;
  bool overflow = false;
  for (const Dim& dim : dims) {
    if (dim.value < 0) fail(Status::kInvalidArgument, "{} = {} is negative", dim.name, dim.value);
  }
  for (const Dim& dim : dims) {
    auto product = checked_mul(count, static_cast<std::uint64_t>(dim.value));
    if (!product) overflow = true;
    else count = *product;
  }
  for (const Dim& dim : dims) {
    if (dim.value == 0) return 0;
  }
  if (overflow) {
    std::string text;
    for (const Dim& dim : dims) text += fmt::format("{}{}={}", text.empty() ? "" : " x ", dim.name, dim.value);
    fail(Status::kInvalidArgument, "the element count {} overflows 64 bits", text);
  }
  return count;
}

std::uint64_t byte_count(std::uint64_t elements, std::uint64_t element_size) {
  auto bytes = checked_mul(elements, element_size);
  if (!bytes) fail(Status::kInvalidArgument, "{} elements of {} bytes overflow 64 bits", elements, element_size);
  return *bytes;
}

cl_mem DeviceCall::counters(std::size_t count) {
  if (count > kMaxLaunchCounters || !env::flag(env::kLaunchCounters, true)) return nullptr;
  try {
    if (Graph* graph = stream_->capture()) return graph->counters(device_->context(), count);
    return stream_->counters(device_->context());
  } catch (const Error& error) {
    if (error.status() != Status::kOutOfMemory) throw;
    log().debug("device {}: no room for {} launch counters; the two-launch form takes over: {}",
                device_->index(), count, error.what());
    return nullptr;
  }
}

}  // namespace aethercl
