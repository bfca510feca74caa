// Refuses calls that pass one buffer as two arguments where the kernel would race on it.
#pragma once

#include "support/error.h"

namespace aethercl::ops {

inline void require_distinct(const void* a, const char* name_a, const void* b,
                             const char* name_b) {
  if (a != nullptr && a == b) {
    fail(Status::kInvalidArgument,
         "{} and {} are the same buffer ({}); this op cannot run in place", name_a, name_b, a);
  }
}

}  // namespace aethercl::ops
