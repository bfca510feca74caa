// Staging copies and NCCL calls of the collectives on the vendor engines.
#include "multi/engine_path.h"

#include "multi/peer_path.h"

#include "cl/cl_error.h"
#include "support/error.h"
#include "support/log.h"
#include "vendor/cl_import.h"
#include "vendor/device_match.h"
#include "vendor/engine_comm.h"
#include "vendor/engine_memory.h"
#include "vendor/engines.h"
#include "vendor/shared_buffer.h"

#include <aethercl/driver.h>

#include <chrono>
#include <cstdint>

namespace aethercl::multi {

std::unique_ptr<vendor::EngineComm> make_engine_comm(const std::vector<Device*>& devices,
                                                     bool required, std::string& why) {
  const vendor::Engines& engines = vendor::engines();
  if (engines.cuda == nullptr || engines.nccl == nullptr) {
    why = engines.why_not;
    return nullptr;
  }
  if (devices.size() < 2) {
    why = "a communicator of one device has nothing to move";
    return nullptr;
  }
  std::vector<vendor::EngineMember> members;
  for (Device* device : devices) {
    auto ordinal = vendor::cuda_ordinal_of(*engines.cuda, device->info().id, device->index());
    if (!ordinal) {
      why = fmt::format("device {} ({}) is not a CUDA device", device->index(),
                        device->info().name);
      return nullptr;
    }
    for (const auto& member : members) {
      if (member.ordinal == *ordinal) {
        why = fmt::format("device {} is CUDA device {} again", device->index(), *ordinal);
        return nullptr;
      }
    }
    if (!vendor::can_import(*engines.cuda, device->info().id)) {
      why = fmt::format("device {} cannot import CUDA memory into OpenCL (no "
                        "cl_khr_external_memory_opaque_fd, or an OpenCL loader without "
                        "clCreateBufferWithProperties)", device->index());
      return nullptr;
    }
    members.push_back({*ordinal, device->context(), device->info().id});
  }
  try {
    return std::make_unique<vendor::EngineComm>(*engines.cuda, *engines.nccl, std::move(members));
  } catch (const Error& error) {
    if (required) throw;
    why = error.what();
    log().warn("vendor engines: a communicator cannot use them ({}); it takes the OpenCL path",
               why);
    return nullptr;
  }
}

int nccl_dtype(int dtype) {
  switch (dtype) {
    case AETHERCL_F16: return vendor::kNcclFloat16;
    case AETHERCL_BF16: return vendor::kNcclBfloat16;
    default: return vendor::kNcclFloat32;
  }
}

int nccl_reduce_op(int op) { return op == AETHERCL_MEAN ? vendor::kNcclAvg : vendor::kNcclSum; }

namespace {

// Each copy between a user buffer and the staging, cut where the staging's OpenCL pieces meet.
void enqueue_copies(const std::vector<StageCopy>& copies, cl_command_queue queue,
                    const vendor::SharedBuffer& staging, bool into_staging,
                    std::vector<cl::Event>& events) {
  for (const StageCopy& copy : copies) {
    std::uint64_t user_offset = copy.user_offset;
    for (const auto& piece : staging.pieces(copy.staging_offset, copy.bytes)) {
      cl_event event = nullptr;
      cl_int status = into_staging
          ? clEnqueueCopyBuffer(queue, copy.user, piece.mem, user_offset, piece.offset,
                                piece.bytes, 0, nullptr, &event)
          : clEnqueueCopyBuffer(queue, piece.mem, copy.user, piece.offset, user_offset,
                                piece.bytes, 0, nullptr, &event);
      cl::check(status, into_staging ? "clEnqueueCopyBuffer (into the engine's staging)"
                                     : "clEnqueueCopyBuffer (out of the engine's staging)");
      events.emplace_back(event);
      user_offset += piece.bytes;
    }
  }
}

}  // namespace

bool run_on_engine(Communicator& comm, std::vector<RankStaging> ranks,
                   std::uint64_t staging_bytes, const char* function, const NcclCall& nccl_call) {
  vendor::EngineComm& engine = *comm.engine();
  bool copying_back = false;
  try {
    std::vector<const vendor::SharedBuffer*> staging;
    for (int r = 0; r < engine.size(); ++r) {
      staging.push_back(&engine.staging(r, staging_bytes));
      engine.wait_pending(r);  // the previous call's copies out of this staging
    }
    // The two APIs are ordered by host waits: the copies in have finished before NCCL starts.
    // (clFinish: NVIDIA's clWaitForEvents took about 150 us longer to return.)
    std::vector<cl::Event> copied_in;
    for (int r = 0; r < engine.size(); ++r) {
      enqueue_copies(ranks[r].in, ranks[r].stream->queue(), *staging[r], true, copied_in);
    }
    for (int r = 0; r < engine.size(); ++r) {
      cl::check(clFinish(ranks[r].stream->queue()),
                "clFinish (copies into the engine's staging)");
    }
    engine.collective(function, [&](int r, vendor::ncclComm_t nccl_comm, vendor::CUstream stream,
                                     vendor::CUdeviceptr pointer) {
      auto* base = reinterpret_cast<unsigned char*>(static_cast<std::uintptr_t>(pointer));
      return nccl_call(base + ranks[r].send_offset, base + ranks[r].recv_offset, nccl_comm,
                       stream);
    });
    // NCCL has finished (streams synchronised): the copies back follow on the user's streams and
    // the next use of the staging waits for them.
    copying_back = true;
    for (int r = 0; r < engine.size(); ++r) {
      std::vector<cl::Event> copied_out;
      enqueue_copies(ranks[r].out, ranks[r].stream->queue(), *staging[r], false, copied_out);
      for (cl::Event& event : copied_out) engine.add_pending_read(r, std::move(event));
      clFlush(ranks[r].stream->queue());
    }
  } catch (const Error& error) {
    comm.drop_engine(error.what());
    // Until the copies back the engine has touched only its staging: the OpenCL path can still
    // compute this call from the user's buffers as they are.
    if (copying_back || engine_wish() == EngineWish::kRequired || comm.spans_processes()) throw;
    return false;
  }
  return true;
}

std::optional<std::vector<unsigned char*>> engine_addresses(const vendor::EngineComm& engine,
                                                            const std::vector<cl_mem>& mems) {
  std::vector<unsigned char*> addresses;
  for (std::size_t r = 0; r < mems.size(); ++r) {
    auto address = vendor::engine_address(mems[r]);
    if (!address || address->ordinal != engine.ordinal(static_cast<int>(r))) return std::nullopt;
    addresses.push_back(reinterpret_cast<unsigned char*>(static_cast<std::uintptr_t>(
        address->pointer)));
  }
  return addresses;
}

bool run_in_place(Communicator& comm, const std::vector<Stream*>& streams, const char* function,
                  const std::vector<unsigned char*>& sends,
                  const std::vector<unsigned char*>& recvs, const NcclCall& nccl_call) {
  vendor::EngineComm& engine = *comm.engine();
  bool calling_nccl = false;
  try {
    auto start = std::chrono::steady_clock::now();
    // The two APIs are ordered by host waits: the streams' work so far has finished before NCCL
    // reads the buffers. (clFinish: a marker and clWaitForEvents took about 150 us longer on
    // NVIDIA's OpenCL, measured on an H200 pair.)
    for (Stream* stream : streams) {
      cl::check(clFinish(stream->queue()), "clFinish (the streams' work before the engine's "
                "collective)");
    }
    auto ready_at = std::chrono::steady_clock::now();
    calling_nccl = true;
    engine.collective(function, [&](int r, vendor::ncclComm_t nccl_comm, vendor::CUstream stream,
                                     vendor::CUdeviceptr) {
      return nccl_call(sends[r], recvs[r], nccl_comm, stream);
    });
    auto done_at = std::chrono::steady_clock::now();
    log().debug("{} in place: streams ready after {} us, NCCL done {} us later", function,
                std::chrono::duration_cast<std::chrono::microseconds>(ready_at - start).count(),
                std::chrono::duration_cast<std::chrono::microseconds>(done_at - ready_at).count());
  } catch (const Error& error) {
    comm.drop_engine(error.what());
    if (calling_nccl || engine_wish() == EngineWish::kRequired || comm.spans_processes()) throw;
    return false;
  }
  return true;
}

}  // namespace aethercl::multi
