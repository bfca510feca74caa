// The vendor engines (docs/ARCHITECTURE.md decision 26): libcuda.so.1 and libnccl.so.2 loaded
// with dlopen where present, never linked, never required. Loaded once per process on first use.
//
// AETHERCL_VENDOR_ENGINES=0 turns them off; AETHERCL_LIBCUDA and AETHERCL_LIBNCCL name the files
// (default: the sonames, searched like any dlopen; e.g. the libnccl.so.2 PyTorch ships can be named
// with AETHERCL_LIBNCCL). Absent libraries are logged at debug level (every machine without
// NVIDIA's stack); a library that is present but unusable (a symbol missing, cuInit failing, NCCL
// older than 2.10) gives one warning per process. Either way the callers take today's OpenCL paths.
//
// Windows: compiled out (engines() reports them off): loading nvcuda.dll and NCCL (which has no
// Windows build) is left for later.
#pragma once

#include "vendor/cuda_driver.h"
#include "vendor/nccl.h"

#include <string>

namespace aethercl::vendor {

struct Engines {
  const CudaDriver* cuda = nullptr;  // nullptr: no CUDA driver
  const Nccl* nccl = nullptr;        // nullptr: no NCCL (needs cuda)
  std::string why_not;               // why cuda or nccl is missing ("" when both are loaded)
};

// Thread-safe; loads on the first call.
const Engines& engines();

}  // namespace aethercl::vendor
