// Communicators across processes: NCCL's unique id (aethercl_comm_unique_id) and a communicator
// whose one member in this process is a global rank of many (aethercl_comm_create_rank).
#include "multi/collectives.h"

#include "cl/cl_error.h"
#include "multi/multi_call.h"
#include "runtime/device_list.h"
#include "support/log.h"
#include "vendor/cl_import.h"
#include "vendor/device_match.h"
#include "vendor/engine_comm.h"
#include "vendor/engines.h"

#include <aethercl/driver.h>

#include <cstring>

namespace aethercl::multi {
namespace {

static_assert(sizeof(vendor::ncclUniqueId) == AETHERCL_COMM_ID_BYTES);

// The loaded engines with ncclGetUniqueId and ncclCommInitRank, else kNotImplemented saying why.
const vendor::Engines& engines_across_processes() {
  const vendor::Engines& engines = vendor::engines();
  if (engines.cuda == nullptr || engines.nccl == nullptr) {
    fail(Status::kNotImplemented, "the vendor engines are not loaded ({}): communicators across "
         "processes need libcuda.so.1 and libnccl.so.2 (use MPI over host memory instead)",
         engines.why_not);
  }
  if (engines.nccl->ncclGetUniqueId == nullptr || engines.nccl->ncclCommInitRank == nullptr) {
    fail(Status::kNotImplemented, "the loaded NCCL does not export {}: no communicators across "
         "processes", engines.nccl->ncclGetUniqueId == nullptr ? "ncclGetUniqueId"
                                                               : "ncclCommInitRank");
  }
  return engines;
}

}  // namespace

void comm_unique_id(void* id, std::size_t size) {
  if (id == nullptr) fail(Status::kInvalidArgument, "id is NULL");
  if (size < AETHERCL_COMM_ID_BYTES) {
    fail(Status::kInvalidArgument, "size {} is smaller than AETHERCL_COMM_ID_BYTES ({})", size,
         AETHERCL_COMM_ID_BYTES);
  }
  const vendor::Engines& engines = engines_across_processes();
  vendor::ncclUniqueId unique{};
  vendor::nccl_check(*engines.nccl, engines.nccl->ncclGetUniqueId(&unique), "ncclGetUniqueId");
  std::memcpy(id, unique.internal, sizeof(unique.internal));
}

void* comm_create_rank(int nranks, int rank, const void* id, std::size_t id_size,
                       int gpu_index) {
  MultiDeviceCall call;
  Runtime& runtime = call.runtime();
  runtime.require_any_device();
  if (nranks < 1) fail(Status::kInvalidArgument, "nranks {} must be at least 1", nranks);
  if (rank < 0 || rank >= nranks) {
    fail(Status::kInvalidArgument, "rank {} is not a rank of {} (0 .. {})", rank, nranks,
         nranks - 1);
  }
  if (id == nullptr) fail(Status::kInvalidArgument, "id is NULL");
  if (id_size < AETHERCL_COMM_ID_BYTES) {
    fail(Status::kInvalidArgument, "id_size {} is smaller than AETHERCL_COMM_ID_BYTES ({})",
         id_size, AETHERCL_COMM_ID_BYTES);
  }
  const auto& visible = visible_devices();
  if (gpu_index < 0 || static_cast<std::size_t>(gpu_index) >= visible.size()) {
    fail(Status::kNoDevice, "gpu_index {} is out of range; the devices are: {}", gpu_index,
         describe_devices(visible));
  }
  if (!runtime.is_initialized(gpu_index)) {
    fail(Status::kNotInitialized, "gpu_index {} is not initialised (call initialize_gpu({}) "
         "first)", gpu_index, gpu_index);
  }
  const vendor::Engines& engines = engines_across_processes();
  Device& device = runtime.resolve(gpu_index);
  auto ordinal = vendor::cuda_ordinal_of(*engines.cuda, device.info().id, gpu_index);
  if (!ordinal) {
    fail(Status::kNotImplemented, "gpu_index {} ({}) is not a CUDA device the vendor engines "
         "serve", gpu_index, device.info().name);
  }
  if (!vendor::can_import(*engines.cuda, device.info().id)) {
    fail(Status::kNotImplemented, "gpu_index {} cannot import CUDA memory into OpenCL (no "
         "cl_khr_external_memory_opaque_fd, or an OpenCL loader without "
         "clCreateBufferWithProperties)", gpu_index);
  }
  vendor::RankJoin join;
  join.nranks = nranks;
  join.rank = rank;
  std::memcpy(join.id.internal, id, sizeof(join.id.internal));
  log().debug("communicator across processes: rank {} of {} on device {} joins (blocks until "
              "every rank has)", rank, nranks, gpu_index);
  // Without the device lock: other threads may use the device while the ranks gather.
  auto engine = std::make_unique<vendor::EngineComm>(
      *engines.cuda, *engines.nccl,
      vendor::EngineMember{*ordinal, device.context(), device.info().id}, join);
  CommRank member;
  member.device_index = gpu_index;
  member.context = device.context();
  member.device = device.info().id;
  for (cl::Queue* queue : {&member.transfers, &member.outgoing}) {
    cl_int status = CL_SUCCESS;
    *queue = cl::Queue(clCreateCommandQueue(member.context, member.device, 0, &status));
    cl::check(status, "clCreateCommandQueue (communicator transfers)");
  }
  log().info("communicator across processes: rank {} of {} on device {}: engine path ({})", rank,
             nranks, gpu_index, engine->description());
  std::vector<CommRank> ranks;
  ranks.push_back(std::move(member));
  auto comm = std::make_shared<Communicator>(std::move(ranks), PeerPath::kHost);
  comm->span_processes(nranks, rank);
  comm->set_engine(std::move(engine));
  return runtime.comms().insert(std::move(comm));
}

}  // namespace aethercl::multi
