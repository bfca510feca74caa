// Collectives over a communicator: validation, then a transfer plan. Reductions are
// reduce-scatter + all-gather: rank r owns block r of the elements, pulls every peer's block r
// into its scratch slots chunk by chunk and reduces it in rank order on its own queue, then every
// rank pulls the reduced blocks of the others. With two devices this is the ring algorithm; with
// more, each rank talks to every other one directly (the same bytes per rank as a ring, fewer
// steps, and the fixed rank order that makes the bits independent of the path).
#include "multi/collectives.h"

#include "cl/cl_error.h"
#include "multi/element_types.h"
#include "multi/engine_path.h"
#include "multi/multi_call.h"
#include "multi/peer_path.h"
#include "multi/transfer_plan.h"
#include "runtime/device_list.h"
#include "runtime/family_launch.h"
#include "support/checked.h"
#include "support/env.h"
#include "support/log.h"
#include "vendor/engine_comm.h"
#include "vendor/nccl.h"

#include <algorithm>
#include <string>

namespace aethercl::multi {
namespace {

constexpr std::uint64_t kDefaultChunkBytes = 4ull << 20;
constexpr std::uint64_t kScratchSlots = 4;  // chunks in flight per peer and rank

std::uint64_t chunk_bytes_setting() {
  auto value = env::bytes(env::kCollectiveChunk);
  if (!value) {
    if (env::get(env::kCollectiveChunk)) {
      log().warn("{}='{}' is not a byte count; using {} bytes", env::kCollectiveChunk,
                 *env::get(env::kCollectiveChunk), kDefaultChunkBytes);
    }
    return kDefaultChunkBytes;
  }
  return std::clamp<std::uint64_t>(*value, 256, 1ull << 30);
}

// One element range [begin, begin + count) in elements.
struct Range {
  std::uint64_t begin = 0;
  std::uint64_t count = 0;
};

std::vector<Range> chunks_of(Range range, std::uint64_t chunk_elements) {
  std::vector<Range> chunks;
  for (std::uint64_t done = 0; done < range.count; done += chunk_elements) {
    chunks.push_back({range.begin + done, std::min(chunk_elements, range.count - done)});
  }
  return chunks;
}

// Before any device is initialised (or after shutdown_driver) no communicator is live: the answer
// is kNotInitialized, as for every other call.
bool any_initialized(const Runtime& runtime) {
  for (std::size_t i = 0; i < visible_devices().size(); ++i) {
    if (runtime.is_initialized(static_cast<int>(i))) return true;
  }
  return false;
}

void require_initialized(Runtime& runtime, const void* comm) {
  if (!any_initialized(runtime)) {
    fail(Status::kNotInitialized,
         "comm ({}) is not live: no device is initialised (shutdown_driver releases every "
         "communicator; call initialize_gpu first)", comm);
  }
}

// Everything one collective holds: the scope (lifecycle + device locks), the communicator (locked)
// and its devices by rank.
class CommCall {
 public:
  explicit CommCall(void* comm_token)
      : comm_((require_initialized(call_.runtime(), comm_token),
               call_.runtime().comms().find(comm_token, "comm"))) {
    for (int r = 0; r < comm_->size(); ++r) {
      int index = comm_->rank(r).device_index;
      if (!call_.runtime().is_initialized(index)) {
        fail(Status::kInternal, "communicator rank {} lost its device {}", r, index);
      }
      devices_.push_back(&call_.runtime().resolve(index));
    }
    call_.lock(devices_);
    comm_lock_ = std::unique_lock(comm_->mutex());
    for (Device* device : devices_) {
      streams_.push_back(&MultiDeviceCall::drained_current_stream(*device));
    }
  }

  Communicator& comm() { return *comm_; }
  // The members in this process (buffer arrays hold one per member).
  int size() const { return comm_->size(); }
  // P: every rank in every process (sizes and roots count these).
  int global_size() const { return comm_->global_size(); }
  int global_rank(int r) const { return comm_->global_rank(r); }

