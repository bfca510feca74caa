// Training-op plumbing: argument checks, scratch memory and slice launch geometry.
#include "ops/train/common.h"

#include "support/checked.h"

#include <algorithm>

namespace aethercl::ops::train {

void require_finite(const char* name, float value) {
  if (!std::isfinite(value)) fail(Status::kInvalidArgument, "{} = {} must be finite", name, value);
}

void require_at_least(const char* name, float value, float minimum) {
  if (!(value >= minimum) || std::isinf(value)) {
    fail(Status::kInvalidArgument, "{} = {} must be finite and >= {}", name, value, minimum);
  }
}

void require_in_closed(const char* name, float value, float low, float high) {
  if (!(value >= low && value <= high)) {
    fail(Status::kInvalidArgument, "{} = {} must lie in [{}, {}]", name, value, low, high);
  }
}

void require_in_half_open(const char* name, float value, float low, float high) {
  if (!(value >= low && value < high)) {
    fail(Status::kInvalidArgument, "{} = {} must lie in [{}, {})", name, value, low, high);
  }
}

std::uint64_t dim(const char* name, int value) {
  if (value < 0) fail(Status::kInvalidArgument, "{} = {} is negative", name, value);
  return static_cast<std::uint64_t>(value);
}

std::uint64_t positive(const char* name, int value) {
  if (value < 1) fail(Status::kInvalidArgument, "{} = {} must be at least 1", name, value);
  return static_cast<std::uint64_t>(value);
}

std::uint64_t product(const char* what, std::initializer_list<std::uint64_t> dims) {
  std::uint64_t result = 1;
  bool overflow = false;
  for (std::uint64_t d : dims) {
    auto next = checked_mul(result, d);
    if (!next) overflow = true;
    else result = *next;
  }
  for (std::uint64_t d : dims) {
    if (d == 0) return 0;
  }
  if (overflow) fail(Status::kInvalidArgument, "the element count of {} overflows 64 bits", what);
  return result;
}

}  // namespace aethercl::ops::train
