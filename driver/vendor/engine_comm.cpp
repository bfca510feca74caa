// Per-rank CUDA state, staging and NCCL communicators of a communicator on the vendor engines.
#include "vendor/engine_comm.h"

#include "support/error.h"
#include "support/log.h"
#include "vendor/current_context.h"
#include "vendor/engine_memory.h"

#include <fmt/format.h>

namespace aethercl::vendor {

EngineComm::EngineComm(const CudaDriver& cuda, const Nccl& nccl, std::vector<EngineMember> members)
    : cuda_(cuda), nccl_(nccl), nranks_(static_cast<int>(members.size())) {
  try {
    open(std::move(members));
    CurrentContext current(cuda);
    std::vector<int> ordinals;
    for (const Rank& rank : ranks_) ordinals.push_back(rank.member.ordinal);
    std::vector<ncclComm_t> comms(ranks_.size(), nullptr);
    nccl_check(nccl, nccl.ncclCommInitAll(comms.data(), size(), ordinals.data()),
               "ncclCommInitAll");
    for (std::size_t r = 0; r < ranks_.size(); ++r) ranks_[r].comm = comms[r];
  } catch (...) {
    release();
    throw;
  }
}

EngineComm::EngineComm(const CudaDriver& cuda, const Nccl& nccl, EngineMember member,
                       const RankJoin& join)
    : cuda_(cuda), nccl_(nccl), first_rank_(join.rank), nranks_(join.nranks) {
  try {
    open({member});
    CurrentContext current(cuda);
    // NCCL takes the device of the current context.
    current.set(ranks_[0].context);
    ncclComm_t comm = nullptr;
    nccl_check(nccl, nccl.ncclCommInitRank(&comm, join.nranks, join.id, join.rank),
               "ncclCommInitRank");
    ranks_[0].comm = comm;
  } catch (...) {
    release();
    throw;
  }
}

void EngineComm::open(std::vector<EngineMember> members) {
  CurrentContext current(cuda_);
  for (const EngineMember& member : members) {
    Rank& rank = ranks_.emplace_back();
    rank.member = member;
    cuda_check(cuda_, cuda_.cuDeviceGet(&rank.device, member.ordinal), "cuDeviceGet",
               "communicator");
    cuda_check(cuda_, cuda_.cuDevicePrimaryCtxRetain(&rank.context, rank.device),
               "cuDevicePrimaryCtxRetain", "communicator");
    rank.retained = true;
    current.set(rank.context);
    cuda_check(cuda_, cuda_.cuStreamCreate(&rank.stream, 1 /* CU_STREAM_NON_BLOCKING */),
               "cuStreamCreate", "communicator");
  }
}

EngineComm::~EngineComm() { release(); }

void EngineComm::release() noexcept {
  CurrentContext current(cuda_);
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    Rank& rank = ranks_[r];
    if (rank.context != nullptr && cuda_.cuCtxSetCurrent(rank.context) == kCudaSuccess &&
        rank.stream != nullptr) {
      cuda_.cuStreamSynchronize(rank.stream);
    }
    for (cl::Event& event : rank.pending) {
      cl_event handle = event.get();
      clWaitForEvents(1, &handle);
    }
    rank.pending.clear();
    if (rank.comm != nullptr) {
      if (failed_ && nccl_.ncclCommAbort != nullptr) {
        nccl_.ncclCommAbort(rank.comm);
      } else {
        nccl_.ncclCommDestroy(rank.comm);
      }
      rank.comm = nullptr;
    }
  }
  for (Rank& rank : ranks_) {
    if (rank.context != nullptr) cuda_.cuCtxSetCurrent(rank.context);
    rank.staging.reset();
    if (rank.stream != nullptr) cuda_.cuStreamDestroy(rank.stream);
    rank.stream = nullptr;
    if (rank.retained) cuda_.cuDevicePrimaryCtxRelease(rank.device);
    rank.retained = false;
  }
  ranks_.clear();
}

std::string EngineComm::description() const {
  std::string devices;
  for (const Rank& rank : ranks_) {
    devices += fmt::format("{}{}", devices.empty() ? "" : ", ", rank.member.ordinal);
  }
  std::string across = nranks_ > size() ? fmt::format(", global rank {} of {}", first_rank_,
                                                      nranks_)
                                         : std::string();
  return fmt::format("NCCL {}.{}.{}, CUDA devices [{}]{}", nccl_.version / 10000,
                     nccl_.version % 10000 / 100, nccl_.version % 100, devices, across);
}

