// One OpenCL context per platform for the visible CPU devices of that platform, so that buffers of
// one device can be copied to another by the device (peer copies, collectives); GPUs and
// single-device platforms keep a context of their own unless AETHERCL_SHARED_CONTEXT=1.
//
// Contract: used under the runtime's lifecycle lock (exclusive) only.
#pragma once

#include "cl/handle.h"
#include "runtime/device_info.h"

#include <map>
#include <vector>

namespace aethercl {

class SharedContexts {
 public:
  // The context device `index` of `visible` should use: a new reference the caller owns, or
  // nullptr when the device gets a context of its own (the only visible device of its platform,
  // a GPU without AETHERCL_SHARED_CONTEXT=1, or AETHERCL_SHARED_CONTEXT=0). Throws Error(kDeviceError) when the runtime refuses the context.
  cl_context acquire(const std::vector<DeviceInfo>& visible, int index);
  // Drops the runtime's references (shutdown); devices still holding one keep theirs alive.
  void clear() noexcept { contexts_.clear(); }

 private:
  std::map<cl_platform_id, cl::Context> contexts_;
};

}  // namespace aethercl
