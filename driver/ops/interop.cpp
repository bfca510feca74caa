// The driver's OpenCL objects for other OpenCL code (PyOpenCL, CLBlast, the caller's own).
#include "ops/interop.h"


namespace aethercl::ops {

cl_context cl_context_of(DeviceScope& scope) { return scope.device().context(); }

cl_command_queue cl_queue_of(DeviceCall& call, void* stream) {
  return call.device().queue_for_interop(call.resolve_stream(stream, "stream"));
}

cl_mem cl_mem_of(DeviceCall& call, void* buffer) { return call.buffer(buffer, "buffer", 0).mem; }

}  // namespace aethercl::ops
