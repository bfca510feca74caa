// Peer copies through cuMemcpyPeerAsync on per-device staging.
#include "multi/engine_peer_copy.h"

#include "cl/cl_error.h"
#include "runtime/runtime.h"
#include "support/env.h"
#include "support/error.h"
#include "support/log.h"
#include "vendor/cl_import.h"
#include "vendor/current_context.h"
#include "vendor/device_match.h"
#include "vendor/engine_memory.h"
#include "vendor/engines.h"
#include "vendor/shared_buffer.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

namespace aethercl::multi {
namespace {

constexpr std::uint64_t kPeerChunk = 256ull << 20;

// One device's side: its CUDA context and stream and its staging. Used under the device's lock.
class PeerSide {
 public:
  PeerSide(const vendor::CudaDriver& cuda, int ordinal, cl_context context, cl_device_id device)
      : cuda_(cuda), ordinal_(ordinal), cl_context_(context), cl_device_(device) {
    vendor::CurrentContext current(cuda);
    vendor::cuda_check(cuda, cuda.cuDeviceGet(&device_, ordinal), "cuDeviceGet", "peer copy");
    vendor::cuda_check(cuda, cuda.cuDevicePrimaryCtxRetain(&context_, device_),
                       "cuDevicePrimaryCtxRetain", "peer copy");
    try {
      current.set(context_);
      vendor::cuda_check(cuda, cuda.cuStreamCreate(&stream_, 1), "cuStreamCreate", "peer copy");
    } catch (...) {
      cuda.cuDevicePrimaryCtxRelease(device_);
      throw;
    }
  }
  PeerSide(const PeerSide&) = delete;
  PeerSide& operator=(const PeerSide&) = delete;
  ~PeerSide() {
    vendor::CurrentContext current(cuda_);
    cuda_.cuCtxSetCurrent(context_);
    cuda_.cuStreamSynchronize(stream_);
    wait_pending_noexcept();
    staging_.reset();
    cuda_.cuStreamDestroy(stream_);
    cuda_.cuDevicePrimaryCtxRelease(device_);
  }

  cl_context cl_context_of() const { return cl_context_; }
  int ordinal() const { return ordinal_; }
  vendor::CUcontext context() const { return context_; }
  vendor::CUstream stream() const { return stream_; }

  vendor::SharedBuffer& staging(std::uint64_t bytes) {
    if (staging_ && staging_->bytes() >= bytes) return *staging_;
    wait_pending();
    vendor::CurrentContext current(cuda_);
    current.set(context_);
    staging_.reset();
    // Every CUDA device may be the other end of a later copy.
    int count = 0;
    if (cuda_.cuDeviceGetCount(&count) != vendor::kCudaSuccess) count = 0;
    std::vector<int> peers;
    for (int peer = 0; peer < count; ++peer) peers.push_back(peer);
    staging_ = std::make_unique<vendor::SharedBuffer>(cuda_, ordinal_, peers, cl_context_,
                                                      cl_device_, bytes);
    return *staging_;
  }
  void add_pending(cl::Event event) { pending_.push_back(std::move(event)); }
  void wait_pending() {
    cl_int status = CL_SUCCESS;
    for (cl::Event& event : pending_) {
      cl_event handle = event.get();
      status = clWaitForEvents(1, &handle);
      if (status != CL_SUCCESS) break;
    }
    pending_.clear();
    cl::check(status, "clWaitForEvents (copy out of the peer staging)");
  }

 private:
  void wait_pending_noexcept() noexcept {
    for (cl::Event& event : pending_) {
      cl_event handle = event.get();
      clWaitForEvents(1, &handle);
    }
    pending_.clear();
  }

