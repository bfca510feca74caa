// Graph recording: commands, the memory they name, snapshots of staged host bytes.
#include "runtime/graph.h"

#include "runtime/graph_command_buffer.h"
#include "runtime/graph_holds.h"
#include "runtime/stream.h"

#include <cstring>

namespace aethercl {

void Graph::reference(cl_mem mem, GraphHolds& holds) {
  if (mem != nullptr && references_.insert(mem).second) holds.reference(mem);
}

std::optional<PoolBlock> Graph::take_reusable(std::uint64_t size) {
  auto best = reusable_.end();
  for (auto it = reusable_.begin(); it != reusable_.end(); ++it) {
    if (it->capacity >= size && it->capacity / 2 <= size &&
        (best == reusable_.end() || it->capacity < best->capacity)) {
      best = it;
    }
  }
  if (best == reusable_.end()) return std::nullopt;
  PoolBlock block = *best;
  reusable_.erase(best);
  return block;
}

void Graph::end_recording() {
  allocated_.clear();
  reusable_.clear();
}

void Graph::record(Command&& command, GraphHolds& holds) {
  command.queue = nullptr;
  if (command.kind == Command::Kind::kLaunch) {
    // Kernel arguments are bytes: every pointer-sized value is taken for a possible cl_mem. A
    // scalar that happens to equal one only keeps that memory until the graph is destroyed.
    const LaunchArgs& args = command.launch.args;
    for (std::size_t i = 0; i < args.count(); ++i) {
      LaunchArgs::Arg arg = args[i];
      if (arg.value == nullptr || arg.size != sizeof(cl_mem)) continue;
      cl_mem mem = nullptr;
      std::memcpy(&mem, arg.value, sizeof(mem));
      reference(mem, holds);
    }
    ++kernels_;
  }
  reference(command.mem, holds);
  reference(command.source_mem, holds);
  commands_.push_back(std::move(command));
}

const void* Graph::snapshot(const void* source, std::uint64_t size) {
  auto copy = std::make_unique<unsigned char[]>(size);
  std::memcpy(copy.get(), source, size);
  snapshots_.push_back(std::move(copy));
  return snapshots_.back().get();
}

void Graph::keep_host_memory(std::shared_ptr<void> allocation) {
  for (const auto& kept : host_memory_) {
    if (kept == allocation) return;
  }
  host_memory_.push_back(std::move(allocation));
}

void Graph::truncate(std::size_t nodes) {
  while (commands_.size() > nodes) {
    if (commands_.back().kind == Command::Kind::kLaunch) --kernels_;
    commands_.pop_back();
  }
}

Graph::Graph(int device_index, std::uint64_t capture_stream)
    : device_index_(device_index), last_stream_(capture_stream) {}

Graph::~Graph() = default;

void Graph::set_command_buffers(std::unique_ptr<GraphCommandBuffers> buffers) {
  command_buffers_ = std::move(buffers);
  command_buffers_decided_ = true;
}

void Graph::clear() {
  command_buffers_.reset();
  command_buffers_decided_ = true;
  commands_.clear();
  commands_.shrink_to_fit();
  snapshots_.clear();
  host_memory_.clear();
  counters_.clear();
  kernels_ = 0;
}

cl_mem Graph::counters(cl_context context, std::size_t count) {
  counters_.push_back(make_launch_counters(context, count));
  return counters_.back().get();
}

CapturePause::CapturePause(Stream& stream) : stream_(stream), paused_(stream.capture_graph()) {
  stream_.set_capture(nullptr);
}

CapturePause::~CapturePause() { stream_.set_capture(std::move(paused_)); }

}  // namespace aethercl
