// Device lifecycle and gpu_index resolution.
#include "runtime/runtime.h"

#include "runtime/graph.h"

#include "runtime/device_list.h"
#include "runtime/tracer.h"
#include "support/env.h"
#include "support/error.h"
#include "support/fork_state.h"
#include "support/log.h"
#include "support/process.h"

#include <cstdlib>
#include <mutex>

namespace aethercl {
namespace {

void trace_exit_hook() { Runtime::instance().write_trace_at_exit(); }

// Destroyed when the thread that holds it exits. The main thread's is destroyed inside exit()
// before any atexit handler or static destructor runs (thread-local destructors come first), so
// the queues are finished while the OpenCL runtime's libraries are still whole. (An atexit
// handler comes too late: PoCL's LLVM registers static destructors lazily, during the very
// compilations a queued launch may still be running, and those then run first.)
struct ExitFinisher {
  ~ExitFinisher() { Runtime::instance().finish_at_exit(); }
};

}  // namespace

Runtime& Runtime::instance() {
  static Runtime* runtime = new Runtime();
  return *runtime;
}

void Runtime::initialize(int gpu_index) {
  const auto& devices = enumerated_devices();
  if (devices.empty()) {
    fail(Status::kNoDevice,
         "no OpenCL device found (check that an ICD is installed under /etc/OpenCL/vendors, "
         "e.g. pocl-opencl-icd, and that {} does not exclude every device)",
         env::kDevices);
  }
  if (gpu_index < 0 || static_cast<std::size_t>(gpu_index) >= devices.size()) {
    fail(Status::kNoDevice, "gpu_index {} is out of range; the devices are: {}", gpu_index,
         describe_devices(devices));
  }
  std::unique_lock lock(lifecycle_mutex_);
  if (devices_.count(gpu_index) != 0) return;
  if (auto path = env::get(env::kTrace); path && !Tracer::instance().active()) {
    Tracer::instance().start(*path);
    traced_from_environment_ = true;
    trace_process_id_ = current_process_id();
    static const bool registered = std::atexit(&trace_exit_hook) == 0;
    if (!registered) {
      log().warn("{}: cannot register the exit hook; call shutdown_driver", env::kTrace);
    }
  }
  // The Device adopts the shared reference first thing, so it is released on every path.
  cl_context shared = shared_contexts_.acquire(devices, gpu_index);
  auto device = std::make_unique<Device>(gpu_index, devices[gpu_index], shared);
  device->set_buffer_namer(
      [this, gpu_index](cl_mem mem) { return buffers_.name_of(gpu_index, mem); });
  log().info("initialised device {}: {}", gpu_index, device->info().name);
  devices_.emplace(gpu_index, std::move(device));
  if (on_main_thread()) {
    static thread_local ExitFinisher finisher;
    (void)finisher;
  }
}

void Runtime::shutdown() noexcept {
  std::unique_lock lock(lifecycle_mutex_);
  std::size_t comms = 0;
  for (auto& comm : comms_.remove_all()) {
    comm.reset();  // finishes its transfer queues and releases them before the devices go
    ++comms;
  }
  if (comms > 0) log().info("shutdown released {} communicators still live", comms);
  {
    std::lock_guard hooks_lock(hooks_mutex_);
    for (auto& hook : shutdown_hooks_) {
      try {
        hook();
      } catch (const std::exception& error) {
        log().warn("shutdown: releasing per-device engine state failed: {}", error.what());
      }
    }
  }
  for (auto& [index, device] : devices_) {
    std::lock_guard device_lock(device->mutex());
    try {
      device->abandon_captures();  // a capture never ended: its graph is dropped
    } catch (const std::exception& error) {
      log().warn("shutdown: dropping the captures of device {} failed: {}", index, error.what());
    }
    try {
      device->synchronize();  // the submission thread drained, every stream finished
    } catch (const Error& error) {
      log().warn("shutdown: device {} reported a deferred error: {}", index, error.what());
    }
    int graph_device = index;
    auto graphs = graphs_.remove_if([&](const Graph& graph) {
      return graph.device_index() == graph_device;
    });
    for (auto& graph : graphs) {
      try {
        device->destroy_graph(*graph);
      } catch (const std::exception& error) {
        log().warn("shutdown: destroying a graph of device {} failed: {}", index, error.what());
      }
    }
    if (!graphs.empty()) {
      log().info("shutdown destroyed {} graphs of device {}", graphs.size(), index);
    }
    std::size_t leaked = 0;
    for (BufferRecord& record : buffers_.remove_device(index)) {
      device->discard_buffer(record.block);
      ++leaked;
    }
    if (leaked > 0) log().info("shutdown released {} buffers still registered on device {}",
                               leaked, index);
    int device_index = index;
    events_.remove_if([&](const EventRecord& event) { return event.device_index == device_index; });
    streams_.remove_if([&](const StreamEntry& stream) { return stream.device_index == device_index; });
    host_memory_.remove_device(index);
    auto on_device = [&](const auto& object) { return object.device_index == device_index; };
    std::size_t kernels = user_kernels_.remove_if(on_device).size();
    std::size_t programs = user_programs_.remove_if(on_device).size();
    if (kernels + programs > 0) {
      log().info("shutdown released {} user programs and {} user kernels of device {}", programs,
                 kernels, index);
    }
  }
  write_environment_trace();
  devices_.clear();  // each Device finishes its queue before releasing
  shared_contexts_.clear();
  warned_fallback_ = false;
}

void Runtime::add_shutdown_hook(std::function<void()> hook) {
  std::lock_guard lock(hooks_mutex_);
  shutdown_hooks_.push_back(std::move(hook));
}

void Runtime::write_environment_trace() noexcept {
  if (traced_from_environment_ && Tracer::instance().active()) {
    try {
      for (auto& [index, device] : devices_) {
        std::lock_guard device_lock(device->mutex());
        device->synchronize();
      }
      log().warn("trace written; per-kernel device time:\n{}", Tracer::instance().stop());
    } catch (const std::exception& error) {
      log().warn("could not write the trace: {}", error.what());
    }
  }
  traced_from_environment_ = false;
}

void Runtime::write_trace_at_exit() noexcept {
  std::unique_lock lock(lifecycle_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) {
    log().warn("{}: a call was still running at exit; the trace is not written", env::kTrace);
    return;
  }
  if (trace_process_id_ != current_process_id()) return;  // a forked child: the parent writes it
  write_environment_trace();
}

void Runtime::finish_at_exit() noexcept {
  if (forked_after_opencl_use()) return;  // the parent's OpenCL state is unusable here
  std::shared_lock lock(lifecycle_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // a shutdown or initialisation is running on another thread
  for (auto& [index, device] : devices_) {
    std::unique_lock device_lock(device->mutex(), std::try_to_lock);
    if (!device_lock.owns_lock()) continue;  // a call on another thread owns the device
    try {
      device->synchronize();
    } catch (const std::exception& error) {
      log().debug("device {}: work still queued at exit failed: {}", index, error.what());
    }
  }
}

void Runtime::finish_all() {
  std::shared_lock lock(lifecycle_mutex_);
  for (auto& [index, device] : devices_) {
    std::lock_guard device_lock(device->mutex());
    device->synchronize();
  }
}

void Runtime::enable_profiling_all() {
  std::shared_lock lock(lifecycle_mutex_);
  for (auto& [index, device] : devices_) {
    std::lock_guard device_lock(device->mutex());
    device->enable_profiling();
  }
}

void Runtime::disable_profiling_all() {
  std::shared_lock lock(lifecycle_mutex_);
  for (auto& [index, device] : devices_) {
    std::lock_guard device_lock(device->mutex());
    device->disable_profiling();
  }
}

void Runtime::require_any_device() const {
  if (devices_.empty()) {
    fail(Status::kNotInitialized,
         "no device is initialised (call initialize_gpu first; after shutdown_driver it must be "
         "called again)");
  }
}

Device& Runtime::device_of(int device_index) {
  auto it = devices_.find(device_index);
  if (it == devices_.end()) {
    fail(Status::kInternal, "a live token names device {}, which is not initialised",
         device_index);
  }
  return *it->second;
}

Device* Runtime::try_resolve(int gpu_index) noexcept {
  auto it = devices_.find(gpu_index);
  if (it != devices_.end()) return it->second.get();
  if (devices_.size() == 1) return devices_.begin()->second.get();
  return nullptr;
}

Device& Runtime::resolve(int gpu_index) {
  auto it = devices_.find(gpu_index);
  if (it != devices_.end()) return *it->second;
  if (devices_.empty()) {
    fail(Status::kNotInitialized,
         "no device is initialised (call initialize_gpu first; after shutdown_driver it must be "
         "called again)");
  }
  if (devices_.size() == 1) {
    Device& only = *devices_.begin()->second;
    if (!warned_fallback_.exchange(true)) {
      log().warn("gpu_index {} was never initialised; using the only initialised device {} ({})",
                 gpu_index, only.index(), only.info().name);
    }
    return only;
  }
  std::string initialised;
  for (const auto& [index, device] : devices_) {
    initialised += (initialised.empty() ? "" : ", ") + std::to_string(index);
  }
  fail(Status::kNotInitialized, "gpu_index {} is not initialised (initialised: {})", gpu_index,
       initialised);
}

}  // namespace aethercl