void EngineComm::wait_pending(int r) {
  Rank& rank = ranks_.at(static_cast<std::size_t>(r));
  cl_int status = CL_SUCCESS;
  for (cl::Event& event : rank.pending) {
    cl_event handle = event.get();
    status = clWaitForEvents(1, &handle);
    if (status != CL_SUCCESS) break;
  }
  rank.pending.clear();
  if (status != CL_SUCCESS) {
    fail(Status::kDeviceError, "clWaitForEvents (copy out of the engine's staging on rank {}) "
         "failed: {}", r, status);
  }
}

void EngineComm::add_pending_read(int r, cl::Event event) {
  ranks_.at(static_cast<std::size_t>(r)).pending.push_back(std::move(event));
}

std::shared_ptr<void> EngineComm::allocate(int r, std::uint64_t bytes, cl_mem* mem) const {
  const Rank& rank = ranks_.at(static_cast<std::size_t>(r));
  std::vector<int> peers;
  for (const Rank& other : ranks_) peers.push_back(other.member.ordinal);
  return allocate_engine_memory(cuda_, rank.member.ordinal, peers, rank.member.context,
                                rank.member.device, bytes, mem);
}

SharedBuffer& EngineComm::staging(int r, std::uint64_t bytes) {
  Rank& rank = ranks_.at(static_cast<std::size_t>(r));
  if (rank.staging && rank.staging->bytes() >= bytes) return *rank.staging;
  wait_pending(r);
  CurrentContext current(cuda_);
  current.set(rank.context);
  rank.staging.reset();
  std::vector<int> peers;
  for (const Rank& other : ranks_) peers.push_back(other.member.ordinal);
  rank.staging = std::make_unique<SharedBuffer>(cuda_, rank.member.ordinal, peers,
                                                rank.member.context, rank.member.device, bytes);
  log().debug("vendor engines: rank {} staging of {} bytes on CUDA device {}", r,
              rank.staging->bytes(), rank.member.ordinal);
  return *rank.staging;
}

void EngineComm::collective(
    const char* function,
    const std::function<ncclResult_t(int, ncclComm_t, CUstream, CUdeviceptr)>& op) {
  CurrentContext current(cuda_);
  ncclResult_t status = nccl_.ncclGroupStart();
  if (status != kNcclSuccess) {
    failed_ = true;
    nccl_check(nccl_, status, "ncclGroupStart");
  }
  ncclResult_t first_failure = kNcclSuccess;
  int failed_rank = -1;
  // One thread drives every rank: NCCL switches to each communicator's device itself.
  for (int r = 0; r < size(); ++r) {
    Rank& rank = ranks_[static_cast<std::size_t>(r)];
    CUdeviceptr staging = rank.staging ? rank.staging->device_pointer() : 0;
    ncclResult_t result = op(r, rank.comm, rank.stream, staging);
    if (result != kNcclSuccess && first_failure == kNcclSuccess) {
      first_failure = result;
      failed_rank = r;
    }
  }
  // The group is closed even after a failed call inside it, as NCCL requires.
  status = nccl_.ncclGroupEnd();
  if (first_failure != kNcclSuccess) {
    failed_ = true;
    fail(Status::kDeviceError, "{} (rank {}) failed: {}", function, first_rank_ + failed_rank,
         nccl_error_text(nccl_, first_failure));
  }
  if (status != kNcclSuccess) {
    failed_ = true;
    fail(Status::kDeviceError, "ncclGroupEnd (after {}) failed: {}", function,
         nccl_error_text(nccl_, status));
  }
  for (int r = 0; r < size(); ++r) {
    Rank& rank = ranks_[static_cast<std::size_t>(r)];
    current.set(rank.context);
    CUresult synced = cuda_.cuStreamSynchronize(rank.stream);
    if (synced != kCudaSuccess) {
      failed_ = true;
      cuda_check(cuda_, synced, "cuStreamSynchronize", function);
    }
  }
}

}  // namespace aethercl::vendor
