// Interop: the OpenCL objects behind a device, a stream and a buffer token.
#pragma once

#include "runtime/device_call.h"

namespace aethercl::ops {

cl_context cl_context_of(DeviceScope& scope);
cl_command_queue cl_queue_of(DeviceCall& call, void* stream);
cl_mem cl_mem_of(DeviceCall& call, void* buffer);

}  // namespace aethercl::ops