  const vendor::CudaDriver& cuda_;
  int ordinal_;
  cl_context cl_context_;
  cl_device_id cl_device_;
  vendor::CUdevice device_ = 0;
  vendor::CUcontext context_ = nullptr;
  vendor::CUstream stream_ = nullptr;
  std::unique_ptr<vendor::SharedBuffer> staging_;
  std::vector<cl::Event> pending_;
};

// Per device index: its side, or nullptr when the engines do not serve it (kept so the match is
// made once per device and context).
struct SideEntry {
  cl_context context = nullptr;
  std::unique_ptr<PeerSide> side;
};

struct PeerEngines {
  std::mutex mutex;
  std::map<int, SideEntry> sides;
  std::set<std::pair<int, int>> failed;  // (from, to) pairs left to the OpenCL path
  bool hook = false;
};

PeerEngines& peer_engines() {
  static PeerEngines* engines = new PeerEngines;  // never destroyed: outlives static teardown
  return *engines;
}

// The side of device, created on first use; nullptr when the engines do not serve it.
PeerSide* side_of(const vendor::CudaDriver& cuda, Device& device, std::string& why) {
  PeerEngines& engines = peer_engines();
  std::lock_guard lock(engines.mutex);
  if (!engines.hook) {
    Runtime::instance().add_shutdown_hook([] {
      PeerEngines& all = peer_engines();
      std::lock_guard hook_lock(all.mutex);
      all.sides.clear();
      all.failed.clear();
    });
    engines.hook = true;
  }
  auto found = engines.sides.find(device.index());
  if (found != engines.sides.end() && found->second.context == device.context()) {
    if (!found->second.side) why = fmt::format("device {} is not served", device.index());
    return found->second.side.get();
  }
  SideEntry entry;
  entry.context = device.context();
  auto ordinal = vendor::cuda_ordinal_of(cuda, device.info().id, device.index());
  if (!ordinal) {
    why = fmt::format("device {} ({}) is not a CUDA device", device.index(), device.info().name);
  } else if (!vendor::can_import(cuda, device.info().id)) {
    why = fmt::format("device {} cannot import CUDA memory into OpenCL", device.index());
  } else {
    entry.side = std::make_unique<PeerSide>(cuda, *ordinal, device.context(), device.info().id);
  }
  PeerSide* side = entry.side.get();
  engines.sides[device.index()] = std::move(entry);
  return side;
}

void forget(Device& to, Device& from) noexcept {
  PeerEngines& engines = peer_engines();
  std::lock_guard lock(engines.mutex);
  engines.sides.erase(to.index());
  engines.sides.erase(from.index());
  engines.failed.insert({from.index(), to.index()});
}

bool pair_failed(Device& to, Device& from) {
  PeerEngines& engines = peer_engines();
  std::lock_guard lock(engines.mutex);
  return engines.failed.count({from.index(), to.index()}) != 0;
}

cl::Event copy_buffer(cl_command_queue queue, cl_mem src, std::uint64_t src_offset, cl_mem dst,
                      std::uint64_t dst_offset, std::uint64_t bytes, const char* what) {
  cl_event event = nullptr;
  cl::check(clEnqueueCopyBuffer(queue, src, dst, src_offset, dst_offset, bytes, 0, nullptr,
                                &event),
            what);
  return cl::Event(event);
}

}  // namespace

bool copy_peer_on_engine(Device& to, Stream& to_stream, cl_mem dst, std::uint64_t dst_offset,
                         Device& from, Stream& from_stream, cl_mem src, std::uint64_t src_offset,
                         std::uint64_t size, bool required) {
  const vendor::Engines& engines = vendor::engines();
  std::string why = engines.why_not;
  PeerSide* source = nullptr;
  PeerSide* target = nullptr;
  if (engines.cuda != nullptr && !pair_failed(to, from)) {
    try {
      source = side_of(*engines.cuda, from, why);
      target = source != nullptr ? side_of(*engines.cuda, to, why) : nullptr;
    } catch (const Error& error) {
      forget(to, from);
      if (required) throw;
      log().warn("peer copy {} -> {}: the vendor engines failed ({}); this pair takes the OpenCL "
                 "path from now on", from.index(), to.index(), error.what());
      return false;
    }
  } else if (engines.cuda != nullptr) {
    why = "an earlier CUDA failure between these devices";
  }
  if (source == nullptr || target == nullptr) {
    if (required) {
      fail(Status::kNotImplemented, "{}=engine, but the vendor engines cannot copy from device "
           "{} to device {}: {}", env::kPeerPath, from.index(), to.index(), why);
    }
    return false;
  }
  const vendor::CudaDriver& cuda = *engines.cuda;
  try {
    auto from_address = vendor::engine_address(src);
    auto to_address = vendor::engine_address(dst);
    if (from_address && to_address && from_address->ordinal == source->ordinal() &&
        to_address->ordinal == target->ordinal()) {
      // Both are engine memory (aethercl_comm_alloc): one peer copy between them, ordered by
      // host waits like the collectives in place.
      cl::check(clFinish(from_stream.queue()), "clFinish (before the peer copy)");
      cl::check(clFinish(to_stream.queue()), "clFinish (before the peer copy)");
      vendor::CurrentContext current(cuda);
      current.set(source->context());
      vendor::cuda_check(cuda, cuda.cuMemcpyPeerAsync(to_address->pointer + dst_offset,
                                                      target->context(),
                                                      from_address->pointer + src_offset,
                                                      source->context(), size, source->stream()),
                         "cuMemcpyPeerAsync", "peer copy");
      vendor::cuda_check(cuda, cuda.cuStreamSynchronize(source->stream()), "cuStreamSynchronize",
                         "peer copy");
      return true;
    }
    // A chunk is at most the first OpenCL piece of each staging (vendor/shared_buffer.h).
    std::uint64_t chunk = std::min({size, kPeerChunk, vendor::import_piece_bytes()});
    vendor::SharedBuffer& out = source->staging(chunk);
    vendor::SharedBuffer& in = target->staging(chunk);
    const vendor::SharedBuffer::Piece out_piece = out.pieces(0, chunk).front();
    const vendor::SharedBuffer::Piece in_piece = in.pieces(0, chunk).front();
    chunk = std::min({chunk, out_piece.bytes, in_piece.bytes});
    source->wait_pending();
    target->wait_pending();
    vendor::CurrentContext current(cuda);
    for (std::uint64_t done = 0; done < size; done += chunk) {
      std::uint64_t bytes = std::min(chunk, size - done);
      copy_buffer(from_stream.queue(), src, src_offset + done, out_piece.mem, 0, bytes,
                  "clEnqueueCopyBuffer (into the peer staging)");
      cl::check(clFinish(from_stream.queue()), "clFinish (copy into the peer staging)");
      current.set(source->context());
      vendor::cuda_check(cuda, cuda.cuMemcpyPeerAsync(in.device_pointer(), target->context(),
                                                      out.device_pointer(), source->context(),
                                                      bytes, source->stream()),
                         "cuMemcpyPeerAsync", "peer copy");
      vendor::cuda_check(cuda, cuda.cuStreamSynchronize(source->stream()), "cuStreamSynchronize",
                         "peer copy");
      cl::Event landed = copy_buffer(to_stream.queue(), in_piece.mem, 0, dst, dst_offset + done,
                                     bytes, "clEnqueueCopyBuffer (out of the peer staging)");
      if (done + bytes < size) {
        cl::check(clFinish(to_stream.queue()), "clFinish (copy out of the peer staging)");
      } else {
        target->add_pending(std::move(landed));
      }
    }
    clFlush(to_stream.queue());
  } catch (const Error& error) {
    log().warn("peer copy {} -> {}: the vendor engines failed ({}); this pair takes the OpenCL "
               "path from now on", from.index(), to.index(), error.what());
    forget(to, from);
    // src is unchanged (it never overlaps dst): the OpenCL path redoes the whole copy.
    if (required) throw;
    return false;
  }
  return true;
}

}  // namespace aethercl::multi
