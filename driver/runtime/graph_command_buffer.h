// The second replay path of graphs: where the device has cl_khr_command_buffer (version 0.9.0,
// the one this header's signatures describe: PoCL 3.1), a graph of kernel launches, copies and
// fills is recorded once per queue into a command buffer, finalised, and each launch enqueues it
// with one clEnqueueCommandBufferKHR. Graphs with host transfers, devices without the extension
// (or with another version of it) and AETHERCL_GRAPH_COMMAND_BUFFER=0 use the batch path
// (Device::launch_graph).
//
// Contract: used with the device's mutex held. Every recorded launch gets a kernel object of its
// own (created from the launch's program, its arguments bound once), so recording touches no
// kernel the driver's other launches bind. Command buffers are made with simultaneous use (a launch may be
// enqueued while the previous one is pending); each retains its queue, so a queue's address is
// never reused while a command buffer for it lives.
#pragma once

#include "cl/opencl.h"
#include "runtime/device_info.h"

#include <memory>
#include <vector>

namespace aethercl {

class Graph;
struct CommandBufferApi;
struct RecordedCommandBuffer;

class GraphCommandBuffers {
 public:
  // The command buffers of graph on this device, or nullptr when the graph replays in batches.
  static std::unique_ptr<GraphCommandBuffers> for_graph(const DeviceInfo& info, const Graph& graph);
  GraphCommandBuffers(const GraphCommandBuffers&) = delete;
  GraphCommandBuffers& operator=(const GraphCommandBuffers&) = delete;
  ~GraphCommandBuffers();

  // The finalised command buffer for queue, if one was recorded (for Command::command_buffer).
  void* find(cl_command_queue queue) const;
  // Records and finalises the graph's command buffer for queue and returns it as find() does.
  // Throws Error naming the call that failed (the caller then replays in batches).
  void* record(const Graph& graph, cl_command_queue queue);

 private:
  explicit GraphCommandBuffers(const CommandBufferApi& api);

  const CommandBufferApi& api_;
  std::vector<std::unique_ptr<RecordedCommandBuffer>> buffers_;
};

// Enqueues a command buffer of GraphCommandBuffers::find on queue (Command::Kind::kCommandBuffer).
// Throws Error.
void enqueue_command_buffer(void* command_buffer, cl_command_queue queue, cl_event* event);

}  // namespace aethercl
