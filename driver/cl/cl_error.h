// OpenCL status codes: names, and the check that turns a failed call into an Error.
#pragma once

#include "cl/opencl.h"
#include "support/error.h"

namespace aethercl::cl {

const char* error_name(cl_int code) noexcept;

// Allocation-type failures become kOutOfMemory, everything else kDeviceError.
Status status_of(cl_int code) noexcept;

// Throws Error naming the OpenCL call that failed and its code.
inline void check(cl_int code, const char* what) {
  if (code != CL_SUCCESS) fail(status_of(code), "{} failed: {} ({})", what, error_name(code), code);
}

}  // namespace aethercl::cl
