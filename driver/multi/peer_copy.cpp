// aethercl_copy_peer: through the vendor engines between two CUDA devices
// (multi/engine_peer_copy.h), else a device copy inside one context (the target device pulls, the
// source device waits for the pull before its later work), else a relay through pinned host memory
// in chunks, up to four in flight.
#include "multi/collectives.h"

#include "cl/cl_error.h"

#include "multi/engine_peer_copy.h"
#include "multi/multi_call.h"
#include "multi/peer_path.h"
#include "multi/transfer_plan.h"
#include "support/checked.h"

#include <algorithm>
#include <memory>

namespace aethercl::multi {
namespace {

constexpr std::uint64_t kRelayChunk = 8ull << 20;
constexpr std::size_t kRelayRegions = 4;

BufferView span(MultiDeviceCall& call, int device_index, std::uint64_t stream_id, void* handle,
                const char* argument, std::size_t offset, std::size_t size) {
  BufferView view = call.buffer(device_index, stream_id, handle, argument, 0);
  auto end = checked_add(offset, size);
  if (!end) fail(Status::kOutOfRange, "{}_offset {} + size {} overflows", argument, offset, size);
  if (*end > view.size) {
    fail(Status::kOutOfRange, "{}_offset {} + size {} = {} bytes runs past the end of {} ({} bytes)",
         argument, offset, size, *end, argument, view.size);
  }
  return view;
}

// Page-locked host memory for one relay: a CL_MEM_ALLOC_HOST_PTR buffer of the source's context,
// mapped for the life of the object.
class PinnedStaging {
 public:
  PinnedStaging(Device& owner, cl_command_queue queue, std::uint64_t bytes) : queue_(queue) {
    cl_int status = CL_SUCCESS;
    mem_ = cl::Mem(clCreateBuffer(owner.context(), CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                                  bytes, nullptr, &status));
    if (status != CL_SUCCESS) {
      fail(Status::kOutOfMemory, "pinned host staging of {} bytes cannot be allocated ({})",
           bytes, cl::error_name(status));
    }
    host_ = clEnqueueMapBuffer(queue_, mem_.get(), CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes,
                               0, nullptr, nullptr, &status);
    cl::check(status, "clEnqueueMapBuffer (relay staging)");
  }
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  ~PinnedStaging() {
    cl_event event = nullptr;
    if (clEnqueueUnmapMemObject(queue_, mem_.get(), host_, 0, nullptr, &event) == CL_SUCCESS) {
      clWaitForEvents(1, &event);
      clReleaseEvent(event);
    }
  }
  unsigned char* data() { return static_cast<unsigned char*>(host_); }

 private:
  cl_command_queue queue_;
  cl::Mem mem_;
  void* host_ = nullptr;
};

}  // namespace

void copy_peer(int dst_gpu, void* dst, std::size_t dst_offset, int src_gpu, void* src,
               std::size_t src_offset, std::size_t size) {
  MultiDeviceCall call;
  Device& to = call.runtime().resolve(dst_gpu);
  Device& from = call.runtime().resolve(src_gpu);
  call.lock({&to, &from});
  Stream& to_stream = MultiDeviceCall::drained_current_stream(to);
  Stream& from_stream = &to == &from ? to_stream : MultiDeviceCall::drained_current_stream(from);
  BufferView target = span(call, to.index(), to_stream.id(), dst, "dst", dst_offset, size);
  BufferView source = span(call, from.index(), from_stream.id(), src, "src", src_offset, size);
  if (dst == src && size > 0 && dst_offset < src_offset + size && src_offset < dst_offset + size) {
    fail(Status::kInvalidArgument,
         "src and dst are one buffer and the ranges [{}, {}) and [{}, {}) overlap", src_offset,
         src_offset + size, dst_offset, dst_offset + size);
  }
  if (size == 0) return;
  TransferPlan plan;
  if (&to == &from) {
    to.copy(to_stream, source.mem, src_offset, target.mem, dst_offset, size);
    return;
  }
  bool shared = to.context() == from.context();
  bool all_cpu = to.info().kind == DeviceKind::kCpu && from.info().kind == DeviceKind::kCpu;
  EngineWish wish = engine_wish();
  if (wish != EngineWish::kOff &&
      copy_peer_on_engine(to, to_stream, target.mem, dst_offset, from, from_stream, source.mem,
                          src_offset, size, wish == EngineWish::kRequired)) {
    return;
  }
  if (choose_peer_path(shared, all_cpu) == PeerPath::kDevice) {
    StepId ready = plan.marker(from_stream.queue(), from.context());
    plan.copy(to_stream.queue(), to.context(), source.mem, src_offset, target.mem, dst_offset,
              size, {ready});
    plan.run();
    // Later writes to src on its own stream wait until the target has pulled it.
    for (cl_event event : plan.tails(from.context())) from.wait_for_event(from_stream, event);
    return;
  }
  std::uint64_t chunk = std::min<std::uint64_t>(size, kRelayChunk);
  std::size_t regions = std::min<std::size_t>(kRelayRegions, (size + chunk - 1) / chunk);
  PinnedStaging pinned(from, from_stream.queue(), chunk * regions);
  unsigned char* host_base = pinned.data();
  std::vector<StepId> last_write(regions, ~StepId{0});
  std::size_t index = 0;
  for (std::uint64_t done = 0; done < size; done += chunk, ++index) {
    std::uint64_t bytes = std::min<std::uint64_t>(chunk, size - done);
    std::size_t region = index % regions;
    std::vector<StepId> deps;
    if (last_write[region] != ~StepId{0}) deps.push_back(last_write[region]);
    unsigned char* staging = host_base + region * chunk;
    StepId read = plan.read(from_stream.queue(), from.context(), source.mem, src_offset + done,
                            staging, bytes, std::move(deps));
    last_write[region] = plan.write(to_stream.queue(), to.context(), staging, target.mem,
                                    dst_offset + done, bytes, {read});
  }
  plan.run();
  plan.finish();  // the staging is freed on return
}

}  // namespace aethercl::multi
