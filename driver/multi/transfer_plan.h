// A transfer plan: the commands of one peer copy or collective (markers, copies, host relays,
// reductions, barriers) with their dependencies, enqueued on the queues of several devices.
// Dependencies inside one OpenCL context become event wait lists; a dependency on a command of
// another context is satisfied by the host, which enqueues the dependent command only once that
// command has completed (flushing every queue before it waits), so a plan never blocks a queue
// on an event the queue cannot see. Transfers from or to host memory are always enqueued only
// after their dependencies have completed (runtimes may read the host bytes at enqueue time).
//
// Contract: the device mutexes of every queue used are held while run() executes.
#pragma once

#include "cl/handle.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace aethercl::multi {

using StepId = std::size_t;

class TransferPlan {
 public:
  // Enqueues a kernel on queue with the given wait list, returning its event in *event.
  using Launch = std::function<void(cl_command_queue queue, cl_uint wait_count,
                                    const cl_event* wait_list, cl_event* event)>;

  // Every command waits for its deps (ids of commands added earlier).
  StepId marker(cl_command_queue queue, cl_context context, std::vector<StepId> deps = {});
  StepId copy(cl_command_queue queue, cl_context context, cl_mem src, std::uint64_t src_offset,
              cl_mem dst, std::uint64_t dst_offset, std::uint64_t bytes, std::vector<StepId> deps);
  // Device to host (into host, which must stay valid until the plan has finished).
  StepId read(cl_command_queue queue, cl_context context, cl_mem src, std::uint64_t src_offset,
              void* host, std::uint64_t bytes, std::vector<StepId> deps);
  StepId write(cl_command_queue queue, cl_context context, const void* host, cl_mem dst,
               std::uint64_t dst_offset, std::uint64_t bytes, std::vector<StepId> deps);
  StepId kernel(cl_command_queue queue, cl_context context, Launch launch,
                std::vector<StepId> deps);

  // Enqueues every command; returns once all are enqueued (not finished) and flushed.
  void run();
  // After run(): waits for every command; throws Error(kDeviceError) for a failed one.
  void finish();
  // After run(): the last command enqueued on every queue that lives in context (their completion
  // implies every command of the plan on those in-order queues has completed).
  std::vector<cl_event> tails(cl_context context) const;
  std::size_t size() const { return steps_.size(); }

 private:
  enum class Kind { kMarker, kCopy, kRead, kWrite, kKernel };
  struct Step {
    Kind kind = Kind::kMarker;
    cl_command_queue queue = nullptr;
    cl_context context = nullptr;
    std::vector<StepId> deps;
    cl_mem src = nullptr;
    cl_mem dst = nullptr;
    std::uint64_t src_offset = 0;
    std::uint64_t dst_offset = 0;
    std::uint64_t bytes = 0;
    void* host = nullptr;
    Launch launch;
    cl::Event done;
  };
  StepId add(Step step);
  void enqueue(Step& step, const std::vector<cl_event>& wait_list);
  void flush_all();

  std::vector<Step> steps_;
  std::vector<StepId> order_;  // in the order the commands were enqueued
};

}  // namespace aethercl::multi
