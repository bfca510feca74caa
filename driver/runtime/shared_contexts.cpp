// Per-platform shared contexts: created on the first initialised device of a platform with
// several visible devices, holding all of them (in visible order).
#include "runtime/shared_contexts.h"

#include "cl/cl_error.h"
#include "support/env.h"
#include "support/log.h"

namespace aethercl {

cl_context SharedContexts::acquire(const std::vector<DeviceInfo>& visible, int index) {
  const DeviceInfo& device = visible.at(static_cast<std::size_t>(index));
  // Default: shared on CPU platforms (PoCL's devices copy from each other's buffers), a context
  // per GPU: NVIDIA's OpenCL migrates whole buffers between the devices of one context instead of
  // copying, and ran a GPU's step 13 % slower in a shared context (docs/MANY_DEVICES.md).
  bool cpu = device.kind == DeviceKind::kCpu;
  if (!env::flag(env::kSharedContext, cpu)) return nullptr;
  std::vector<cl_device_id> members;
  for (const DeviceInfo& other : visible) {
    if (other.platform == device.platform) members.push_back(other.id);
  }
  if (members.size() < 2) return nullptr;
  auto it = contexts_.find(device.platform);
  if (it == contexts_.end()) {
    cl_int status = CL_SUCCESS;
    cl_context_properties properties[] = {
        CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(device.platform), 0};
    cl::Context context(clCreateContext(properties, static_cast<cl_uint>(members.size()),
                                        members.data(), nullptr, nullptr, &status));
    cl::check(status, "clCreateContext (shared by the platform's devices)");
    log().info("one context for the {} visible devices of platform '{}'", members.size(),
               device.platform_name);
    it = contexts_.emplace(device.platform, std::move(context)).first;
  }
  cl::check(clRetainContext(it->second.get()), "clRetainContext");
  return it->second.get();
}

}  // namespace aethercl
