// A communicator: an ordered set of distinct initialised devices (rank i = the i-th) with what its
// collectives reuse: a transfer queue per rank, scratch slots per rank for the chunks a reduction
// receives, pinned host staging for the host-relay path, and where the vendor engines serve its
// devices their side (vendor/engine_comm.h). A communicator across processes
// (aethercl_comm_create_rank) has one member here, global rank first_rank() of global_size(),
// and only the engines' side moves bytes. Tokens are (id << 8) | 0xC0 and never reused;
// shutdown_driver releases every communicator.
//
// Contract: the resources are used with the lifecycle lock (shared), the mutexes of every member
// device and mutex() held, in that order.
#pragma once

#include "cl/handle.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace aethercl {

namespace vendor {
class EngineComm;
}

// How a communicator moves bytes between its devices.
enum class PeerPath {
  kDevice,  // one shared context: the devices copy from each other's buffers
  kHost,    // through pinned host memory: device-to-host on the source, host-to-device on the target
};
const char* peer_path_name(PeerPath path) noexcept;

struct CommRank {
  int device_index = -1;
  cl_context context = nullptr;   // the device's (owned by the Device)
  cl_device_id device = nullptr;
  cl::Queue transfers;            // in-order queue for the copies into this rank's buffers
  cl::Queue outgoing;             // host path: device-to-host reads of this rank's buffers
  cl::Mem scratch;                // reduction slots
  std::uint64_t scratch_bytes = 0;
};

class Communicator {
 public:
  Communicator(std::vector<CommRank> ranks, PeerPath path);
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  // Waits for the transfer queues, then releases everything.
  ~Communicator();

  std::mutex& mutex() { return mutex_; }
  // The members in this process.
  int size() const { return static_cast<int>(ranks_.size()); }
  // All ranks, in every process (size() for a communicator of one process).
  int global_size() const { return global_size_ > 0 ? global_size_ : size(); }
  // The global rank of local rank r.
  int global_rank(int r) const { return first_rank_ + r; }
  // Makes this the communicator of one process's members first_rank .. of global_size ranks.
  void span_processes(int global_size, int first_rank) {
    global_size_ = global_size;
    first_rank_ = first_rank;
  }
  bool spans_processes() const { return global_size_ > 0; }
  // Why drop_engine ran ("" while it has not).
  const std::string& engine_failure() const { return engine_failure_; }
  CommRank& rank(int r) { return ranks_.at(static_cast<std::size_t>(r)); }
  PeerPath path() const { return path_; }
  // Scratch of at least bytes on rank r (grown by reallocation; contents not kept).
  cl_mem scratch(int r, std::uint64_t bytes);
  // Pinned host staging of at least bytes, in rank 0's context (host path).
  unsigned char* staging(std::uint64_t bytes);
  // Waits for every transfer queue.
  void finish() noexcept;
  // The vendor engines' side, or nullptr when the collectives take the OpenCL path().
  vendor::EngineComm* engine() { return engine_.get(); }
  void set_engine(std::unique_ptr<vendor::EngineComm> engine);
  // After a failed CUDA/NCCL call: releases the engine's side; later collectives take path().
  void drop_engine(const std::string& why) noexcept;

 private:
  void release_staging() noexcept;

  std::mutex mutex_;
  std::vector<CommRank> ranks_;
  PeerPath path_;
  cl::Mem staging_;
  void* staging_host_ = nullptr;
  std::uint64_t staging_bytes_ = 0;
  std::unique_ptr<vendor::EngineComm> engine_;
  std::string engine_failure_;
  int global_size_ = 0;  // 0: every rank is in this process
  int first_rank_ = 0;
};

// Communicator tokens: insert, find and remove are thread-safe; a found communicator stays alive
// while the caller holds the shared_ptr.
class CommRegistry {
 public:
  void* insert(std::shared_ptr<Communicator> comm);
  // Throws kInvalidArgument for NULL, kInvalidHandle for anything not live (naming argument).
  std::shared_ptr<Communicator> find(const void* token, const char* argument) const;
  std::shared_ptr<Communicator> remove(const void* token, const char* argument);
  // Every live communicator (shutdown).
  std::vector<std::shared_ptr<Communicator>> remove_all();

 private:
  std::uint64_t decode(const void* token, const char* argument) const;

  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::shared_ptr<Communicator>> comms_;
  std::uint64_t next_id_ = 1;  // monotonic for the life of the process, across shutdowns
};

}  // namespace aethercl