  // A communicator across processes has only its engine: MAX and MIN are refused, and after the
  // engine failed every collective fails.
  void require_engine_across_processes(int op = AETHERCL_SUM) {
    if (!comm_->spans_processes()) return;
    if (op == AETHERCL_MAX || op == AETHERCL_MIN) {
      fail(Status::kNotImplemented, "{} is not implemented on a communicator across processes "
           "(only NCCL moves bytes between processes, and NCCL's max and min do not propagate "
           "NaN): use SUM or MEAN", op == AETHERCL_MAX ? "MAX" : "MIN");
    }
    if (comm_->engine() == nullptr) {
      fail(Status::kDeviceError, "this communicator across processes lost its NCCL "
           "communicator after an earlier failure ({}); destroy it and create a new one on every "
           "rank", comm_->engine_failure());
    }
  }
  Device& device(int r) { return *devices_.at(static_cast<std::size_t>(r)); }
  // Rank r's current stream: the collective is ordered with it.
  Stream& stream(int r) { return *streams_.at(static_cast<std::size_t>(r)); }
  const std::vector<Stream*>& streams() const { return streams_; }

  // The communicator's vendor engines, when it has them and they take this reduction op (NCCL's
  // max and min do not propagate NaN as the header promises: those stay on the OpenCL path).
  vendor::EngineComm* engine(int op = AETHERCL_SUM) {
    if (op == AETHERCL_MAX || op == AETHERCL_MIN) return nullptr;
    return comm_->engine();
  }
  // Rank staging records on the current streams, copies to be filled in.
  std::vector<RankStaging> staging_plan() {
    std::vector<RankStaging> plan(static_cast<std::size_t>(size()));
    for (int r = 0; r < size(); ++r) plan[r].stream = &stream(r);
    return plan;
  }

  // The buffer of rank r from a token array, with at least min_bytes.
  cl_mem buffer(void* const* tokens, const char* array, int r, std::uint64_t min_bytes) {
    return call_.buffer(comm_->rank(r).device_index, stream(r).id(), tokens[r],
                        fmt::format("{}[{}]", array, r), min_bytes)
        .mem;
  }

 private:
  MultiDeviceCall call_;
  std::shared_ptr<Communicator> comm_;
  std::vector<Device*> devices_;
  std::vector<Stream*> streams_;
  std::unique_lock<std::mutex> comm_lock_;
};

// Builds a collective's plan: a start marker per rank, transfers routed by the communicator's
// path, reductions, and at the end a barrier on every device's queue.
class PlanBuilder {
 public:
  PlanBuilder(CommCall& call, std::uint64_t element_size)
      : call_(call), element_size_(element_size), chunk_bytes_(chunk_bytes_setting()) {
    chunk_bytes_ -= chunk_bytes_ % 256;  // whole elements of every dtype
    for (int r = 0; r < call.size(); ++r) {
      start_.push_back(plan_.marker(call.stream(r).queue(), context(r)));
    }
  }

  std::uint64_t chunk_elements() const { return chunk_bytes_ / element_size_; }
  StepId start(int r) const { return start_.at(static_cast<std::size_t>(r)); }

