// A graph (docs: include/aethercl/driver.h, "Graphs"): the commands a stream's calls recorded
// between aethercl_graph_capture_begin and aethercl_graph_capture_end, replayed by
// Device::launch_graph with no validation or allocation per command.
//
// Contract: every member is used with the owning device's mutex held. A recorded command keeps
// its queue unset (the launch names the queue), its LaunchRecord's owner (user kernels stay alive)
// and its wait event; host bytes of staged writes are copied into the graph (snapshots), pinned
// host memory is named by address. The cl_mem values the commands name are registered with the
// device's GraphHolds as they are recorded, so memory freed during or after the capture stays
// allocated until the graph is destroyed. Memory the capture itself allocated on its stream and
// freed again serves the capture's later allocations (replays run the commands in capture order,
// so the later user writes it after the earlier one's last use).
#pragma once

#include "runtime/command.h"
#include "runtime/launch_counters.h"
#include "runtime/memory_pool.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_set>
#include <vector>

namespace aethercl {

class GraphCommandBuffers;
class GraphHolds;
class Stream;

class Graph {
 public:
  Graph(int device_index, std::uint64_t capture_stream);
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();

  int device_index() const { return device_index_; }

  // ---- recording -------------------------------------------------------------------------
  // Appends command (its queue is ignored), registering the memory it names with holds.
  void record(Command&& command, GraphHolds& holds);
  // A copy of size bytes of source that lives as long as the graph (staged host writes).
  const void* snapshot(const void* source, std::uint64_t size);
  // Launch counters (runtime/launch_counters.h) of one recorded op, its own: held while the
  // graph can replay.
  cl_mem counters(cl_context context, std::size_t count);
  // Pinned host memory a recorded transfer names by address: kept allocated while the graph
  // can replay, even after aethercl_host_free (which then only invalidates the pointer).
  void keep_host_memory(std::shared_ptr<void> allocation);
  // Reuse inside the capture: blocks allocated on the capture stream while it records, those
  // of them freed again (offered by the device when only this graph names them), and the
  // smallest offered block of capacity size .. 2 size for a later allocation. end_recording()
  // forgets both at the end of the capture.
  void note_allocation(cl_mem mem) { allocated_.insert(mem); }
  bool allocated_while_recording(cl_mem mem) const { return allocated_.count(mem) != 0; }
  void offer(const PoolBlock& block) { reusable_.push_back(block); }
  std::optional<PoolBlock> take_reusable(std::uint64_t size);
  void end_recording();
  // Recorded commands so far; truncate(n) drops the later ones (a call that failed part-way).
  std::size_t nodes() const { return commands_.size(); }
  void truncate(std::size_t nodes);

  // ---- replay ----------------------------------------------------------------------------
  const std::vector<Command>& commands() const { return commands_; }
  std::uint64_t kernels() const { return kernels_; }
  // Every cl_mem value the commands name (once each), as registered with the holds.
  const std::unordered_set<cl_mem>& references() const { return references_; }
  // The stream whose queue holds the graph's latest work: the capture stream until the first
  // launch (memory handed out during the capture may still be in use by that stream's earlier
  // work), then the stream of the latest launch. A launch on another stream waits for it first.
  std::uint64_t last_stream() const { return last_stream_; }
  void set_last_stream(std::uint64_t id) { last_stream_ = id; }
  bool destroyed() const { return destroyed_; }
  void mark_destroyed() { destroyed_ = true; }
  // Releases commands, snapshots and command buffers (after the last launch has completed).
  void clear();
  // The graph's command buffers (runtime/graph_command_buffer.h), made at the first launch when
  // the device can hold every command of the graph in one; nullptr where it cannot.
  GraphCommandBuffers* command_buffers() const { return command_buffers_.get(); }
  void set_command_buffers(std::unique_ptr<GraphCommandBuffers> buffers);
  bool command_buffers_decided() const { return command_buffers_decided_; }

 private:
  void reference(cl_mem mem, GraphHolds& holds);

  int device_index_;
  std::vector<Command> commands_;
  std::uint64_t kernels_ = 0;
  std::unordered_set<cl_mem> references_;
  std::unordered_set<cl_mem> allocated_;  // while recording
  std::vector<PoolBlock> reusable_;       // while recording
  std::vector<std::unique_ptr<unsigned char[]>> snapshots_;
  std::vector<std::shared_ptr<void>> host_memory_;
  std::vector<cl::Mem> counters_;
  std::uint64_t last_stream_;
  bool destroyed_ = false;
  std::unique_ptr<GraphCommandBuffers> command_buffers_;
  bool command_buffers_decided_ = false;
};

// Lets commands on a capturing stream run eagerly for its life (a probe an op runs once on the
// device, whose result it reads back); the capture resumes afterwards.
class CapturePause {
 public:
  explicit CapturePause(Stream& stream);
  CapturePause(const CapturePause&) = delete;
  CapturePause& operator=(const CapturePause&) = delete;
  ~CapturePause();

 private:
  Stream& stream_;
  std::shared_ptr<Graph> paused_;
};

}  // namespace aethercl
