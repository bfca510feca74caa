// The plan executor: a ready list over the commands, host waits only across contexts.
#include "multi/transfer_plan.h"

#include "cl/cl_error.h"
#include "support/error.h"

#include <algorithm>
#include <map>

namespace aethercl::multi {

StepId TransferPlan::add(Step step) {
  for (StepId dep : step.deps) {
    if (dep >= steps_.size()) fail(Status::kInternal, "transfer plan: step depends on a later one");
  }
  steps_.push_back(std::move(step));
  return steps_.size() - 1;
}

StepId TransferPlan::marker(cl_command_queue queue, cl_context context, std::vector<StepId> deps) {
  Step step;
  step.kind = Kind::kMarker;
  step.queue = queue;
  step.context = context;
  step.deps = std::move(deps);
  return add(std::move(step));
}

StepId TransferPlan::copy(cl_command_queue queue, cl_context context, cl_mem src,
                          std::uint64_t src_offset, cl_mem dst, std::uint64_t dst_offset,
                          std::uint64_t bytes, std::vector<StepId> deps) {
  Step step;
  step.kind = Kind::kCopy;
  step.queue = queue;
  step.context = context;
  step.deps = std::move(deps);
  step.src = src;
  step.src_offset = src_offset;
  step.dst = dst;
  step.dst_offset = dst_offset;
  step.bytes = bytes;
  return add(std::move(step));
}

StepId TransferPlan::read(cl_command_queue queue, cl_context context, cl_mem src,
                          std::uint64_t src_offset, void* host, std::uint64_t bytes,
                          std::vector<StepId> deps) {
  Step step;
  step.kind = Kind::kRead;
  step.queue = queue;
  step.context = context;
  step.deps = std::move(deps);
  step.src = src;
  step.src_offset = src_offset;
  step.host = host;
  step.bytes = bytes;
  return add(std::move(step));
}

StepId TransferPlan::write(cl_command_queue queue, cl_context context, const void* host,
                           cl_mem dst, std::uint64_t dst_offset, std::uint64_t bytes,
                           std::vector<StepId> deps) {
  Step step;
  step.kind = Kind::kWrite;
  step.queue = queue;
  step.context = context;
  step.deps = std::move(deps);
  step.dst = dst;
  step.dst_offset = dst_offset;
  step.host = const_cast<void*>(host);
  step.bytes = bytes;
  return add(std::move(step));
}

StepId TransferPlan::kernel(cl_command_queue queue, cl_context context, Launch launch,
                            std::vector<StepId> deps) {
  Step step;
  step.kind = Kind::kKernel;
  step.queue = queue;
  step.context = context;
  step.deps = std::move(deps);
  step.launch = std::move(launch);
  return add(std::move(step));
}

void TransferPlan::enqueue(Step& step, const std::vector<cl_event>& wait_list) {
  cl_uint count = static_cast<cl_uint>(wait_list.size());
  const cl_event* waits = wait_list.empty() ? nullptr : wait_list.data();
  cl_event event = nullptr;
  switch (step.kind) {
    case Kind::kMarker:
      cl::check(clEnqueueMarkerWithWaitList(step.queue, count, waits, &event),
                "clEnqueueMarkerWithWaitList");
      break;
    case Kind::kCopy:
      cl::check(clEnqueueCopyBuffer(step.queue, step.src, step.dst, step.src_offset,
                                    step.dst_offset, step.bytes, count, waits, &event),
                "clEnqueueCopyBuffer (peer)");
      break;
    case Kind::kRead:
      cl::check(clEnqueueReadBuffer(step.queue, step.src, CL_FALSE, step.src_offset, step.bytes,
                                    step.host, count, waits, &event),
                "clEnqueueReadBuffer (relay)");
      break;
    case Kind::kWrite:
      cl::check(clEnqueueWriteBuffer(step.queue, step.dst, CL_FALSE, step.dst_offset, step.bytes,
                                     step.host, count, waits, &event),
                "clEnqueueWriteBuffer (relay)");
      break;
    case Kind::kKernel:
      step.launch(step.queue, count, waits, &event);
      break;
  }
  step.done.reset(event);
}

void TransferPlan::flush_all() {
  std::vector<cl_command_queue> flushed;
  for (const Step& step : steps_) {
    if (std::find(flushed.begin(), flushed.end(), step.queue) != flushed.end()) continue;
    clFlush(step.queue);
    flushed.push_back(step.queue);
  }
}

namespace {

// -1: failed, 0: pending, 1: complete.
int completion(cl_event event) {
  cl_int status = CL_COMPLETE;
  cl::check(clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status,
                           nullptr),
            "clGetEventInfo");
  if (status < 0) return -1;
  return status == CL_COMPLETE ? 1 : 0;
}

constexpr std::size_t kLookahead = 64;

[[noreturn]] void failed_command() {
  fail(Status::kDeviceError, "a peer transfer or reduction failed on the device");
}

}  // namespace

