// The driver's OpenCL objects for other OpenCL code (PyOpenCL, CLBlast, the caller's own).
#include "ops/interop.h"


namespace aethercl::ops {

cl_context cl_context_of(DeviceScope& scope) { return scope.device().context(); }

cl_command_queue cl_queue_of(DeviceCall& call, void* stream) {
  Stream& target = call.resolve_stream(stream, "stream");
  call.device().refuse_during_capture(
      target, "aethercl_cl_queue hands out the queue, and work enqueued on it directly would not "
              "be recorded");
  return call.device().queue_for_interop(target);
}

cl_mem cl_mem_of(DeviceCall& call, void* buffer) { return call.buffer(buffer, "buffer", 0).mem; }

}  // namespace aethercl::ops
