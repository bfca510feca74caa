// Refuses calls that pass one buffer as two arguments where the kernel would race on it.
// Which pairings each family accepts (in place) and refuses is written in the public header.
#pragma once

#include "support/error.h"

#include <initializer_list>

namespace aethercl::ops {

inline void require_distinct(const void* a, const char* name_a, const void* b,
                             const char* name_b) {
  if (a != nullptr && a == b) {
    fail(Status::kInvalidArgument,
         "{} and {} are the same buffer ({}); this op cannot run in place", name_a, name_b, a);
  }
}

struct NamedBuffer {
  const void* handle;
  const char* name;
};

// Refuses an output that is any of the other arguments (NULL matches nothing).
inline void require_not_aliased(NamedBuffer output, std::initializer_list<NamedBuffer> others) {
  for (const NamedBuffer& other : others) {
    require_distinct(other.handle, other.name, output.handle, output.name);
  }
}

}  // namespace aethercl::ops
