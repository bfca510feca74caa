// A device-to-host read confirmed by an event callback (the AetherCL read-back): the read is
// enqueued non-blocking, a CL_COMPLETE callback records its execution status, and the caller
// waits for the event AND for the callback to have run (OpenCL does not promise the callback has
// run when clWaitForEvents or clFinish returns). Where clSetEventCallback answers
// CL_INVALID_OPERATION (Wine's opencl.dll), the finished event's execution status stands in.
#pragma once

#include "cl/opencl.h"

#include <chrono>
#include <cstdint>

namespace aethercl {

// Reads bytes [0, size) of mem into destination through the in-order queue. Returns once the
// bytes are in destination; throws Error when the read (or a command it waited for) failed, or
// when the callback does not run within callback_timeout after the event completed. In every
// case the device has stopped writing destination when this returns or throws.
void read_confirmed_by_callback(cl_command_queue queue, cl_mem mem, std::uint64_t size,
                                void* destination,
                                std::chrono::milliseconds callback_timeout =
                                    std::chrono::seconds(30));

}  // namespace aethercl
