// Device side of graphs: recording a capturing stream's commands, refusing what cannot be
// recorded, replaying a graph as one batch, and the memory graphs keep.
#include "runtime/device.h"

#include "runtime/bounds_check.h"
#include "cl/cl_error.h"
#include "runtime/graph.h"
#include "runtime/graph_command_buffer.h"
#include "support/log.h"

#include <algorithm>

namespace aethercl {
namespace {

std::string stream_name(const Stream& stream) {
  return stream.is_default() ? std::string("the default stream")
                             : fmt::format("stream {}", stream.token());
}

}  // namespace

bool Device::record_if_capturing(Stream& stream, Command& command) {
  Graph* graph = stream.capture();
  if (graph == nullptr) return false;
  graph->record(std::move(command), holds_);
  return true;
}

void Device::begin_capture(Stream& stream, std::shared_ptr<Graph> graph) {
  if (stream.capture() != nullptr) {
    fail(Status::kInvalidArgument,
         "{} of device {} is already capturing a graph (captures do not nest: end it with "
         "aethercl_graph_capture_end first)",
         stream_name(stream), index_);
  }
  stream.set_capture(std::move(graph));
}

std::shared_ptr<Graph> Device::end_capture(Stream& stream) {
  if (stream.capture() == nullptr) {
    fail(Status::kInvalidArgument,
         "{} of device {} is not capturing a graph (no aethercl_graph_capture_begin for it, or "
         "its capture has ended)",
         stream_name(stream), index_);
  }
  std::shared_ptr<Graph> graph = stream.capture_graph();
  stream.set_capture(nullptr);
  graph->end_recording();
  return graph;
}

void Device::refuse_during_capture(const Stream& stream, const std::string& what) const {
  if (stream.capture() == nullptr) return;
  fail(Status::kInvalidArgument,
       "{}, but {} of device {} is capturing a graph (aethercl_graph_capture_begin); the call "
       "was not recorded and the capture continues",
       what, stream_name(stream), index_);
}

void Device::refuse_during_any_capture(const std::string& what) const {
  for (const auto& stream : streams_) refuse_during_capture(*stream, what);
}

cl::Event Device::stream_tail(std::uint64_t id) {
  if (Stream* stream = find_stream(id)) return record_event(*stream);
  for (auto& [retired_id, event] : retired_) {
    if (retired_id == id) {
      cl::check(clRetainEvent(event.get()), "clRetainEvent");
      return cl::Event(event.get());
    }
  }
  return cl::Event();  // a destroyed stream whose work has completed
}

void Device::launch_graph(Graph& graph, Stream& stream) {
  if (graph.destroyed()) fail(Status::kInvalidHandle, "the graph was destroyed");
  if (stream.capture() != nullptr) {
    fail(Status::kInvalidArgument,
         "{} of device {} is capturing a graph; a graph cannot be launched into a capture (end "
         "the capture first)",
         stream_name(stream), index_);
  }
  if (graph.last_stream() != stream.id()) {
    // Launches of one graph run one after another (they share its scratch memory).
    if (cl::Event tail = stream_tail(graph.last_stream())) {
      Command wait;
      wait.kind = Command::Kind::kWait;
      wait.queue = stream.queue();
      wait.wait_for = std::move(tail);
      submit(std::move(wait));
    }
    graph.set_last_stream(stream.id());
  }
  if (bounds_) {
    auto token = reinterpret_cast<std::uintptr_t>(stream.token());
    for (const Command& command : graph.commands()) {
      if (command.kind == Command::Kind::kLaunch) bounds_->note(command.launch, token);
    }
  }
  if (!tracking() && launch_command_buffer(graph, stream)) return;
  if (submitter_ && !tracking()) {
    submitter_->push_batch(graph.commands(), stream.queue());
    return;
  }
  drain();
  if (!tracking()) {
    for (const Command& command : graph.commands()) execute_on(command, stream.queue(), nullptr);
    return;
  }
  for (const Command& command : graph.commands()) {
    Command copy;
    command.copy_into(copy, stream.queue());
    run_now(copy, command.kind == Command::Kind::kLaunch ? 0 : command.size);
  }
}

bool Device::launch_command_buffer(Graph& graph, Stream& stream) {
  if (!graph.command_buffers_decided()) {
    graph.set_command_buffers(GraphCommandBuffers::for_graph(info_, graph));
  }
  GraphCommandBuffers* buffers = graph.command_buffers();
  if (buffers == nullptr) return false;
  void* recorded = buffers->find(stream.queue());
  if (recorded == nullptr) {
    drain();  // recording binds kernel arguments, which the submission thread also does
    try {
      recorded = buffers->record(graph, stream.queue());
    } catch (const Error& error) {
      log().warn("device {}: a graph could not be recorded into a command buffer ({}); it "
                 "replays in batches", index_, error.what());
      graph.set_command_buffers(nullptr);
      return false;
    }
  }
  Command command;
  command.kind = Command::Kind::kCommandBuffer;
  command.queue = stream.queue();
  command.command_buffer = recorded;
  submit(std::move(command));
  return true;
}

void Device::destroy_graph(Graph& graph) {
  if (graph.destroyed()) return;
  graph.mark_destroyed();
  try {
    if (cl::Event tail = stream_tail(graph.last_stream())) {
      cl_event event = tail.get();
      clWaitForEvents(1, &event);
    }
  } catch (const Error& error) {
    // Nothing can be enqueued any more: wait for the device as a whole instead.
    log().warn("device {}: waiting for a graph's last launch failed ({}); finishing every stream",
               index_, error.what());
    drain();
    for (auto& each : streams_) clFinish(each->queue());
    wait_for_retired_streams();
  }
  graph.clear();
  for (cl_mem mem : graph.references()) {
    if (auto kept = holds_.release(mem)) free_block(kept->block, kept->used_on);
  }
}

std::uint64_t Device::graph_bytes_held(const Graph& graph) const {
  std::uint64_t bytes = 0;
  for (cl_mem mem : graph.references()) bytes += holds_.kept_bytes(mem);
  return bytes;
}

void Device::abandon_captures() {
  for (auto& stream : streams_) {
    if (stream->capture() == nullptr) continue;
    std::shared_ptr<Graph> graph = stream->capture_graph();
    stream->set_capture(nullptr);
    graph->end_recording();
    destroy_graph(*graph);
  }
}

void Device::release_scratch(PoolBlock block) {
  if (keep_for_graphs(block, {})) return;
  pool_->release(block);
}

PoolBlock Device::allocate(Stream& stream, std::uint64_t size) {
  Graph* graph = stream.capture();
  if (graph == nullptr) return pool_->acquire(size, stream.id());
  if (std::optional<PoolBlock> reused = graph->take_reusable(size)) {
    holds_.take(reused->mem);
    return *reused;
  }
  PoolBlock block = pool_->acquire(size, stream.id());
  graph->note_allocation(block.mem);
  return block;
}

bool Device::keep_for_graphs(const PoolBlock& block, const std::vector<std::uint64_t>& used_on) {
  if (!holds_.keep(block, used_on)) return false;
  Stream* home = find_stream(block.stream);
  Graph* graph = home != nullptr ? home->capture() : nullptr;
  const bool home_only = std::all_of(used_on.begin(), used_on.end(),
                                     [&](std::uint64_t id) { return id == block.stream; });
  if (graph != nullptr && home_only && graph->allocated_while_recording(block.mem) &&
      holds_.graphs(block.mem) == 1 && graph->references().count(block.mem) != 0) {
    graph->offer(block);
  }
  return true;
}

}  // namespace aethercl
