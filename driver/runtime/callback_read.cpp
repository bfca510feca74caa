// Non-blocking read + CL_COMPLETE callback + wait for both (the event's status where an OpenCL
// layer refuses callbacks).
#include "runtime/callback_read.h"

#include "cl/cl_error.h"
#include "cl/handle.h"
#include "support/log.h"

#include <condition_variable>
#include <memory>
#include <mutex>

namespace aethercl {
namespace {

// Shared by the caller and the callback, so whichever finishes last releases it.
struct Completion {
  std::mutex mutex;
  std::condition_variable ran;
  bool done = false;
  cl_int status = CL_COMPLETE;
};

void CL_CALLBACK on_read_complete(cl_event, cl_int status, void* user_data) noexcept {
  auto* holder = static_cast<std::shared_ptr<Completion>*>(user_data);
  std::shared_ptr<Completion> completion = std::move(*holder);
  delete holder;
  try {
    std::lock_guard lock(completion->mutex);
    completion->done = true;
    completion->status = status;
  } catch (...) {
    return;  // a callback must not throw; the caller's wait times out and reports it
  }
  completion->ran.notify_all();
}

}  // namespace

void read_confirmed_by_callback(cl_command_queue queue, cl_mem mem, std::uint64_t size,
                                void* destination, std::chrono::milliseconds callback_timeout) {
  cl_event raw_event = nullptr;
  cl::check(clEnqueueReadBuffer(queue, mem, CL_FALSE, 0, size, destination, 0, nullptr,
                                &raw_event),
            "clEnqueueReadBuffer");
  cl::Event event(raw_event);

  auto completion = std::make_shared<Completion>();
  auto* holder = new std::shared_ptr<Completion>(completion);
  cl_int callback_status = clSetEventCallback(raw_event, CL_COMPLETE, on_read_complete, holder);
  if (callback_status != CL_SUCCESS) delete holder;

  cl_int wait_status = clWaitForEvents(1, &raw_event);
  // A failed wait need not mean the read has stopped; the queue drained means it has.
  if (wait_status != CL_SUCCESS) clFinish(queue);
  if (callback_status == CL_INVALID_OPERATION) {
    // An OpenCL layer that cannot call back into the process (Wine's opencl.dll refuses every
    // clSetEventCallback): the finished event's own execution status says the same.
    static std::once_flag said;
    std::call_once(said, [] {
      log().info("clSetEventCallback is not supported here; read-backs are confirmed by the "
                 "event's execution status instead");
    });
    completion->done = true;
    cl::check(clGetEventInfo(raw_event, CL_EVENT_COMMAND_EXECUTION_STATUS,
                             sizeof(completion->status), &completion->status, nullptr),
              "clGetEventInfo");
  }
  cl::check(completion->done ? CL_SUCCESS : callback_status, "clSetEventCallback");

  {
    std::unique_lock lock(completion->mutex);
    if (!completion->ran.wait_for(lock, callback_timeout, [&] { return completion->done; })) {
      fail(Status::kDeviceError,
           "the read-back event finished, but its CL_COMPLETE callback did not run within {} ms",
           callback_timeout.count());
    }
  }
  if (completion->status != CL_COMPLETE) {
    fail(cl::status_of(completion->status), "the read-back of {} bytes terminated with {} ({})",
         size, cl::error_name(completion->status), completion->status);
  }
  cl::check(wait_status, "clWaitForEvents");
  log().trace("read-back of {} bytes confirmed by its event callback", size);
}

}  // namespace aethercl
