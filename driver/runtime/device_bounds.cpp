// AETHERCL_CHECK_BOUNDS on the device: client buffers' guards armed at allocation, compared at
// synchronising calls and at free (runtime/bounds_check.h).
#include "cl/cl_error.h"
#include "runtime/bounds_check.h"
#include "runtime/device.h"
#include "support/env.h"
#include "support/log.h"

namespace aethercl {

PoolBlock Device::allocate_buffer(Stream& stream, std::uint64_t size) {
  if (!bounds_) return allocate(stream, size);
  std::uint64_t guard = BoundsCheck::guard_for(size, info_.max_alloc_bytes);
  PoolBlock block = pool_->acquire(size + guard, stream.id());
  if (guard == 0) {
    log().debug("{}: a buffer of {} bytes fills the device's largest allocation; it has no guard",
                env::kCheckBounds, size);
    return block;
  }
  try {
    // Ordered on the home stream: after the work of a reused block's earlier owner, before any
    // command that uses the buffer. The pattern is static, so it goes as pinned (uncopied) memory.
    write(stream, block.mem, size, guard, BoundsCheck::pattern(), true);
    bounds_->track(block.mem, BoundsCheck::Guarded{size, guard, record_event(stream)});
  } catch (...) {
    discard_buffer(block);
    throw;
  }
  return block;
}

void Device::discard_buffer(PoolBlock block) noexcept {
  if (bounds_) bounds_->untrack(block.mem);
  if (block.external) {
    // No event names this buffer's last use: every stream finishes before its memory goes.
    try {
      drain();
    } catch (...) {
    }
    for (auto& stream : streams_) clFinish(stream->queue());
    wait_for_retired_streams();
  }
  pool_->release(block);
}

void Device::free_buffer(PoolBlock block, const std::vector<std::uint64_t>& used_on,
                         const std::string& name) {
  std::optional<BoundsCheck::Guarded> guarded;
  if (bounds_) guarded = bounds_->untrack(block.mem);
  if (!guarded || !guarded->touched) {
    free_block(block, used_on);
    return;
  }
  std::string report;
  try {
    // Every command that uses the buffer has run before its guard is read.
    drain();
    for (std::uint64_t id : used_on) {
      if (Stream* stream = find_stream(id)) cl::check(clFinish(stream->queue()), "clFinish");
    }
    Stream* home = find_stream(block.stream);
    if (home != nullptr) cl::check(clFinish(home->queue()), "clFinish");
    wait_for_retired_streams();
    std::vector<unsigned char> bytes(guarded->guard);
    cl_command_queue queue = home != nullptr ? home->queue() : default_stream().queue();
    cl::check(clEnqueueReadBuffer(queue, block.mem, CL_TRUE, guarded->size, guarded->guard,
                                  bytes.data(), 0, nullptr, nullptr),
              "clEnqueueReadBuffer");
    if (std::uint64_t overrun = BoundsCheck::overrun(bytes.data(), guarded->guard)) {
      report = bounds_->describe(block.mem, *guarded, overrun, name);
    }
  } catch (...) {
    free_block(block, used_on);
    throw;
  }
  // The block is re-armed when the pool hands it out again.
  free_block(block, used_on);
  if (!report.empty()) {
    log().error("{} (found when it was freed)", report);
    fail(Status::kOutOfRange, "{}: {}", env::kCheckBounds, report);
  }
}

void Device::set_buffer_namer(std::function<std::string(cl_mem)> namer) {
  if (bounds_) bounds_->set_namer(std::move(namer));
}

void Device::check_guards(Stream* only) {
  auto& guarded = bounds_->guarded();
  cl_command_queue queue = only != nullptr ? only->queue() : default_stream().queue();
  // Every guard that a launch took and whose fill has run is compared, whatever its home stream:
  // after a stream's synchronize, the buffers its kernels overran are among them unless another
  // stream is still filling them (the next full check catches those).
  std::vector<std::pair<cl_mem, BoundsCheck::Guarded*>> targets;
  std::uint64_t total = 0;
  for (auto& [mem, entry] : guarded) {
    if (!entry.touched || !BoundsCheck::armed(entry, only == nullptr)) continue;
    // A stream's check leaves the mark: kernels on other streams may still write.
    if (only == nullptr) entry.touched = false;
    targets.emplace_back(mem, &entry);
    total += entry.guard;
  }
  std::vector<unsigned char>& bytes = bounds_->read_buffer();
  bytes.resize(total);
  std::uint64_t offset = 0;
  for (auto& [mem, entry] : targets) {
    cl::check(clEnqueueReadBuffer(queue, mem, CL_FALSE, entry->size, entry->guard,
                                  bytes.data() + offset, 0, nullptr, nullptr),
              "clEnqueueReadBuffer");
    offset += entry->guard;
  }
  if (!targets.empty()) cl::check(clFinish(queue), "clFinish");
  std::vector<std::string> reports;
  offset = 0;
  for (auto& [mem, entry] : targets) {
    if (std::uint64_t overrun = BoundsCheck::overrun(bytes.data() + offset, entry->guard)) {
      reports.push_back(bounds_->describe(mem, *entry, overrun));
      log().error("{}", reports.back());
      // Re-armed, so that one overrun is reported once.
      cl::check(clEnqueueWriteBuffer(queue, mem, CL_FALSE, entry->size, entry->guard,
                                     BoundsCheck::pattern(), 0, nullptr, nullptr),
                "clEnqueueWriteBuffer");
    }
    offset += entry->guard;
  }
  if (!reports.empty()) cl::check(clFinish(queue), "clFinish");
  if (only == nullptr) bounds_->forget_launches();
  if (reports.empty()) return;
  std::string text = reports.front();
  for (std::size_t i = 1; i < reports.size(); ++i) text += "; and " + reports[i];
  fail(Status::kOutOfRange, "{}: {}", env::kCheckBounds, text);
}

}  // namespace aethercl
