// Device set-up, command submission and deferred-error detection.
#include "runtime/device.h"

#include "cl/cl_error.h"
#include "runtime/tracer.h"
#include "support/env.h"
#include "support/log.h"

#include <algorithm>

namespace aethercl {

Device::Device(int index, const DeviceInfo& info)
    : index_(index),
      info_(info),
      disk_cache_(BinaryCache::from_environment()),
      kernel_log_(env::flag(env::kKernelLog, true)),
      sync_every_call_(env::flag(env::kSync, false)) {
  cl_int status = CL_SUCCESS;
  cl_context_properties properties[] = {
      CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(info_.platform), 0};
  context_ = cl::Context(clCreateContext(properties, 1, &info_.id, nullptr, nullptr, &status));
  cl::check(status, "clCreateContext");
  queue_ = create_queue(Tracer::instance().active());
  std::uint64_t limit = info_.global_mem_bytes;
  if (auto cap = env::bytes(env::kMemoryLimit)) limit = std::min(limit, *cap);
  pool_ = std::make_unique<MemoryPool>(context_.get(), limit, info_.max_alloc_bytes,
                                       env::flag(env::kPool, true));
  programs_ = std::make_unique<ProgramCache>(info_, context_.get(), disk_cache_);
}

cl::Queue Device::create_queue(bool profiling) {
  cl_int status = CL_SUCCESS;
  cl::Queue queue(clCreateCommandQueue(context_.get(), info_.id,
                                       profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &status));
  cl::check(status, "clCreateCommandQueue");
  profiling_ = profiling;
  return queue;
}

void Device::enable_profiling() {
  if (profiling_) return;
  // Everything enqueued so far finishes on the old queue, so stream order is kept.
  synchronize();
  staging_.reclaim_all();
  retired_queues_.push_back(std::move(queue_));
  queue_ = create_queue(true);
}

Device::~Device() {
  if (queue_) clFinish(queue_.get());
  staging_.reclaim_all();
  last_event_.reset();
  kernel_log_.clear();
  programs_.reset();
  pool_.reset();
  queue_.reset();
  retired_queues_.clear();
  context_.reset();
}

void Device::track(cl_event event, const char* what, const Kernel* kernel, std::uint64_t bytes) {
  Tracer& tracer = Tracer::instance();
  if (tracer.active()) {
    tracer.record(index_, event, kernel != nullptr ? kernel->name : std::string(what),
                  kernel != nullptr ? "kernel" : "transfer", current_entry_point(), bytes);
  }
  last_event_.reset(event);
  last_command_ = what;
  if (sync_every_call_) synchronize();
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

void Device::enqueue(const LaunchRecord& record) {
  // An event per launch costs microseconds on some runtimes; it is only needed to trace, to time
  // the kernel log on a profiling queue or to attribute failures exactly (AETHERCL_SYNC).
  // Otherwise a failed kernel shows at the next sync.
  bool timed_log = profiling_ && kernel_log_.enabled();
  bool want_event = sync_every_call_ || Tracer::instance().active() || timed_log;
  cl_event event = nullptr;
  submit_launch(queue_.get(), record, want_event ? &event : nullptr);
  kernel_log_.record(record, 0, timed_log ? event : nullptr);
  if (want_event) track(event, "kernel launch", record.kernel, 0);
}

void Device::write(cl_mem mem, std::uint64_t offset, std::uint64_t size, const void* source) {
  cl_event event = staging_.write(queue_.get(), mem, offset, size, source);
  track(event, "host-to-device copy", nullptr, size);
}

void Device::read(cl_mem mem, std::uint64_t offset, std::uint64_t size, void* destination) {
  cl_event event = nullptr;
  cl_int status = clEnqueueReadBuffer(queue_.get(), mem, CL_TRUE, offset, size, destination, 0,
                                      nullptr, &event);
  cl::Event read_event(event);
  if (status == CL_SUCCESS && Tracer::instance().active()) {
    Tracer::instance().record(index_, event, "device-to-host copy", "transfer",
                              current_entry_point(), size);
    Tracer::instance().collect();
  }
  if (status != CL_SUCCESS) {
    // A failed earlier command makes the read fail too; name the earlier one if it is the cause.
    check_last_event();
    cl::check(status, "clEnqueueReadBuffer");
  }
  check_last_event();
  last_event_.reset();
  staging_.reclaim_all();  // the blocking read means every earlier copy has finished
}

void Device::copy(cl_mem source, cl_mem destination, std::uint64_t size) {
  cl_event event = nullptr;
  cl::check(clEnqueueCopyBuffer(queue_.get(), source, destination, 0, 0, size, 0, nullptr, &event),
            "clEnqueueCopyBuffer");
  track(event, "device-to-device copy", nullptr, size);
}

void Device::synchronize() {
  cl::check(clFinish(queue_.get()), "clFinish");
  if (Tracer::instance().active()) Tracer::instance().collect();
  check_last_event();
  last_event_.reset();
  staging_.reclaim();
}

}  // namespace aethercl
