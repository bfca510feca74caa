// Device commands: recording or running them, transfers through the staging ring, events, and
// the synchronising calls that drain the submission thread and report deferred errors.
#include "runtime/device.h"

#include "cl/cl_error.h"
#include "runtime/bounds_check.h"
#include "runtime/graph.h"
#include "runtime/tracer.h"
#include "support/entry_point.h"
#include "support/log.h"

#include <algorithm>
#include <cstring>

namespace aethercl {
namespace {

// Writes above this go straight from the caller's memory, blocking (the vendor stages them).
constexpr std::uint64_t kMaxStagedWrite = 8ull << 20;
// Reads of this range of sizes go through the pinned ring where the device reads that way
// (AETHERCL_READ_PATH): the range where the ring measured faster (docs/PERFORMANCE.md,
// "Transfers").
constexpr std::uint64_t kMinRingRead = 16ull << 10;
constexpr std::uint64_t kMaxRingRead = 4ull << 20;

}  // namespace

bool Device::tracking() const { return sync_every_call_ || Tracer::instance().active(); }

void Device::drain() {
  if (submitter_) submitter_->drain();
}

void Device::submit(Command&& command, std::uint64_t traced_bytes) {
  // An event per command costs microseconds on some runtimes; it is only needed to trace or to
  // attribute failures exactly (AETHERCL_SYNC), so those run on this thread.
  if (submitter_ && !tracking()) {
    submitter_->push(std::move(command));
    return;
  }
  drain();
  run_now(command, traced_bytes);
}

void Device::run_now(const Command& command, std::uint64_t traced_bytes, cl_event* keep) {
  if (!tracking() && keep == nullptr) {
    execute(command, nullptr);
    return;
  }
  cl_event event = nullptr;
  execute(command, &event);
  if (keep != nullptr) {
    if (cl_int status = clRetainEvent(event); status != CL_SUCCESS) {
      clReleaseEvent(event);
      cl::check(status, "clRetainEvent");
    }
    *keep = event;
  }
  if (!tracking()) {
    clReleaseEvent(event);
    return;
  }
  Tracer& tracer = Tracer::instance();
  if (tracer.active()) {
    bool launch = command.kind == Command::Kind::kLaunch;
    tracer.record(index_, event, launch ? command.launch.kernel->name : command.what(),
                  launch ? "kernel" : "transfer",
                  launch ? command.launch.entry_point : current_entry_point(), traced_bytes);
  }
  last_event_.reset(event);
  last_command_ = command.what();
  if (sync_every_call_) synchronize();
}

void Device::enqueue(Stream& stream, const LaunchRecord& record) {
  Command command;
  command.kind = Command::Kind::kLaunch;
  command.queue = stream.queue();
  command.launch = record;
  if (record_if_capturing(stream, command)) return;
  auto stream_token = reinterpret_cast<std::uintptr_t>(stream.token());
  if (bounds_) bounds_->note(record, stream_token);
  if (!kernel_log_.enabled() || !stream.profiling()) {
    kernel_log_.record(record, stream_token, nullptr);
    submit(std::move(command));
    return;
  }
  // A stream that times: the log keeps the launch's event for its device times, so the launch is
  // enqueued on this thread (after everything the submission thread holds) to get one.
  drain();
  cl_event event = nullptr;
  run_now(command, 0, &event);
  kernel_log_.record(record, stream_token, event);
  clReleaseEvent(event);
}

cl_command_queue Device::queue_for_interop(Stream& stream) {
  if (submitter_) {
    submitter_->drain();
    submitter_.reset();
    log().debug("device {}: submission thread stopped, a queue was handed out for interop",
                index_);
  }
  cl_command_queue queue = stream.queue();
  bool kept = std::any_of(interop_queues_.begin(), interop_queues_.end(),
                          [&](const cl::Queue& held) { return held.get() == queue; });
  if (!kept) {
    cl::check(clRetainCommandQueue(queue), "clRetainCommandQueue");
    interop_queues_.emplace_back(queue);
  }
  return queue;
}

void Device::write(Stream& stream, cl_mem mem, std::uint64_t offset, std::uint64_t size,
                   const void* source, bool source_pinned) {
  Command command;
  command.kind = Command::Kind::kWrite;
  command.queue = stream.queue();
  command.mem = mem;
  command.offset = offset;
  command.size = size;
  if (Graph* graph = stream.capture()) {
    // Pinned memory is read when the replay runs (recorded by address); other host bytes are
    // copied now, as the eager call would have staged them.
    command.source = source_pinned ? source : graph->snapshot(source, size);
    record_if_capturing(stream, command);
    return;
  }
  if (source_pinned) {
    command.source = source;
  } else if (size > kMaxStagedWrite) {
    // Blocking on this thread: the caller's memory is read before this returns.
    command.source = source;
    command.blocking = true;
    drain();
    run_now(command, size);
    return;
  } else {
    void* slot = ring().reserve(size);
    if (slot == nullptr) {
      finish_all_streams();  // every earlier ring transfer is done: the ring is free again
      slot = ring().reserve(size);
    }
    std::memcpy(slot, source, size);
    command.source = slot;
  }
  submit(std::move(command), size);
}

void Device::read(Stream& stream, cl_mem mem, std::uint64_t offset, std::uint64_t size,
                  void* destination) {
  refuse_during_capture(stream, fmt::format("{} waits for the device to read into host memory",
                                            current_entry_point()));
  drain();
  // The seed read waits for every stream of the device, not only its own.
  for (auto& other : streams_) {
    if (other.get() != &stream) cl::check(clFinish(other->queue()), "clFinish");
  }
  wait_for_retired_streams();
  void* slot = nullptr;
  bool through_ring =
      (read_path_ == ReadPath::kRing && size <= kMaxStagedWrite) ||
      (read_path_ == ReadPath::kRingForMidSizes && size >= kMinRingRead && size <= kMaxRingRead);
  if (through_ring) {
    slot = ring().reserve(size);
    if (slot == nullptr) {
      cl::check(clFinish(stream.queue()), "clFinish");
      ring().reset();
      slot = ring().reserve(size);
    }
  }
  Command command;
  command.kind = Command::Kind::kRead;
  command.queue = stream.queue();
  command.mem = mem;
  command.offset = offset;
  command.size = size;
  command.destination = slot != nullptr ? slot : destination;
  command.blocking = true;
  cl_event event = nullptr;
  try {
    execute(command, Tracer::instance().active() ? &event : nullptr);
  } catch (const Error&) {
    // A failed earlier command makes the read fail too; name the earlier one if it is the cause.
    check_last_event();
    throw;
  }
  cl::Event read_event(event);
  if (event != nullptr) {
    Tracer::instance().record(index_, event, "device-to-host copy", "transfer",
                              current_entry_point(), size);
    Tracer::instance().collect();
  }
  if (slot != nullptr) std::memcpy(destination, slot, size);
  // Every stream is idle now.
  if (ring_) ring_->reset();
  if (bounds_) check_guards(nullptr);
  check_last_event();
  last_event_.reset();
  raise_deferred_error();
}

void Device::read_async(Stream& stream, cl_mem mem, std::uint64_t offset, std::uint64_t size,
                        void* destination, bool destination_pinned) {
  Command command;
  command.kind = Command::Kind::kRead;
  command.queue = stream.queue();
  command.mem = mem;
  command.offset = offset;
  command.size = size;
  command.destination = destination;
  if (!destination_pinned) {
    refuse_during_capture(stream, fmt::format("{} into pageable host memory (not from "
                                              "aethercl_host_alloc) waits for the data",
                                              current_entry_point()));
  }
  if (destination_pinned) {
    if (record_if_capturing(stream, command)) return;
    submit(std::move(command), size);
    return;
  }
  // Pageable memory: the data has arrived when this returns (this stream only is waited for).
  command.blocking = true;
  drain();
  run_now(command, size);
  if (bounds_) check_guards(&stream);
  raise_deferred_error();
}

void Device::copy(Stream& stream, cl_mem source, std::uint64_t source_offset, cl_mem destination,
                  std::uint64_t destination_offset, std::uint64_t size) {
  Command command;
  command.kind = Command::Kind::kCopy;
  command.queue = stream.queue();
  command.source_mem = source;
  command.source_offset = source_offset;
  command.mem = destination;
  command.offset = destination_offset;
  command.size = size;
  if (record_if_capturing(stream, command)) return;
  submit(std::move(command), size);
}

void Device::fill(Stream& stream, cl_mem mem, std::uint64_t offset, std::uint64_t size,
                  unsigned char value) {
  Command command;
  command.kind = Command::Kind::kFill;
  command.queue = stream.queue();
  command.mem = mem;
  command.offset = offset;
  command.size = size;
  command.pattern = value;
  if (record_if_capturing(stream, command)) return;
  submit(std::move(command), size);
}

void Device::wait_for_event(Stream& stream, cl_event event) {
  refuse_during_capture(stream, "a wait for an event cannot be recorded");
  Command command;
  command.kind = Command::Kind::kWait;
  command.queue = stream.queue();
  cl::check(clRetainEvent(event), "clRetainEvent");
  command.wait_for.reset(event);
  submit(std::move(command));
}

cl::Event Device::record_event(Stream& stream) {
  drain();
  cl_event event = nullptr;
  if (stream.timing()) {
    if (!timing_scratch_) {
      cl_int status = CL_SUCCESS;
      timing_scratch_.reset(clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, 64, nullptr, &status));
      cl::check(status, "clCreateBuffer");
    }
    // A real command: device timestamps exist for it on every runtime (not so for markers).
    const unsigned char zero = 0;
    cl::check(clEnqueueFillBuffer(stream.queue(), timing_scratch_.get(), &zero, 1, 0, 1, 0,
                                  nullptr, &event),
              "clEnqueueFillBuffer");
  } else {
    cl::check(clEnqueueMarkerWithWaitList(stream.queue(), 0, nullptr, &event),
              "clEnqueueMarkerWithWaitList");
  }
  cl::Event recorded(event);
  // Queries and waits on other threads need the command submitted, not just queued.
  cl::check(clFlush(stream.queue()), "clFlush");
  return recorded;
}

