// aethercl_copy_peer: a device copy inside one context (the target device pulls, the source device
// waits for the pull before its later work), else a host relay in chunks with two reads in flight.
#include "multi/collectives.h"

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

BufferView span(MultiDeviceCall& call, int device_index, void* handle, const char* argument,
                std::size_t offset, std::size_t size) {
  BufferView view = call.buffer(device_index, handle, argument, 0);
  auto end = checked_add(offset, size);
  if (!end) fail(Status::kOutOfRange, "{}_offset {} + size {} overflows", argument, offset, size);
  if (*end > view.size) {
    fail(Status::kOutOfRange, "{}_offset {} + size {} = {} bytes runs past the end of {} ({} bytes)",
         argument, offset, size, *end, argument, view.size);
  }
  return view;
}

}  // namespace

void copy_peer(int dst_gpu, void* dst, std::size_t dst_offset, int src_gpu, void* src,
               std::size_t src_offset, std::size_t size) {
  MultiDeviceCall call;
  Device& to = call.runtime().resolve(dst_gpu);
  Device& from = call.runtime().resolve(src_gpu);
  call.lock({&to, &from});
  BufferView target = span(call, to.index(), dst, "dst", dst_offset, size);
  BufferView source = span(call, from.index(), src, "src", src_offset, size);
  if (dst == src && size > 0 && dst_offset < src_offset + size && src_offset < dst_offset + size) {
    fail(Status::kInvalidArgument,
         "src and dst are one buffer and the ranges [{}, {}) and [{}, {}) overlap", src_offset,
         src_offset + size, dst_offset, dst_offset + size);
  }
  if (size == 0) return;
  TransferPlan plan;
  if (&to == &from) {
    plan.copy(to.queue(), to.context(), source.mem, src_offset, target.mem, dst_offset, size, {});
    plan.run();
    to.wait_for(plan.tails(to.context()), "device copy");
    return;
  }
  bool shared = to.context() == from.context();
  if (choose_peer_path(shared) == PeerPath::kDevice) {
    StepId ready = plan.marker(from.queue(), from.context());
    plan.copy(to.queue(), to.context(), source.mem, src_offset, target.mem, dst_offset, size,
              {ready});
    plan.run();
    // Later writes to src on its own device wait until the target has pulled it.
    from.wait_for(plan.tails(from.context()), "peer copy");
    return;
  }
  std::uint64_t chunk = std::min<std::uint64_t>(size, kRelayChunk);
  std::size_t regions = std::min<std::size_t>(kRelayRegions, (size + chunk - 1) / chunk);
  auto host = std::make_unique<unsigned char[]>(chunk * regions);
  std::vector<StepId> last_write(regions, ~StepId{0});
  std::size_t index = 0;
  for (std::uint64_t done = 0; done < size; done += chunk, ++index) {
    std::uint64_t bytes = std::min<std::uint64_t>(chunk, size - done);
    std::size_t region = index % regions;
    std::vector<StepId> deps;
    if (last_write[region] != ~StepId{0}) deps.push_back(last_write[region]);
    unsigned char* staging = host.get() + region * chunk;
    StepId read = plan.read(from.queue(), from.context(), source.mem, src_offset + done, staging,
                            bytes, std::move(deps));
    last_write[region] = plan.write(to.queue(), to.context(), staging, target.mem,
                                    dst_offset + done, bytes, {read});
  }
  plan.run();
  plan.finish();  // the staging is freed on return
}

}  // namespace aethercl::multi
