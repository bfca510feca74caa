// Device set-up and teardown, streams, and the memory that follows streams.
#include "runtime/device.h"

#include "cl/cl_error.h"
#include "runtime/bounds_check.h"
#include "runtime/tracer.h"
#include "support/env.h"
#include "support/log.h"

#include <algorithm>
#include <atomic>

namespace aethercl {
namespace {

bool event_complete(cl_event event) {
  cl_int status = CL_COMPLETE;
  clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr);
  return status <= CL_COMPLETE;
}

// Where the submission thread is on by default: GPUs, whose enqueue calls cost the caller
// microseconds (NVIDIA); not CPU runtimes, where the thread would compete with the kernels for
// the same cores (docs/PERFORMANCE.md has the measurements).
bool submission_thread_by_default(const DeviceInfo& info) { return info.kind == DeviceKind::kGpu; }

// Reads through the pinned staging ring where that measured faster than the vendor's own path
// into pageable memory (docs/PERFORMANCE.md): mid-sized reads on GPUs; CPU runtimes copy host
// memory directly, so a ring would only add a copy.
bool ring_reads_by_default(const DeviceInfo& info) { return info.kind == DeviceKind::kGpu; }

// PoCL keeps its own compiled-kernel cache and specialises a kernel's work-group function for
// each local size at its first launch; a program created from a PoCL binary instead runs the
// generic (any local size) work-group function the binary carries, for every launch. With kernel
// binaries from this cache the llm.py step measured slower on PoCL (docs/PERFORMANCE.md), so PoCL
// devices use the cache only when AETHERCL_CACHE=1 asks for it.
bool runtime_caches_kernels_itself(const DeviceInfo& info) {
  return info.platform_name.find("Portable Computing Language") != std::string::npos ||
         info.device_version.find("PoCL") != std::string::npos;
}

BinaryCache disk_cache_for(const DeviceInfo& info) {
  BinaryCache cache = BinaryCache::from_environment();
  if (!cache.enabled() || !runtime_caches_kernels_itself(info)) return cache;
  return env::flag(env::kCache, false) ? cache : BinaryCache(cache.directory(), false);
}

}  // namespace

Device::Device(int index, const DeviceInfo& info, cl_context shared_context)
    : index_(index),
      info_(info),
      disk_cache_(disk_cache_for(info)),
      kernel_log_(env::flag(env::kKernelLog, true)),
      sync_every_call_(env::flag(env::kSync, false)) {
  if (shared_context != nullptr) {
    context_ = cl::Context(shared_context);  // adopted first thing: released on every path
    shares_context_ = true;
  } else {
    cl_int status = CL_SUCCESS;
    cl_context_properties properties[] = {
        CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(info_.platform), 0};
    context_ = cl::Context(clCreateContext(properties, 1, &info_.id, nullptr, nullptr, &status));
    cl::check(status, "clCreateContext");
  }
  profiling_ = Tracer::instance().active();
  streams_.push_back(
      std::make_unique<Stream>(index_, 0, nullptr, create_queue(profiling_), false, profiling_));
  std::uint64_t limit = info_.global_mem_bytes;
  if (auto cap = env::bytes(env::kMemoryLimit, 1)) limit = std::min(limit, *cap);
  pool_ = std::make_unique<MemoryPool>(context_.get(), limit, info_.max_alloc_bytes,
                                       env::flag(env::kPool, true));
  pool_->set_before_release([this] { drain(); });
  if (env::flag(env::kCheckBounds, false)) {
    bounds_ = std::make_unique<BoundsCheck>();
    log().debug("device {}: {} guard bytes after every buffer ({})", index_,
                BoundsCheck::kGuardBytes, env::kCheckBounds);
  }
  programs_ = std::make_unique<ProgramCache>(info_, context_.get(), disk_cache_);
  auto read_path = env::get(env::kReadPath);
  if (read_path && (*read_path == "pinned" || *read_path == "direct")) {
    read_path_ = *read_path == "pinned" ? ReadPath::kRing : ReadPath::kDirect;
  } else {
    if (read_path) {
      log().warn("{}='{}' is neither 'pinned' nor 'direct'; using the device's default",
                 env::kReadPath, *read_path);
    }
    read_path_ = ring_reads_by_default(info_) ? ReadPath::kRingForMidSizes : ReadPath::kDirect;
  }
  if (env::flag(env::kSubmitThread, submission_thread_by_default(info_))) {
    submitter_ = std::make_unique<Submitter>([this](const Command& command, const Error& error) {
      defer_error(error.status(), fmt::format("an earlier {} failed when it was enqueued: {}",
                                              command.what(), error.what()));
    });
  }
  log().debug("device {}: submission thread {}, reads {}", index_, submitter_ ? "on" : "off",
              read_path_ == ReadPath::kDirect ? "direct" : "through the pinned ring");
}