void Device::finish_all_streams() {
  drain();
  for (auto& stream : streams_) cl::check(clFinish(stream->queue()), "clFinish");
  wait_for_retired_streams();
  if (ring_) ring_->reset();
}

void Device::wait_for_retired_streams() {
  // Work issued on a stream before it was destroyed is still the device's work.
  for (auto& [id, event] : retired_) {
    cl_event pending = event.get();
    clWaitForEvents(1, &pending);
  }
  retired_.clear();
}

void Device::check_last_event() {
  if (!last_event_) return;
  cl_int status = CL_COMPLETE;
  cl::check(clGetEventInfo(last_event_.get(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status),
                           &status, nullptr),
            "clGetEventInfo");
  if (status < 0) {
    const char* what = last_command_;
    last_event_.reset();
    fail(cl::status_of(status), "an earlier {} failed on the device: {} ({})", what,
         cl::error_name(status), status);
  }
}

void Device::synchronize() {
  finish_all_streams();
  if (bounds_) check_guards(nullptr);
  if (Tracer::instance().active()) Tracer::instance().collect();
  check_last_event();
  last_event_.reset();
  raise_deferred_error();
}

void Device::synchronize(Stream& stream) {
  drain();
  cl::check(clFinish(stream.queue()), "clFinish");
  if (bounds_) check_guards(&stream);
  raise_deferred_error();
}

}  // namespace aethercl
