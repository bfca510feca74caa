// Streams and events over the runtime's token tables and the devices' streams.
#include "ops/stream_ops.h"

#include "cl/cl_error.h"

#include <aethercl/driver.h>

#include <shared_mutex>

namespace aethercl::ops {
namespace {

cl_int execution_status(cl_event event) {
  cl_int status = CL_COMPLETE;
  cl::check(clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status,
                           nullptr),
            "clGetEventInfo");
  return status;
}

void fail_if_failed(cl_int status, const char* argument) {
  if (status < 0) {
    fail(Status::kDeviceError, "the work before {} failed on the device: {} ({})", argument,
         cl::error_name(status), status);
  }
}

// Waits for an event on the host and reports its failure and its device's deferred errors.
void wait_for(Runtime& runtime, const EventRecord& record, const char* argument) {
  cl_event event = record.event.get();
  cl_int waited = clWaitForEvents(1, &event);
  fail_if_failed(execution_status(event), argument);
  cl::check(waited, "clWaitForEvents");
  if (Device* device = runtime.try_resolve(record.device_index)) device->raise_deferred_error();
}

std::uint64_t end_ns(const EventRecord& record, const char* argument) {
  cl_ulong ns = 0;
  cl_int status = clGetEventProfilingInfo(record.event.get(), CL_PROFILING_COMMAND_END,
                                          sizeof(ns), &ns, nullptr);
  if (status != CL_SUCCESS) {
    fail(Status::kDeviceError, "{} has no device timestamp: {} ({})", argument,
         cl::error_name(status), status);
  }
  return ns;
}

// Completes user_event when the other device's event completes (or fails), from OpenCL's
// callback thread: the cross-device wait goes through the host without blocking anyone.
struct Relay {
  cl_event user_event;
  cl_event foreign_event;
};

void CL_CALLBACK relay_completion(cl_event, cl_int status, void* data) {
  auto* relay = static_cast<Relay*>(data);
  clSetUserEventStatus(relay->user_event, status < 0 ? status : CL_COMPLETE);
  clReleaseEvent(relay->user_event);
  clReleaseEvent(relay->foreign_event);
  delete relay;
}

}  // namespace

void* stream_create(DeviceCall& call, unsigned int flags) {
  if ((flags & ~static_cast<unsigned int>(AETHERCL_STREAM_TIMING)) != 0) {
    fail(Status::kInvalidArgument, "flags = 0x{:x} has bits no flag uses (AETHERCL_STREAM_TIMING "
         "= 1 is the only flag)", flags);
  }
  Device& device = call.device();
  auto entry = std::make_shared<StreamEntry>();
  entry->device_index = device.index();
  TokenTable<StreamEntry>& table = call.runtime().streams();
  void* token = table.insert(entry);
  entry->id = reinterpret_cast<std::uintptr_t>(token) >> 8;
  try {
    device.create_stream(entry->id, token, (flags & AETHERCL_STREAM_TIMING) != 0);
  } catch (...) {
    table.remove(token, "stream");
    throw;
  }
  return token;
}

void stream_destroy(DeviceCall& call, void* stream) {
  if (stream == nullptr) {
    fail(Status::kInvalidArgument, "stream is NULL (the default stream cannot be destroyed)");
  }
  Stream& target = call.resolve_stream(stream, "stream");
  call.device().refuse_during_capture(target, "a capturing stream cannot be destroyed (end its "
                                              "capture with aethercl_graph_capture_end first)");
  std::uint64_t id = target.id();
  call.device().destroy_stream(target);
  call.runtime().streams().remove(stream, "stream");
  if (current_stream_id(call.device().index()) == id) {
    set_current_stream_id(call.device().index(), 0);
  }
}

void stream_set_current(DeviceCall& call, void* stream) {
  Stream& target = call.resolve_stream(stream, "stream");
  set_current_stream_id(call.device().index(), target.id());
}

void* stream_current(DeviceCall& call) { return call.device().current_stream().token(); }

void stream_synchronize(DeviceCall& call, void* stream) {
  Stream& target = call.resolve_stream(stream, "stream");
  Device& device = call.device();
  device.refuse_during_capture(target, "aethercl_stream_synchronize waits for the stream");
  device.drain();
  std::uint64_t id = target.id();
  cl_command_queue queue = target.queue();
  cl::check(clRetainCommandQueue(queue), "clRetainCommandQueue");
  cl::Queue held(queue);  // the stream may be destroyed by another thread while we wait
  call.release_device();
  cl::check(clFinish(held.get()), "clFinish");
  if (device.checks_bounds()) {
    // Guards are compared under the device's lock, once what other threads issued on the stream
    // meanwhile (a guard's fill among it) has run as well.
    std::lock_guard lock(device.mutex());
    if (Stream* again = device.find_stream(id)) device.synchronize(*again);
  }
  device.raise_deferred_error();
}

