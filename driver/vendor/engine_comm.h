// The vendor-engine side of a communicator: per rank its CUDA device (primary context), a CUDA
// stream, a staging buffer both APIs see (vendor/shared_buffer.h), and NCCL communicators for all
// ranks of this process (ncclCommInitAll), or for a communicator across processes its one member's
// NCCL communicator from ncclCommInitRank.
//
// Contract: used under the communicator's locks (runtime/communicator.h). After a failed NCCL
// call the NCCL communicators are aborted when the object goes (ncclCommAbort where exported).
#pragma once

#include "cl/handle.h"
#include "vendor/engines.h"
#include "vendor/shared_buffer.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace aethercl::vendor {

// One member device: its CUDA ordinal and its OpenCL context and device.
struct EngineMember {
  int ordinal = -1;
  cl_context context = nullptr;
  cl_device_id device = nullptr;
};

// This process's place in a communicator across processes: global rank `rank` of nranks, joined
// through NCCL's unique id.
struct RankJoin {
  int nranks = 0;
  int rank = 0;
  ncclUniqueId id{};
};

class EngineComm {
 public:
  // Throws Error naming the CUDA or NCCL call that failed; nothing stays allocated then.
  EngineComm(const CudaDriver& cuda, const Nccl& nccl, std::vector<EngineMember> members);
  // One member, global rank join.rank of join.nranks (ncclCommInitRank: blocks until every rank
  // has joined). The caller has checked that ncclCommInitRank is exported.
  EngineComm(const CudaDriver& cuda, const Nccl& nccl, EngineMember member, const RankJoin& join);
  EngineComm(const EngineComm&) = delete;
  EngineComm& operator=(const EngineComm&) = delete;
  ~EngineComm();

  int size() const { return static_cast<int>(ranks_.size()); }
  const CudaDriver& cuda() const { return cuda_; }
  const Nccl& nccl() const { return nccl_; }
  // "NCCL 2.21.5, CUDA devices [0, 1]".
  std::string description() const;

  // Rank r's CUDA device ordinal.
  int ordinal(int r) const { return ranks_.at(static_cast<std::size_t>(r)).member.ordinal; }
  // A user buffer of bytes (at most import_piece_bytes()) in rank r's engine memory
  // (vendor/engine_memory.h): *mem receives the OpenCL buffer, the owner frees it.
  std::shared_ptr<void> allocate(int r, std::uint64_t bytes, cl_mem* mem) const;

  // Rank r's staging of at least bytes (reallocated when smaller; contents not kept). Waits for
  // the OpenCL copies still reading the old one.
  SharedBuffer& staging(int r, std::uint64_t bytes);
  // An OpenCL copy out of rank r's staging that later uses of it must wait for.
  void add_pending_read(int r, cl::Event event);
  // Waits for every pending read of rank r's staging.
  void wait_pending(int r);

  // One collective: op(r, comm, stream) for every rank between ncclGroupStart and ncclGroupEnd,
  // then a wait for every rank's stream. function names the NCCL call op makes (for messages).
  // Throws Error naming the failing call; the engine is then marked failed.
  void collective(const char* function,
                  const std::function<ncclResult_t(int, ncclComm_t, CUstream, CUdeviceptr)>& op);
  bool failed() const { return failed_; }

 private:
  struct Rank {
    EngineMember member;
    CUdevice device = 0;
    CUcontext context = nullptr;
    bool retained = false;
    CUstream stream = nullptr;
    ncclComm_t comm = nullptr;
    std::unique_ptr<SharedBuffer> staging;
    std::vector<cl::Event> pending;
  };
  // Retains each member's primary context and creates its stream (ranks_ filled).
  void open(std::vector<EngineMember> members);
  void release() noexcept;

  const CudaDriver& cuda_;
  const Nccl& nccl_;
  std::vector<Rank> ranks_;
  bool failed_ = false;
  int first_rank_ = 0;  // the global rank of ranks_[0] (messages)
  int nranks_ = 0;      // the global rank count (description)
};

}  // namespace aethercl::vendor
