// cl_khr_command_buffer replay: the extension's functions resolved per platform, one recorded and
// finalised command buffer per queue a graph is launched on.
// The extension's types and the version query are OpenCL 3.0 names; this file alone sees them
// (a runtime without them answers the query with an error, and replays go through batches).
#define CL_TARGET_OPENCL_VERSION 300
#include "runtime/graph_command_buffer.h"

#include "cl/cl_error.h"
#include "runtime/graph.h"
#include "support/env.h"
#include "support/error.h"
#include "support/log.h"

#include <CL/cl_ext.h>

#include <map>
#include <mutex>
#include <string>

namespace aethercl {

struct CommandBufferApi {
  clCreateCommandBufferKHR_fn create = nullptr;
  clFinalizeCommandBufferKHR_fn finalize = nullptr;
  clReleaseCommandBufferKHR_fn release = nullptr;
  clEnqueueCommandBufferKHR_fn enqueue = nullptr;
  clCommandNDRangeKernelKHR_fn kernel = nullptr;
  clCommandCopyBufferKHR_fn copy = nullptr;
  clCommandFillBufferKHR_fn fill = nullptr;
};

// What a kCommandBuffer command points to: the command buffer, the queue it was recorded for
// (retained), its platform's enqueue function, and the kernel objects its launches use.
struct RecordedCommandBuffer {
  cl_command_queue queue = nullptr;
  cl_command_buffer_khr buffer = nullptr;
  clEnqueueCommandBufferKHR_fn enqueue = nullptr;
  std::vector<cl::Kernel> kernels;
};

namespace {

// A kernel object of its own for one recorded launch, its arguments bound once. The extension
// says a command captures the arguments when it is recorded, but PoCL 3.1 reads them from the
// kernel object when the command buffer runs (measured: a replay after an eager call of the same
// kernel used the eager call's buffers), so no recorded launch may share the driver's kernels.
cl::Kernel private_kernel(const LaunchRecord& launch) {
  cl_program program = nullptr;
  cl::check(clGetKernelInfo(launch.kernel->get(), CL_KERNEL_PROGRAM, sizeof program, &program,
                            nullptr),
            "clGetKernelInfo");
  cl_int status = CL_SUCCESS;
  cl::Kernel kernel(clCreateKernel(program, launch.kernel->name.c_str(), &status));
  cl::check(status, "clCreateKernel");
  for (std::size_t i = 0; i < launch.args.count(); ++i) {
    LaunchArgs::Arg arg = launch.args[i];
    cl::check(clSetKernelArg(kernel.get(), static_cast<cl_uint>(i), arg.size, arg.value),
              "clSetKernelArg");
  }
  return kernel;
}

// The extension version whose function signatures cl_ext.h declares here. Later provisional
// versions changed them (properties arguments), so other versions are not called.
constexpr cl_version kSupportedVersion = CL_MAKE_VERSION(0, 9, 0);

bool device_has_supported_version(cl_device_id device) {
  std::size_t bytes = 0;
  if (clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS_WITH_VERSION, 0, nullptr, &bytes) != CL_SUCCESS)
    return false;
  std::vector<cl_name_version> extensions(bytes / sizeof(cl_name_version));
  if (clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS_WITH_VERSION, bytes, extensions.data(),
                      nullptr) != CL_SUCCESS)
    return false;
  for (const cl_name_version& extension : extensions) {
    if (std::string(extension.name) == CL_KHR_COMMAND_BUFFER_EXTENSION_NAME)
      return extension.version == kSupportedVersion;
  }
  return false;
}

bool simultaneous_use(cl_device_id device) {
  cl_device_command_buffer_capabilities_khr caps = 0;
  cl_command_queue_properties required = 0;
  if (clGetDeviceInfo(device, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR, sizeof caps, &caps,
                      nullptr) != CL_SUCCESS ||
      clGetDeviceInfo(device, CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR,
                      sizeof required, &required, nullptr) != CL_SUCCESS)
    return false;
  // Our queues are in-order with at most profiling on: required properties rule it out.
  return (caps & CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR) != 0 && required == 0;
}

template <typename F>
F resolve(cl_platform_id platform, const char* name) {
  return reinterpret_cast<F>(clGetExtensionFunctionAddressForPlatform(platform, name));
}

// The API for a device, or nullptr where replays go through batches (decided once per device).
const CommandBufferApi* api_for(const DeviceInfo& info) {
  static std::mutex mutex;
  static std::map<cl_device_id, std::unique_ptr<CommandBufferApi>> known;
  std::lock_guard lock(mutex);
  auto it = known.find(info.id);
  if (it != known.end()) return it->second.get();
  std::unique_ptr<CommandBufferApi> api;
  if (device_has_supported_version(info.id) && simultaneous_use(info.id)) {
    api = std::make_unique<CommandBufferApi>();
    api->create = resolve<clCreateCommandBufferKHR_fn>(info.platform, "clCreateCommandBufferKHR");
    api->finalize = resolve<clFinalizeCommandBufferKHR_fn>(info.platform, "clFinalizeCommandBufferKHR");
    api->release = resolve<clReleaseCommandBufferKHR_fn>(info.platform, "clReleaseCommandBufferKHR");
    api->enqueue = resolve<clEnqueueCommandBufferKHR_fn>(info.platform, "clEnqueueCommandBufferKHR");
    api->kernel = resolve<clCommandNDRangeKernelKHR_fn>(info.platform, "clCommandNDRangeKernelKHR");
    api->copy = resolve<clCommandCopyBufferKHR_fn>(info.platform, "clCommandCopyBufferKHR");
    api->fill = resolve<clCommandFillBufferKHR_fn>(info.platform, "clCommandFillBufferKHR");
    if (!api->create || !api->finalize || !api->release || !api->enqueue || !api->kernel ||
        !api->copy || !api->fill) {
      api.reset();
    }
  }
  log().debug("{}: graph replays {}", info.name,
              api ? "through cl_khr_command_buffer 0.9.0" : "in batches");
  return (known[info.id] = std::move(api)).get();
}

}  // namespace

