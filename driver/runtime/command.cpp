// Command execution: each kind's OpenCL enqueue.
#include "runtime/command.h"

#include "cl/cl_error.h"
#include "runtime/graph_command_buffer.h"

namespace aethercl {

const char* Command::what() const noexcept {
  switch (kind) {
    case Kind::kLaunch: return "kernel launch";
    case Kind::kWrite: return "host-to-device copy";
    case Kind::kRead: return "device-to-host copy";
    case Kind::kCopy: return "device-to-device copy";
    case Kind::kFill: return "memset";
    case Kind::kWait: return "event wait";
    case Kind::kCommandBuffer: return "graph replay (command buffer)";
  }
  return "command";
}

void Command::copy_into(Command& target, cl_command_queue on_queue) const {
  target.kind = kind;
  target.queue = on_queue;
  target.launch = launch;
  target.mem = mem;
  target.source_mem = source_mem;
  target.offset = offset;
  target.source_offset = source_offset;
  target.size = size;
  target.source = source;
  target.destination = destination;
  target.pattern = pattern;
  target.blocking = blocking;
  target.command_buffer = command_buffer;
  if (wait_for) cl::check(clRetainEvent(wait_for.get()), "clRetainEvent");
  target.wait_for.reset(wait_for.get());
}

void execute(const Command& c, cl_event* event) { execute_on(c, c.queue, event); }

void execute_on(const Command& c, cl_command_queue queue, cl_event* event) {
  switch (c.kind) {
    case Command::Kind::kLaunch:
      submit_launch(queue, c.launch, event);
      return;
    case Command::Kind::kWrite:
      cl::check(clEnqueueWriteBuffer(queue, c.mem, c.blocking ? CL_TRUE : CL_FALSE, c.offset, c.size, c.source, 0,
                                     nullptr, event),
                "clEnqueueWriteBuffer");
      return;
    case Command::Kind::kRead:
      cl::check(clEnqueueReadBuffer(queue, c.mem, c.blocking ? CL_TRUE : CL_FALSE, c.offset, c.size, c.destination, 0,
                                    nullptr, event),
                "clEnqueueReadBuffer");
      return;
    case Command::Kind::kCopy:
      cl::check(clEnqueueCopyBuffer(queue, c.source_mem, c.mem, c.source_offset, c.offset,
                                    c.size, 0, nullptr, event),
                "clEnqueueCopyBuffer");
      return;
    case Command::Kind::kFill:
      cl::check(clEnqueueFillBuffer(queue, c.mem, &c.pattern, 1, c.offset, c.size, 0, nullptr,
                                    event),
                "clEnqueueFillBuffer");
      return;
    case Command::Kind::kWait: {
      cl_event wait = c.wait_for.get();
      cl::check(clEnqueueBarrierWithWaitList(queue, 1, &wait, event),
                "clEnqueueBarrierWithWaitList");
      return;
    }
    case Command::Kind::kCommandBuffer:
      enqueue_command_buffer(c.command_buffer, queue, event);
      return;
  }
}

}  // namespace aethercl
