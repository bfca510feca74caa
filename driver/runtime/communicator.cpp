// Communicator resources and the communicator token registry.
#include "runtime/communicator.h"

#include "cl/cl_error.h"
#include "runtime/token_table.h"
#include "support/error.h"
#include "support/log.h"
#include "vendor/engine_comm.h"

namespace aethercl {
namespace {

constexpr std::uintptr_t kTag = token_tag::kComm;

}  // namespace

const char* peer_path_name(PeerPath path) noexcept {
  return path == PeerPath::kDevice ? "device" : "host";
}

Communicator::Communicator(std::vector<CommRank> ranks, PeerPath path)
    : ranks_(std::move(ranks)), path_(path) {}

Communicator::~Communicator() {
  finish();
  engine_.reset();
  release_staging();
}

void Communicator::set_engine(std::unique_ptr<vendor::EngineComm> engine) {
  engine_ = std::move(engine);
}

void Communicator::drop_engine(const std::string& why) noexcept {
  if (!engine_) return;
  engine_failure_ = why;
  if (spans_processes()) {
    log().warn("communicator: the vendor engines failed ({}); it has no other path between "
               "processes: its collectives fail from now on", why);
  } else {
    log().warn("communicator: the vendor engines failed ({}); its collectives take the {} path "
               "from now on", why, peer_path_name(path_));
  }
  finish();
  engine_.reset();
}

void Communicator::finish() noexcept {
  for (CommRank& r : ranks_) {
    if (r.transfers) clFinish(r.transfers.get());
    if (r.outgoing) clFinish(r.outgoing.get());
  }
}

cl_mem Communicator::scratch(int r, std::uint64_t bytes) {
  CommRank& target = rank(r);
  if (target.scratch && target.scratch_bytes >= bytes) return target.scratch.get();
  // The old slots may still be read by queued reductions: the queues finish first.
  finish();
  target.scratch.reset();
  target.scratch_bytes = 0;
  cl_int status = CL_SUCCESS;
  cl::Mem mem(clCreateBuffer(target.context, CL_MEM_READ_WRITE, bytes, nullptr, &status));
  if (status == CL_MEM_OBJECT_ALLOCATION_FAILURE || status == CL_OUT_OF_RESOURCES ||
      status == CL_OUT_OF_HOST_MEMORY || status == CL_INVALID_BUFFER_SIZE) {
    fail(Status::kOutOfMemory, "the communicator's scratch of {} bytes on device {} cannot be "
         "allocated ({})", bytes, target.device_index, cl::error_name(status));
  }
  cl::check(status, "clCreateBuffer (collective scratch)");
  target.scratch = std::move(mem);
  target.scratch_bytes = bytes;
  return target.scratch.get();
}

unsigned char* Communicator::staging(std::uint64_t bytes) {
  if (staging_ && staging_bytes_ >= bytes) return static_cast<unsigned char*>(staging_host_);
  finish();
  release_staging();
  CommRank& first = rank(0);
  cl_int status = CL_SUCCESS;
  cl::Mem mem(clCreateBuffer(first.context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes,
                             nullptr, &status));
  if (status != CL_SUCCESS) {
    fail(Status::kOutOfMemory, "pinned host staging of {} bytes cannot be allocated ({})", bytes,
         cl::error_name(status));
  }
  void* host = clEnqueueMapBuffer(first.transfers.get(), mem.get(), CL_TRUE,
                                  CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0, nullptr, nullptr,
                                  &status);
  cl::check(status, "clEnqueueMapBuffer (pinned staging)");
  staging_ = std::move(mem);
  staging_host_ = host;
  staging_bytes_ = bytes;
  return static_cast<unsigned char*>(host);
}

void Communicator::release_staging() noexcept {
  if (staging_ && staging_host_ != nullptr) {
    cl_event event = nullptr;
    if (clEnqueueUnmapMemObject(rank(0).transfers.get(), staging_.get(), staging_host_, 0, nullptr,
                                &event) == CL_SUCCESS) {
      clWaitForEvents(1, &event);
      clReleaseEvent(event);
    }
  }
  staging_.reset();
  staging_host_ = nullptr;
  staging_bytes_ = 0;
}

void* CommRegistry::insert(std::shared_ptr<Communicator> comm) {
  std::lock_guard lock(mutex_);
  std::uint64_t id = next_id_++;
  comms_.emplace(id, std::move(comm));
  return reinterpret_cast<void*>((static_cast<std::uintptr_t>(id) << 8) | kTag);
}

std::uint64_t CommRegistry::decode(const void* token, const char* argument) const {
  auto raw = reinterpret_cast<std::uintptr_t>(token);
  if (raw == 0) fail(Status::kInvalidArgument, "{} is NULL", argument);
  if ((raw & 0xFF) != kTag) {
    if (const char* other = describe_token_tag(static_cast<std::uint8_t>(raw & 0xFF))) {
      fail(Status::kInvalidHandle, "{} ({}) is {}, not a communicator", argument, token, other);
    }
    fail(Status::kInvalidHandle, "{} ({}) is not a communicator issued by this driver", argument,
         token);
  }
  std::uint64_t id = raw >> 8;
  if (id == 0 || id >= next_id_) {
    fail(Status::kInvalidHandle, "{} ({}) was never issued by this driver", argument, token);
  }
  if (comms_.find(id) == comms_.end()) {
    fail(Status::kInvalidHandle,
         "{} ({}) was already destroyed (or released by shutdown_driver)", argument, token);
  }
  return id;
}

std::shared_ptr<Communicator> CommRegistry::find(const void* token, const char* argument) const {
  std::lock_guard lock(mutex_);
  return comms_.at(decode(token, argument));
}

std::shared_ptr<Communicator> CommRegistry::remove(const void* token, const char* argument) {
  std::lock_guard lock(mutex_);
  auto node = comms_.extract(decode(token, argument));
  return std::move(node.mapped());
}

std::vector<std::shared_ptr<Communicator>> CommRegistry::remove_all() {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<Communicator>> all;
  for (auto& [id, comm] : comms_) all.push_back(std::move(comm));
  comms_.clear();
  return all;
}

}  // namespace aethercl