std::unique_ptr<GraphCommandBuffers> GraphCommandBuffers::for_graph(const DeviceInfo& info,
                                                                    const Graph& graph) {
  if (!env::flag(env::kGraphCommandBuffer, true) || graph.commands().empty()) return nullptr;
  for (const Command& command : graph.commands()) {
    bool holdable = command.kind == Command::Kind::kLaunch ||
                    command.kind == Command::Kind::kCopy || command.kind == Command::Kind::kFill;
    if (!holdable) return nullptr;  // host transfers: the batch path
  }
  const CommandBufferApi* api = api_for(info);
  if (api == nullptr) return nullptr;
  return std::unique_ptr<GraphCommandBuffers>(new GraphCommandBuffers(*api));
}

GraphCommandBuffers::GraphCommandBuffers(const CommandBufferApi& api) : api_(api) {}

GraphCommandBuffers::~GraphCommandBuffers() {
  for (auto& recorded : buffers_) {
    api_.release(recorded->buffer);
    clReleaseCommandQueue(recorded->queue);
  }
}

void* GraphCommandBuffers::find(cl_command_queue queue) const {
  for (const auto& recorded : buffers_) {
    if (recorded->queue == queue) return recorded.get();
  }
  return nullptr;
}

void* GraphCommandBuffers::record(const Graph& graph, cl_command_queue queue) {
  const cl_command_buffer_properties_khr properties[] = {
      CL_COMMAND_BUFFER_FLAGS_KHR, CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR, 0};
  cl_int status = CL_SUCCESS;
  cl_command_buffer_khr buffer = api_.create(1, &queue, properties, &status);
  cl::check(status, "clCreateCommandBufferKHR");
  auto recorded = std::make_unique<RecordedCommandBuffer>();
  recorded->buffer = buffer;
  recorded->enqueue = api_.enqueue;
  try {
    // Each command waits for the one before (sync points), as on the in-order queue.
    cl_sync_point_khr previous = 0;
    bool first = true;
    for (const Command& c : graph.commands()) {
      cl_sync_point_khr point = 0;
      const cl_uint waits = first ? 0 : 1;
      const cl_sync_point_khr* wait_list = first ? nullptr : &previous;
      switch (c.kind) {
        case Command::Kind::kLaunch: {
          recorded->kernels.push_back(private_kernel(c.launch));
          const LaunchGeometry& g = c.launch.geometry;
          cl::check(api_.kernel(buffer, nullptr, nullptr, recorded->kernels.back().get(),
                                g.dimensions,
                                nullptr, g.global.data(),
                                g.runtime_picks_local ? nullptr : g.local.data(), waits,
                                wait_list, &point, nullptr),
                    "clCommandNDRangeKernelKHR");
          break;
        }
        case Command::Kind::kCopy:
          cl::check(api_.copy(buffer, nullptr, c.source_mem, c.mem, c.source_offset, c.offset,
                              c.size, waits, wait_list, &point, nullptr),
                    "clCommandCopyBufferKHR");
          break;
        case Command::Kind::kFill:
          cl::check(api_.fill(buffer, nullptr, c.mem, &c.pattern, 1, c.offset, c.size, waits,
                              wait_list, &point, nullptr),
                    "clCommandFillBufferKHR");
          break;
        default:
          fail(Status::kInternal, "a {} cannot be recorded into a command buffer", c.what());
      }
      previous = point;
      first = false;
    }
    cl::check(api_.finalize(buffer), "clFinalizeCommandBufferKHR");
  } catch (...) {
    api_.release(buffer);
    throw;
  }
  buffers_.push_back(std::move(recorded));  // may throw: the queue is retained after it
  if (cl_int retained = clRetainCommandQueue(queue); retained != CL_SUCCESS) {
    api_.release(buffer);
    buffers_.pop_back();
    cl::check(retained, "clRetainCommandQueue");
  }
  buffers_.back()->queue = queue;
  return buffers_.back().get();
}

void enqueue_command_buffer(void* command_buffer, cl_command_queue queue, cl_event* event) {
  auto* recorded = static_cast<RecordedCommandBuffer*>(command_buffer);
  cl::check(recorded->enqueue(1, &queue, recorded->buffer, 0, nullptr, event),
            "clEnqueueCommandBufferKHR");
}

}  // namespace aethercl