void TransferPlan::run() {
  std::vector<bool> enqueued(steps_.size(), false);
  std::size_t remaining = steps_.size();
  std::size_t first_pending = 0;
  while (remaining > 0) {
    bool progressed = false;
    cl_event blocker = nullptr;
    // Events found still running in this pass (asked once each), and a bound on how far a pass
    // looks ahead: large host-path plans have thousands of steps, mostly waiting on earlier ones.
    std::vector<cl_event> running;
    std::size_t blocked = 0;
    for (std::size_t i = first_pending; i < steps_.size() && blocked < kLookahead; ++i) {
      if (enqueued[i]) continue;
      Step& step = steps_[i];
      std::vector<cl_event> wait_list;
      bool ready = true;
      for (StepId dep : step.deps) {
        const Step& before = steps_[dep];
        if (!enqueued[dep]) {
          ready = false;
          break;
        }
        // Host memory: some runtimes (NVIDIA's) take the host bytes of a transfer when it is
        // enqueued, whatever its wait list says, so a transfer from or to host memory is enqueued
        // only once everything it depends on has completed.
        bool host_memory = step.kind == Kind::kRead || step.kind == Kind::kWrite;
        if (before.context == step.context && !host_memory) {
          wait_list.push_back(before.done.get());
          continue;
        }
        cl_event event = before.done.get();
        bool known_running = std::find(running.begin(), running.end(), event) != running.end();
        int state = known_running ? 0 : completion(event);
        if (state < 0) failed_command();
        if (state == 0) {
          if (!known_running) running.push_back(event);
          ready = false;
          if (blocker == nullptr) blocker = event;
          break;
        }
      }
      if (!ready) {
        ++blocked;
        continue;
      }
      enqueue(step, wait_list);
      order_.push_back(i);
      enqueued[i] = true;
      --remaining;
      progressed = true;
    }
    while (first_pending < steps_.size() && enqueued[first_pending]) ++first_pending;
    if (!progressed && remaining > 0) {
      if (blocker == nullptr) fail(Status::kInternal, "transfer plan cannot make progress");
      flush_all();
      cl_int status = clWaitForEvents(1, &blocker);
      if (status != CL_SUCCESS || completion(blocker) < 0) failed_command();
    }
  }
  flush_all();
}

void TransferPlan::finish() {
  for (const Step& step : steps_) {
    cl_event event = step.done.get();
    if (event == nullptr) continue;
    if (clWaitForEvents(1, &event) != CL_SUCCESS || completion(event) < 0) failed_command();
  }
}

std::vector<cl_event> TransferPlan::tails(cl_context context) const {
  std::map<cl_command_queue, cl_event> newest;
  for (StepId id : order_) {
    const Step& step = steps_[id];
    if (step.context == context) newest[step.queue] = step.done.get();
  }
  std::vector<cl_event> events;
  for (const auto& [queue, event] : newest) events.push_back(event);
  return events;
}

}  // namespace aethercl::multi