  // Copies elements of src (rank src_rank) to dst (rank dst_rank). src_deps order it after the
  // source's writers; dst_deps after the destination's readers.
  StepId transfer(int src_rank, cl_mem src, std::uint64_t src_element, int dst_rank, cl_mem dst,
                  std::uint64_t dst_element, std::uint64_t elements, std::vector<StepId> src_deps,
                  std::vector<StepId> dst_deps) {
    std::uint64_t bytes = elements * element_size_;
    std::uint64_t src_offset = src_element * element_size_;
    std::uint64_t dst_offset = dst_element * element_size_;
    CommRank& to = call_.comm().rank(dst_rank);
    CommRank& from = call_.comm().rank(src_rank);
    if (src_rank == dst_rank || call_.comm().path() == PeerPath::kDevice) {
      std::vector<StepId> deps = std::move(src_deps);
      deps.insert(deps.end(), dst_deps.begin(), dst_deps.end());
      return plan_.copy(to.transfers.get(), to.context, src, src_offset, dst, dst_offset, bytes,
                        std::move(deps));
    }
    // Host relay through the next staging region (one chunk each), once its last write is done.
    std::size_t region = next_region_++ % region_count();
    unsigned char* host = staging_base() + region * chunk_bytes_;
    if (region_last_write_.size() <= region) region_last_write_.resize(region + 1, kNone);
    if (region_last_write_[region] != kNone) src_deps.push_back(region_last_write_[region]);
    StepId read = plan_.read(from.outgoing.get(), from.context, src, src_offset, host, bytes,
                             std::move(src_deps));
    dst_deps.push_back(read);
    StepId write = plan_.write(to.transfers.get(), to.context, host, dst, dst_offset, bytes,
                               std::move(dst_deps));
    region_last_write_[region] = write;
    return write;
  }

  // out[out_element ..] := reduction of rank r's own values and its scratch slots, on r's queue.
  StepId reduce(int r, int dtype, int op, cl_mem own, std::uint64_t own_element, cl_mem scratch,
                std::uint64_t slot_base, cl_mem out, std::uint64_t out_element,
                std::uint64_t elements, std::vector<StepId> deps) {
    Device& device = call_.device(r);
    const char* options = correctly_rounded_division(device)
                              ? "-cl-fp32-correctly-rounded-divide-sqrt"
                              : "";
    Kernel& kernel = device.programs().kernel("collectives", reduce_kernel_name(dtype), options);
    auto ranks = static_cast<cl_uint>(call_.size());
    auto rank = static_cast<cl_uint>(r);
    auto stride = static_cast<cl_ulong>(chunk_elements());
    LaunchRecord record = make_launch(
        kernel, ops::linear_geometry(device, kernel, elements), own,
        static_cast<cl_ulong>(own_element), scratch, static_cast<cl_ulong>(slot_base), stride,
        rank, ranks, out, static_cast<cl_ulong>(out_element), static_cast<cl_ulong>(elements),
        static_cast<cl_int>(op));
    auto launch = [record](cl_command_queue queue, cl_uint wait_count, const cl_event* waits,
                           cl_event* event) {
      submit_launch(queue, record, event, wait_count, waits);
    };
    return plan_.kernel(call_.stream(r).queue(), context(r), launch, std::move(deps));
  }

  // Scratch slots of rank r: kScratchSlots rounds x P ranks x one chunk.
  cl_mem scratch(int r) {
    return call_.comm().scratch(r, kScratchSlots * static_cast<std::uint64_t>(call_.size()) *
                                       chunk_bytes_);
  }
  // First element of slot (round, peer) in the scratch.
  std::uint64_t slot_base(std::uint64_t round) const {
    return (round % kScratchSlots) * static_cast<std::uint64_t>(call_.size()) * chunk_elements();
  }

  // Enqueues everything and orders every device's later work (its current stream) after it. The host path waits
  // until all transfers have finished (its staging is reused by the next call).
  void run() {
    plan_.run();
    for (int r = 0; r < call_.size(); ++r) {
      for (cl_event event : plan_.tails(context(r))) {
        call_.device(r).wait_for_event(call_.stream(r), event);
      }
    }
    if (call_.comm().path() == PeerPath::kHost && next_region_ > 0) plan_.finish();
  }

 private:
  static constexpr StepId kNone = ~StepId{0};