Device::~Device() {
  if (submitter_) submitter_->drain();
  submitter_.reset();
  for (auto& stream : streams_) clFinish(stream->queue());
  wait_for_retired_streams();
  ring_.reset();
  last_event_.reset();
  kernel_log_.clear();
  bounds_.reset();
  extensions_.clear();
  programs_.reset();
  pool_.reset();
  timing_scratch_.reset();
  streams_.clear();
  interop_queues_.clear();
  context_.reset();
}

cl::Queue Device::create_queue(bool profiling) {
  cl_int status = CL_SUCCESS;
  cl::Queue queue(clCreateCommandQueue(context_.get(), info_.id,
                                       profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &status));
  cl::check(status, "clCreateCommandQueue");
  return queue;
}

void Device::enable_profiling() {
  if (profiling_) return;
  // Everything issued so far finishes on the old queues, so stream order is kept.
  synchronize();
  for (auto& stream : streams_) {
    if (!stream->profiling()) stream->replace_queue(create_queue(true), true);
  }
  profiling_ = true;
}

void Device::disable_profiling() {
  if (!profiling_) return;
  synchronize();
  for (auto& stream : streams_) {
    if (stream->profiling() && !stream->timing()) stream->replace_queue(create_queue(false), false);
  }
  profiling_ = false;
}

Stream* Device::find_stream(std::uint64_t id) {
  for (auto& stream : streams_) {
    if (stream->id() == id) return stream.get();
  }
  return nullptr;
}

Stream& Device::current_stream() {
  std::uint64_t id = current_stream_id(index_);
  if (id == 0) return default_stream();
  Stream* stream = find_stream(id);
  return stream != nullptr ? *stream : default_stream();
}

Stream& Device::create_stream(std::uint64_t id, void* token, bool timing) {
  bool profiling = timing || profiling_;
  streams_.push_back(
      std::make_unique<Stream>(index_, id, token, create_queue(profiling), timing, profiling));
  return *streams_.back();
}

void Device::destroy_stream(Stream& stream) {
  if (stream.is_default()) fail(Status::kInternal, "the default stream cannot be destroyed");
  std::uint64_t id = stream.id();
  cl::Event retired = record_event(stream);
  pool_->retire_stream(id, retired.get());
  retired_.erase(std::remove_if(retired_.begin(), retired_.end(),
                                [](const auto& entry) { return event_complete(entry.second.get()); }),
                 retired_.end());
  retired_.emplace_back(id, std::move(retired));
  // Releasing the queue lets the work already issued on it complete (OpenCL keeps the queue
  // until then).
  streams_.erase(std::find_if(streams_.begin(), streams_.end(),
                              [&](const auto& entry) { return entry.get() == &stream; }));
}

void Device::free_block(PoolBlock block, const std::vector<std::uint64_t>& used_on) {
  if (keep_for_graphs(block, used_on)) return;  // a graph names it: freed with the graph
  std::vector<cl::Event> events;
  auto wait_for_stream = [&](std::uint64_t id) {
    if (Stream* stream = find_stream(id)) {
      events.push_back(record_event(*stream));
      return;
    }
    for (auto& [retired_id, event] : retired_) {
      if (retired_id == id && !event_complete(event.get())) {
        cl::check(clRetainEvent(event.get()), "clRetainEvent");
        events.emplace_back(event.get());
      }
    }
  };
  for (std::uint64_t id : used_on) {
    if (id != block.stream) wait_for_stream(id);
  }
  // Engine memory goes back to its engine, not to a stream: its home stream's work must finish
  // first as well.
  if (block.external) wait_for_stream(block.stream);
  if (block.stream != 0 && find_stream(block.stream) == nullptr) {
    // Its home stream was destroyed: once that stream's work is done, any stream may reuse it.
    wait_for_stream(block.stream);
    block.stream = kAnyStream;
  }
  pool_->release(block, std::move(events));
}

PinnedRing& Device::ring() {
  // Staged writes up to kMaxStagedWrite of Device::write and pinned reads share this ring.
  constexpr std::uint64_t kRingBytes = 32ull << 20;
  if (!ring_) ring_ = std::make_unique<PinnedRing>(context_.get(), default_stream().queue(), kRingBytes);
  return *ring_;
}

void Device::defer_error(Status status, std::string message) {
  std::lock_guard lock(deferred_mutex_);
  if (!deferred_) deferred_.emplace(status, std::move(message));
}

void Device::raise_deferred_error() {
  std::optional<Error> error;
  {
    std::lock_guard lock(deferred_mutex_);
    error.swap(deferred_);
  }
  if (error) throw *error;
}

}  // namespace aethercl
