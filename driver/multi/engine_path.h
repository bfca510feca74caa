// Collectives on the vendor engines (docs/ARCHITECTURE.md decision 26): the user's OpenCL buffers
// are copied into the communicator's staging (memory both OpenCL and CUDA see), the host waits for
// those copies, NCCL runs on the staging in one group over the ranks (a CUDA stream each) and the
// host waits for the streams, then OpenCL copies the results back on each rank's current stream.
#pragma once

#include "runtime/communicator.h"
#include "runtime/device.h"
#include "vendor/nccl.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace aethercl::vendor {
class EngineComm;
}

namespace aethercl::multi {

// The engines' side for a communicator over devices, or nullptr with why when the engines are
// not loaded or do not serve every device. Throws Error naming the CUDA/NCCL call only when
// required is set (AETHERCL_PEER_PATH=engine); otherwise a failure is why (logged by the caller).
std::unique_ptr<vendor::EngineComm> make_engine_comm(const std::vector<Device*>& devices,
                                                     bool required, std::string& why);

// The NCCL type code of a collective dtype (f32, f16, bf16).
int nccl_dtype(int dtype);
// The NCCL reduction of a collective op (SUM -> ncclSum, MEAN -> ncclAvg).
int nccl_reduce_op(int op);

// A copy between a user buffer and rank staging, in bytes.
struct StageCopy {
  cl_mem user = nullptr;
  std::uint64_t user_offset = 0;
  std::uint64_t staging_offset = 0;
  std::uint64_t bytes = 0;
};

struct RankStaging {
  Stream* stream = nullptr;     // the rank's current stream: copies are ordered with it
  std::vector<StageCopy> in;    // user -> staging before the NCCL call
  std::vector<StageCopy> out;   // staging -> user after it
  std::uint64_t send_offset = 0;  // where in the staging the NCCL call reads
  std::uint64_t recv_offset = 0;  // and where it writes
};

// One rank's NCCL call: send and recv are the device addresses it reads and writes.
using NcclCall = std::function<vendor::ncclResult_t(void* send, void* recv,
                                                    vendor::ncclComm_t comm,
                                                    vendor::CUstream stream)>;

// Runs one collective on comm's engine (non-null); true when it ran. staging_bytes per rank.
// function names the NCCL call for messages. On any failure the communicator drops its engine
// (one warning; later calls take its OpenCL path). A failure before the copies back (CUDA, NCCL,
// the copies into the staging) returns false with the user's buffers as they were, for the
// caller to run its OpenCL path, unless AETHERCL_PEER_PATH=engine requires the engine or the
// communicator spans processes (it has no other path): then, as for a failed copy back, the Error
// propagates.
bool run_on_engine(Communicator& comm, std::vector<RankStaging> ranks,
                   std::uint64_t staging_bytes, const char* function, const NcclCall& nccl_call);

// The CUDA addresses of mems (rank r's buffer at r) when every one is engine memory
// (aethercl_comm_alloc, vendor/engine_memory.h) of its rank's CUDA device; else nullopt.
std::optional<std::vector<unsigned char*>> engine_addresses(const vendor::EngineComm& engine,
                                                            const std::vector<cl_mem>& mems);

// Runs one collective on comm's engine (non-null) on the user's buffers, every one engine memory
// (engine_addresses of the sends and recvs, by rank): the host waits for the work so far on each
// rank's stream (streams[r]), then NCCL runs and the host waits for it, so later work on those
// streams observes the result. Returns true when it ran. A failure before NCCL is called (waiting
// for the streams) returns false with the buffers untouched, for the caller's OpenCL path, unless
// AETHERCL_PEER_PATH=engine requires the engine or the communicator spans processes; a failure
// from the NCCL calls on propagates: the buffers may be partly written. Either way the
// communicator drops its engine (one warning).
bool run_in_place(Communicator& comm, const std::vector<Stream*>& streams, const char* function,
                  const std::vector<unsigned char*>& sends,
                  const std::vector<unsigned char*>& recvs, const NcclCall& nccl_call);

}  // namespace aethercl::multi