  cl_context context(int r) { return call_.comm().rank(r).context; }
  std::size_t region_count() const { return 2 * static_cast<std::size_t>(call_.size()) * 4; }
  unsigned char* staging_base() {
    if (staging_ == nullptr) staging_ = call_.comm().staging(region_count() * chunk_bytes_);
    return staging_;
  }
  static bool correctly_rounded_division(const Device& device) {
    cl_device_fp_config config = 0;
    if (clGetDeviceInfo(device.info().id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof(config), &config,
                        nullptr) != CL_SUCCESS) {
      return false;
    }
    return (config & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
  }

  CommCall& call_;
  std::uint64_t element_size_;
  std::uint64_t chunk_bytes_;
  TransferPlan plan_;
  std::vector<StepId> start_;
  unsigned char* staging_ = nullptr;
  std::size_t next_region_ = 0;
  std::vector<StepId> region_last_write_;
};

std::uint64_t checked_bytes(std::uint64_t count, std::uint64_t element_size,
                            std::uint64_t multiple, const char* what) {
  auto elements = checked_mul(count, multiple);
  auto bytes = elements ? checked_mul(*elements, element_size) : std::nullopt;
  if (!bytes) {
    fail(Status::kInvalidArgument, "count {} x {} elements of {} bytes ({}) overflows 64 bits",
         count, multiple, element_size, what);
  }
  return *bytes;
}

void require_array(void* const* array, const char* name) {
  if (array == nullptr) fail(Status::kInvalidArgument, "{} is NULL", name);
}

void require_distinct(void* const* send, void* const* recv, int ranks) {
  for (int r = 0; r < ranks; ++r) {
    if (send[r] == recv[r]) {
      fail(Status::kInvalidArgument, "send[{}] and recv[{}] are the same buffer ({})", r, r,
           send[r]);
    }
  }
}

// The reduce-scatter phase: rank r reduces block r (blocks[r], in elements of src) of every
// rank's src into out[r] at out_first[r]. Returns the reduction steps of each rank, chunk by
// chunk.
std::vector<std::vector<StepId>> reduce_blocks(PlanBuilder& builder, CommCall& call,
                                               const std::vector<cl_mem>& src,
                                               const std::vector<cl_mem>& out,
                                               const std::vector<Range>& blocks,
                                               const std::vector<std::uint64_t>& out_first,
                                               int dtype, int op) {
  int ranks = call.size();
  std::vector<std::vector<Range>> chunks(static_cast<std::size_t>(ranks));
  std::size_t rounds = 0;
  for (int r = 0; r < ranks; ++r) {
    chunks[r] = chunks_of(blocks[r], builder.chunk_elements());
    rounds = std::max(rounds, chunks[r].size());
  }
  std::vector<std::vector<StepId>> reduced(static_cast<std::size_t>(ranks));
  std::vector<cl_mem> scratch;
  for (int r = 0; r < ranks; ++r) scratch.push_back(builder.scratch(r));
  for (std::size_t k = 0; k < rounds; ++k) {
    for (int r = 0; r < ranks; ++r) {
      if (k >= chunks[r].size()) continue;
      Range chunk = chunks[r][k];
      std::uint64_t base = builder.slot_base(k);
      std::vector<StepId> inputs{builder.start(r)};
      // The slot is free once the reduction that used it kScratchSlots rounds ago has run.
      std::vector<StepId> slot_free{builder.start(r)};
      if (k >= kScratchSlots) slot_free.push_back(reduced[r][k - kScratchSlots]);
      for (int j = 0; j < ranks; ++j) {
        if (j == r) continue;
        inputs.push_back(builder.transfer(
            j, src[j], chunk.begin, r, scratch[r],
            base + static_cast<std::uint64_t>(j) * builder.chunk_elements(), chunk.count,
            {builder.start(j)}, slot_free));
      }
      std::uint64_t out_element = out_first[r] + (chunk.begin - blocks[r].begin);
      reduced[r].push_back(builder.reduce(r, dtype, op, src[r], chunk.begin, scratch[r], base,
                                          out[r], out_element, chunk.count, std::move(inputs)));
    }
  }
  return reduced;
}

}  // namespace

void* comm_create(int count, const int* gpu_indices) {
  MultiDeviceCall call;
  Runtime& runtime = call.runtime();
  const auto& visible = visible_devices();
  if (count < 1) fail(Status::kInvalidArgument, "count {} must be at least 1", count);
  if (static_cast<std::size_t>(count) > visible.size()) {
    fail(Status::kInvalidArgument, "count {} exceeds the {} visible devices", count,
         visible.size());
  }
  if (gpu_indices == nullptr) fail(Status::kInvalidArgument, "gpu_indices is NULL");
  if (!any_initialized(runtime)) {
    fail(Status::kNotInitialized, "no device is initialised (call initialize_gpu for each of "
         "gpu_indices first)");
  }
  std::vector<Device*> devices;
  for (int i = 0; i < count; ++i) {
    int index = gpu_indices[i];
    for (int j = 0; j < i; ++j) {
      if (gpu_indices[j] == index) {
        fail(Status::kInvalidArgument, "gpu_indices[{}] = {} repeats gpu_indices[{}]", i, index,
             j);
      }
    }
    if (index < 0 || static_cast<std::size_t>(index) >= visible.size()) {
      fail(Status::kNoDevice, "gpu_indices[{}] = {} is out of range; the devices are: {}", i,
           index, describe_devices(visible));
    }
    if (!runtime.is_initialized(index)) {
      fail(Status::kNotInitialized, "gpu_indices[{}] = {} is not initialised (call "
           "initialize_gpu({}) first)", i, index, index);
    }
    devices.push_back(&runtime.resolve(index));
  }
  bool shared = std::all_of(devices.begin(), devices.end(), [&](const Device* device) {
    return device->context() == devices[0]->context();
  });
  bool all_cpu = std::all_of(devices.begin(), devices.end(), [](const Device* device) {
    return device->info().kind == DeviceKind::kCpu;
  });
  PeerPath path = choose_peer_path(shared, all_cpu);
  EngineWish wish = engine_wish();
  std::string why_no_engine = devices.size() > 1 ? "AETHERCL_PEER_PATH asks for an OpenCL path"
                                                 : "one device moves nothing";
  std::unique_ptr<vendor::EngineComm> engine;
  if (wish != EngineWish::kOff && devices.size() > 1) {
    engine = make_engine_comm(devices, wish == EngineWish::kRequired, why_no_engine);
    if (!engine && wish == EngineWish::kRequired) {
      fail(Status::kNotImplemented, "{}=engine, but the vendor engines cannot serve these "
           "devices: {}", env::kPeerPath, why_no_engine);
    }
  }
  std::vector<CommRank> ranks;
  for (Device* device : devices) {
    CommRank rank;
    rank.device_index = device->index();
    rank.context = device->context();
    rank.device = device->info().id;
    for (cl::Queue* queue : {&rank.transfers, &rank.outgoing}) {
      cl_int status = CL_SUCCESS;
      *queue = cl::Queue(clCreateCommandQueue(rank.context, rank.device, 0, &status));
      cl::check(status, "clCreateCommandQueue (communicator transfers)");
    }
    ranks.push_back(std::move(rank));
  }
  std::string members;
  for (Device* device : devices) {
    members += fmt::format("{}{}", members.empty() ? "" : ", ", device->index());
  }
  if (engine) {
    log().info("communicator over devices [{}]: engine path ({}); {} path for MAX and MIN",
               members, engine->description(), peer_path_name(path));
  } else {
    log().info("communicator over devices [{}]: {} path", members, peer_path_name(path));
    log().debug("communicator over devices [{}]: no vendor engines: {}", members, why_no_engine);
  }
  auto comm = std::make_shared<Communicator>(std::move(ranks), path);
  comm->set_engine(std::move(engine));
  return runtime.comms().insert(std::move(comm));
}

void comm_destroy(void* comm) {
  MultiDeviceCall call;
  require_initialized(call.runtime(), comm);
  auto removed = call.runtime().comms().remove(comm, "comm");
  std::lock_guard lock(removed->mutex());
  removed->finish();
}

void all_reduce(void* comm, void* const* buffers, std::size_t count, int dtype, int op) {
  CommCall call(comm);
  require_array(buffers, "buffers");
  std::uint64_t element_size = collective_element_size(dtype);
  check_reduce_op(op);
  std::uint64_t bytes = checked_bytes(count, element_size, 1, "buffers");
  int ranks = call.size();
  std::vector<cl_mem> mems;
  for (int r = 0; r < ranks; ++r) mems.push_back(call.buffer(buffers, "buffers", r, bytes));
  call.require_engine_across_processes(op);
  if (count == 0 || call.global_size() == 1) return;
  if (vendor::EngineComm* engine = call.engine(op)) {
    const vendor::Nccl& nccl = engine->nccl();
    int nccl_type = nccl_dtype(dtype);
    int nccl_op = nccl_reduce_op(op);
    NcclCall all_reduce_call = [&](void* from, void* to, vendor::ncclComm_t nccl_comm,
                                   vendor::CUstream stream) {
      return nccl.ncclAllReduce(from, to, count, nccl_type, nccl_op, nccl_comm, stream);
    };
    if (auto in_place = engine_addresses(*engine, mems)) {
      if (run_in_place(call.comm(), call.streams(), "ncclAllReduce", *in_place, *in_place,
                       all_reduce_call)) return;
    } else {
      auto plan = call.staging_plan();
      for (int r = 0; r < ranks; ++r) {
        plan[r].in.push_back({mems[r], 0, 0, bytes});
        plan[r].out.push_back({mems[r], 0, 0, bytes});
      }
      if (run_on_engine(call.comm(), std::move(plan), bytes, "ncclAllReduce",
                        all_reduce_call)) return;
    }
  }
  PlanBuilder builder(call, element_size);
  std::uint64_t block = (count + ranks - 1) / ranks;
  std::vector<Range> blocks;
  for (int r = 0; r < ranks; ++r) {
    std::uint64_t begin = std::min<std::uint64_t>(count, block * r);
    blocks.push_back({begin, std::min<std::uint64_t>(count - begin, block)});
  }
  std::vector<std::uint64_t> out_first;
  for (const Range& range : blocks) out_first.push_back(range.begin);
  auto reduced = reduce_blocks(builder, call, mems, mems, blocks, out_first, dtype, op);
  // All-gather of the reduced blocks: rank r pulls chunk k of block j once j has reduced it (the
  // reduction also waited for every read of r's block j, so the overwrite is safe).
  std::vector<std::vector<Range>> chunks;
  std::size_t rounds = 0;
  for (const Range& range : blocks) {
    chunks.push_back(chunks_of(range, builder.chunk_elements()));
    rounds = std::max(rounds, chunks.back().size());
  }
  for (std::size_t k = 0; k < rounds; ++k) {
    for (int r = 0; r < ranks; ++r) {
      for (int j = 0; j < ranks; ++j) {
        if (j == r || k >= reduced[j].size()) continue;
        Range chunk = chunks[j][k];
        builder.transfer(j, mems[j], chunk.begin, r, mems[r], chunk.begin, chunk.count,
                         {reduced[j][k]}, {builder.start(r)});
      }
    }
  }
  builder.run();
}

void reduce_scatter(void* comm, void* const* send, void* const* recv, std::size_t count,
                    int dtype, int op) {
  CommCall call(comm);
  require_array(send, "send");
  require_array(recv, "recv");
  std::uint64_t element_size = collective_element_size(dtype);
  check_reduce_op(op);
  int ranks = call.size();
  int global = call.global_size();
  std::uint64_t send_bytes = checked_bytes(count, element_size, global, "send");
  std::uint64_t recv_bytes = count * element_size;
  std::vector<cl_mem> sends;
  std::vector<cl_mem> recvs;
  for (int r = 0; r < ranks; ++r) {
    sends.push_back(call.buffer(send, "send", r, send_bytes));
    recvs.push_back(call.buffer(recv, "recv", r, recv_bytes));
  }
  require_distinct(send, recv, ranks);
  call.require_engine_across_processes(op);
  if (count == 0) return;
  vendor::EngineComm* engine = global > 1 ? call.engine(op) : nullptr;
  if (engine != nullptr) {
    const vendor::Nccl& nccl = engine->nccl();
    int nccl_type = nccl_dtype(dtype);
    int nccl_op = nccl_reduce_op(op);
    NcclCall reduce_scatter_call = [&](void* from, void* to, vendor::ncclComm_t nccl_comm,
                                       vendor::CUstream stream) {
      return nccl.ncclReduceScatter(from, to, count, nccl_type, nccl_op, nccl_comm, stream);
    };
    auto in_sends = engine_addresses(*engine, sends);
    auto in_recvs = engine_addresses(*engine, recvs);
    if (in_sends && in_recvs) {
      if (run_in_place(call.comm(), call.streams(), "ncclReduceScatter", *in_sends, *in_recvs,
                       reduce_scatter_call)) return;
    } else {
      auto plan = call.staging_plan();
      for (int r = 0; r < ranks; ++r) {
        plan[r].in.push_back({sends[r], 0, 0, send_bytes});
        plan[r].out.push_back({recvs[r], 0, recv_bytes * call.global_rank(r), recv_bytes});
        // In place: rank r's result lands in its own block of the staging.
        plan[r].recv_offset = recv_bytes * call.global_rank(r);
      }
      if (run_on_engine(call.comm(), std::move(plan), send_bytes, "ncclReduceScatter",
                        reduce_scatter_call)) return;
    }
  }
  PlanBuilder builder(call, element_size);
  if (ranks == 1) {
    builder.transfer(0, sends[0], 0, 0, recvs[0], 0, count, {builder.start(0)}, {});
  } else {
    std::vector<Range> blocks;
    for (int r = 0; r < ranks; ++r) blocks.push_back({count * r, count});
    reduce_blocks(builder, call, sends, recvs, blocks, std::vector<std::uint64_t>(ranks, 0),
                  dtype, op);
  }
  builder.run();
}

void all_gather(void* comm, void* const* send, void* const* recv, std::size_t count, int dtype) {
  CommCall call(comm);
  require_array(send, "send");
  require_array(recv, "recv");
  std::uint64_t element_size = collective_element_size(dtype);
  int ranks = call.size();
  int global = call.global_size();
  std::uint64_t recv_bytes = checked_bytes(count, element_size, global, "recv");
  std::uint64_t send_bytes = count * element_size;
  std::vector<cl_mem> sends;
  std::vector<cl_mem> recvs;
  for (int r = 0; r < ranks; ++r) {
    sends.push_back(call.buffer(send, "send", r, send_bytes));
    recvs.push_back(call.buffer(recv, "recv", r, recv_bytes));
  }
  require_distinct(send, recv, ranks);
  call.require_engine_across_processes();
  if (count == 0) return;
  vendor::EngineComm* engine = global > 1 ? call.engine() : nullptr;
  if (engine != nullptr) {
    const vendor::Nccl& nccl = engine->nccl();
    int nccl_type = nccl_dtype(dtype);
    NcclCall all_gather_call = [&](void* from, void* to, vendor::ncclComm_t nccl_comm,
                                   vendor::CUstream stream) {
      return nccl.ncclAllGather(from, to, count, nccl_type, nccl_comm, stream);
    };
    auto in_sends = engine_addresses(*engine, sends);
    auto in_recvs = engine_addresses(*engine, recvs);
    if (in_sends && in_recvs) {
      if (run_in_place(call.comm(), call.streams(), "ncclAllGather", *in_sends, *in_recvs,
                       all_gather_call)) return;
    } else {
      auto plan = call.staging_plan();
      for (int r = 0; r < ranks; ++r) {
        plan[r].in.push_back({sends[r], 0, send_bytes * call.global_rank(r), send_bytes});
        plan[r].out.push_back({recvs[r], 0, 0, recv_bytes});
        // In place: rank r's contribution already sits in its own block of the staging.
        plan[r].send_offset = send_bytes * call.global_rank(r);
      }
      if (run_on_engine(call.comm(), std::move(plan), recv_bytes, "ncclAllGather",
                        all_gather_call)) return;
    }
  }
  PlanBuilder builder(call, element_size);
  std::vector<Range> chunks = chunks_of({0, count}, builder.chunk_elements());
  for (const Range& chunk : chunks) {
    for (int r = 0; r < ranks; ++r) {
      for (int j = 0; j < ranks; ++j) {
        builder.transfer(j, sends[j], chunk.begin, r, recvs[r], count * j + chunk.begin,
                         chunk.count, {builder.start(j)}, {builder.start(r)});
      }
    }
  }
  builder.run();
}

void broadcast(void* comm, void* const* buffers, std::size_t count, int dtype, int root) {
  CommCall call(comm);
  require_array(buffers, "buffers");
  std::uint64_t element_size = collective_element_size(dtype);
  int ranks = call.size();
  if (root < 0 || root >= call.global_size()) {
    fail(Status::kInvalidArgument, "root {} is not a rank of this communicator (0 .. {})", root,
         call.global_size() - 1);
  }
  std::uint64_t bytes = checked_bytes(count, element_size, 1, "buffers");
  std::vector<cl_mem> mems;
  for (int r = 0; r < ranks; ++r) mems.push_back(call.buffer(buffers, "buffers", r, bytes));
  call.require_engine_across_processes();
  if (count == 0 || call.global_size() == 1) return;
  if (vendor::EngineComm* engine = call.engine()) {
    const vendor::Nccl& nccl = engine->nccl();
    int nccl_type = nccl_dtype(dtype);
    NcclCall broadcast_call = [&](void* from, void* to, vendor::ncclComm_t nccl_comm,
                                  vendor::CUstream stream) {
      return nccl.ncclBroadcast(from, to, count, nccl_type, root, nccl_comm, stream);
    };
    if (auto in_place = engine_addresses(*engine, mems)) {
      if (run_in_place(call.comm(), call.streams(), "ncclBroadcast", *in_place, *in_place,
                       broadcast_call)) return;
    } else {
      auto plan = call.staging_plan();
      for (int r = 0; r < ranks; ++r) {
        if (call.global_rank(r) == root) {
          plan[r].in.push_back({mems[r], 0, 0, bytes});
        } else {
          plan[r].out.push_back({mems[r], 0, 0, bytes});
        }
      }
      if (run_on_engine(call.comm(), std::move(plan), bytes, "ncclBroadcast",
                        broadcast_call)) return;
    }
  }
  PlanBuilder builder(call, element_size);
  // A pipeline along root, root+1, ...: each rank forwards a chunk once it has arrived.
  for (const Range& chunk : chunks_of({0, count}, builder.chunk_elements())) {
    StepId arrived = builder.start(root);
    for (int i = 1; i < ranks; ++i) {
      int from = (root + i - 1) % ranks;
      int to = (root + i) % ranks;
      std::vector<StepId> src_deps{builder.start(from), arrived};
      arrived = builder.transfer(from, mems[from], chunk.begin, to, mems[to], chunk.begin,
                                 chunk.count, std::move(src_deps), {builder.start(to)});
    }
  }
  builder.run();
}

}  // namespace aethercl::multi
