// The stream argument of the version-3 entry points, until this build has streams: NULL (the
// device's default stream) is the only stream there is.
#pragma once

#include "support/error.h"

namespace aethercl::ops {

inline void require_default_stream(const void* stream, const char* argument = "stream") {
  if (stream != nullptr) {
    fail(Status::kInvalidHandle,
         "{} ({}) is not a stream of this driver: this build has only the default stream (pass "
         "NULL)",
         argument, stream);
  }
}

}  // namespace aethercl::ops
