// Zeroed 32-bit counters for kernels whose work-groups hand work to each other within one launch
// (the last group of a column tile folds the others' partial sums: kernels/reduce.cl). Every such
// kernel leaves its counters zero again, so a set serves the launches that cannot overlap: a
// stream's (its queue runs them in order) or one captured op's (replays of a graph never overlap).
#pragma once

#include "cl/handle.h"

#include <cstddef>

namespace aethercl {

// At most this many counters per launch; a launch that needs more takes its two-launch form.
constexpr std::size_t kMaxLaunchCounters = 4096;

// A new buffer of `count` zero counters (count <= kMaxLaunchCounters). Throws like clCreateBuffer
// (kOutOfMemory when the device has no room).
cl::Mem make_launch_counters(cl_context context, std::size_t count);

}  // namespace aethercl
