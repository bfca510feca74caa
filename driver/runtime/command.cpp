// Command execution: each kind's OpenCL enqueue.
#include "runtime/command.h"

#include "cl/cl_error.h"

namespace aethercl {

const char* Command::what() const noexcept {
  switch (kind) {
    case Kind::kLaunch: return "kernel launch";
    case Kind::kWrite: return "host-to-device copy";
    case Kind::kRead: return "device-to-host copy";
    case Kind::kCopy: return "device-to-device copy";
    case Kind::kFill: return "memset";
    case Kind::kWait: return "event wait";
  }
  return "command";
}

void execute(const Command& c, cl_event* event) {
  switch (c.kind) {
    case Command::Kind::kLaunch:
      submit_launch(c.queue, c.launch, event);
      return;
    case Command::Kind::kWrite:
      cl::check(clEnqueueWriteBuffer(c.queue, c.mem, c.blocking ? CL_TRUE : CL_FALSE, c.offset, c.size, c.source, 0,
                                     nullptr, event),
                "clEnqueueWriteBuffer");
      return;
    case Command::Kind::kRead:
      cl::check(clEnqueueReadBuffer(c.queue, c.mem, c.blocking ? CL_TRUE : CL_FALSE, c.offset, c.size, c.destination, 0,
                                    nullptr, event),
                "clEnqueueReadBuffer");
      return;
    case Command::Kind::kCopy:
      cl::check(clEnqueueCopyBuffer(c.queue, c.source_mem, c.mem, c.source_offset, c.offset,
                                    c.size, 0, nullptr, event),
                "clEnqueueCopyBuffer");
      return;
    case Command::Kind::kFill:
      cl::check(clEnqueueFillBuffer(c.queue, c.mem, &c.pattern, 1, c.offset, c.size, 0, nullptr,
                                    event),
                "clEnqueueFillBuffer");
      return;
    case Command::Kind::kWait: {
      cl_event wait = c.wait_for.get();
      cl::check(clEnqueueBarrierWithWaitList(c.queue, 1, &wait, event),
                "clEnqueueBarrierWithWaitList");
      return;
    }
  }
}

}  // namespace aethercl