void* event_record(DeviceCall& call, void* stream) {
  Stream& target = call.use_stream(stream, "stream");
  call.device().refuse_during_capture(target, "aethercl_event_record cannot be recorded (version "
                                              "4 captures one stream)");
  auto record = std::make_shared<EventRecord>();
  record->device_index = call.device().index();
  record->timing = target.timing();
  record->event = call.device().record_event(target);
  return call.runtime().events().insert(std::move(record));
}

void stream_wait_event(DeviceCall& call, void* stream, void* event) {
  Stream& target = call.use_stream(stream, "stream");
  auto record = call.runtime().events().get(event, "event");
  Device& device = call.device();
  device.refuse_during_capture(target, "aethercl_stream_wait_event cannot be recorded (version 4 "
                                       "captures one stream)");
  if (record->device_index == device.index()) {
    device.wait_for_event(target, record->event.get());
    return;
  }
  // Another device's event (another context): a user event of this context stands in for it.
  cl_int status = CL_SUCCESS;
  cl::Event user(clCreateUserEvent(device.context(), &status));
  cl::check(status, "clCreateUserEvent");
  auto* relay = new Relay{user.get(), record->event.get()};
  const bool user_held = clRetainEvent(relay->user_event) == CL_SUCCESS;
  const bool foreign_held = clRetainEvent(relay->foreign_event) == CL_SUCCESS;
  status = user_held && foreign_held
               ? clSetEventCallback(relay->foreign_event, CL_COMPLETE, relay_completion, relay)
               : CL_OUT_OF_RESOURCES;
  if (status != CL_SUCCESS) {
    if (user_held) clReleaseEvent(relay->user_event);
    if (foreign_held) clReleaseEvent(relay->foreign_event);
    delete relay;
    // No callback: wait on the host now, then there is nothing left to wait for.
    cl_event foreign = record->event.get();
    clWaitForEvents(1, &foreign);
    fail_if_failed(execution_status(foreign), "event");
    return;
  }
  device.wait_for_event(target, user.get());
}

bool event_query(void* event) {
  Runtime& runtime = Runtime::instance();
  std::shared_lock lock(runtime.lifecycle_mutex());
  runtime.require_any_device();
  auto record = runtime.events().get(event, "event");
  cl_int status = execution_status(record->event.get());
  fail_if_failed(status, "event");
  return status == CL_COMPLETE;
}

void event_synchronize(void* event) {
  Runtime& runtime = Runtime::instance();
  std::shared_lock lock(runtime.lifecycle_mutex());
  runtime.require_any_device();
  auto record = runtime.events().get(event, "event");
  wait_for(runtime, *record, "event");
}

float event_elapsed_ms(void* start, void* end) {
  Runtime& runtime = Runtime::instance();
  std::shared_lock lock(runtime.lifecycle_mutex());
  runtime.require_any_device();
  auto first = runtime.events().get(start, "start");
  auto second = runtime.events().get(end, "end");
  if (!first->timing) {
    fail(Status::kInvalidArgument, "start ({}) was not recorded on a timing stream "
         "(AETHERCL_STREAM_TIMING)", start);
  }
  if (!second->timing) {
    fail(Status::kInvalidArgument, "end ({}) was not recorded on a timing stream "
         "(AETHERCL_STREAM_TIMING)", end);
  }
  if (first->device_index != second->device_index) {
    fail(Status::kInvalidArgument, "start is an event of device {} and end of device {}; "
         "elapsed time needs both on one device", first->device_index, second->device_index);
  }
  wait_for(runtime, *first, "start");
  wait_for(runtime, *second, "end");
  auto from = static_cast<double>(end_ns(*first, "start"));
  auto to = static_cast<double>(end_ns(*second, "end"));
  return static_cast<float>((to - from) * 1e-6);
}

void event_destroy(void* event) {
  Runtime& runtime = Runtime::instance();
  std::shared_lock lock(runtime.lifecycle_mutex());
  runtime.require_any_device();
  runtime.events().remove(event, "event");
}

}  // namespace aethercl::ops
