// Names of the stable status codes.
#include "support/error.h"

namespace aethercl {

const char* status_name(Status status) noexcept {
  switch (status) {
    case Status::kOk: return "AETHERCL_OK";
    case Status::kInvalidArgument: return "AETHERCL_INVALID_ARGUMENT";
    case Status::kInvalidHandle: return "AETHERCL_INVALID_HANDLE";
    case Status::kOutOfRange: return "AETHERCL_OUT_OF_RANGE";
    case Status::kOutOfMemory: return "AETHERCL_OUT_OF_MEMORY";
    case Status::kNotInitialized: return "AETHERCL_NOT_INITIALIZED";
    case Status::kNoDevice: return "AETHERCL_NO_DEVICE";
    case Status::kBuildFailed: return "AETHERCL_BUILD_FAILED";
    case Status::kDeviceError: return "AETHERCL_DEVICE_ERROR";
    case Status::kNotImplemented: return "AETHERCL_NOT_IMPLEMENTED";
    case Status::kInternal: return "AETHERCL_INTERNAL";
  }
  return "AETHERCL_UNKNOWN_STATUS";
}

}  // namespace aethercl
