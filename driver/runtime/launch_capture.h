// Launch capture, for profilers that cannot attach to OpenCL: with AETHERCL_CAPTURE_DIR set,
// launches are written there as files that tools/gpu/replay_launch.py replays through the CUDA
// driver (Nsight Compute profiles those; it does not profile OpenCL launches).
//
// Per captured launch, DIR/<kernel>-<n>.json holds the kernel's name, the device, the geometry and
// every argument in order: a buffer as its size in bytes, a __local argument as its size, a scalar
// as its bytes in hex, and a value the capture cannot classify (neither the program's PTX nor
// CL_KERNEL_ARG_ADDRESS_QUALIFIER says whether it is a buffer) as "unknown" with its bytes. The
// program binary the launch ran (PTX on NVIDIA, the patched PTX for warpgroup kernels) is written
// once per binary, as DIR/program-<hash>.ptx (or .bin when it is not PTX), and named in the JSON.
//
// AETHERCL_CAPTURE_KERNELS (a comma-separated list of name substrings; default every kernel)
// selects kernels, and AETHERCL_CAPTURE_LIMIT (default 1) caps the launches captured per kernel
// name. Capture never fails a launch: what cannot be written is logged once and skipped.
#pragma once

#include "cl/opencl.h"
#include "runtime/launch.h"

#include <optional>
#include <string_view>
#include <vector>

namespace aethercl {

// Writes the record (bound to its kernel, about to be enqueued on queue) when capture is on and
// the record is selected; a no-op otherwise. Thread-safe; never throws.
void capture_launch(cl_command_queue queue, const LaunchRecord& record) noexcept;

// Which parameters of `kernel`'s .entry in a PTX text are pointers (".ptr"), in order; nullopt
// when the text has no such entry. (How a capture tells buffers from 64-bit scalars on NVIDIA.)
std::optional<std::vector<bool>> ptx_pointer_params(std::string_view ptx, std::string_view kernel);

}  // namespace aethercl
