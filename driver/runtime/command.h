// A device command as a value: what the caller's thread records and the submission thread (or the
// caller itself, when there is none) hands to OpenCL. execute() is the one place where commands
// reach a queue.
#pragma once

#include "cl/handle.h"
#include "runtime/launch.h"

#include <cstdint>

namespace aethercl {

struct Command {
  enum class Kind : std::uint8_t {
    kLaunch,  // launch
    kWrite,   // host (source) -> mem at offset, non-blocking: source must stay valid
    kRead,    // mem at offset -> host (destination), non-blocking: destination must stay valid
    kCopy,    // source_mem at source_offset -> mem at offset
    kFill,    // pattern byte over [offset, offset + size) of mem
    kWait,    // the queue waits for wait_for (a barrier)
    kCommandBuffer,  // a graph's finalised cl_command_buffer_khr (runtime/graph_command_buffer.h)
  };

  Kind kind = Kind::kLaunch;
  cl_command_queue queue = nullptr;
  LaunchRecord launch;
  cl_mem mem = nullptr;
  cl_mem source_mem = nullptr;
  std::uint64_t offset = 0;
  std::uint64_t source_offset = 0;
  std::uint64_t size = 0;
  const void* source = nullptr;
  void* destination = nullptr;
  unsigned char pattern = 0;
  bool blocking = false;  // kWrite, kRead: return when the transfer is done
  cl::Event wait_for;  // kWait: a reference the command owns
  void* command_buffer = nullptr;  // kCommandBuffer: owned by the graph, which outlives it

  // Makes target a copy of this command on queue (a graph's recorded command handed to a
  // submission slot); the wait event, if any, is retained for target.
  void copy_into(Command& target, cl_command_queue on_queue) const;

  // What the command is, for messages ("kernel launch", "host-to-device copy", ...).
  const char* what() const noexcept;
};

// Enqueues the command on its queue; event, when not NULL, receives its event. Throws Error
// naming the OpenCL call that failed.
void execute(const Command& command, cl_event* event);
// As execute, on queue instead of the command's own (graph replays: runtime/graph.h).
void execute_on(const Command& command, cl_command_queue queue, cl_event* event);

}  // namespace aethercl
