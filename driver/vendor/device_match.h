// Which CUDA device an OpenCL device is, so the vendor engines can work on its memory.
//
// NVIDIA: the 16-byte UUID (OpenCL cl_khr_device_uuid's CL_DEVICE_UUID_KHR against
// cuDeviceGetUuid), else the PCI domain and bus (cl_nv_device_attribute_query against
// cuDeviceGetAttribute). A host-memory engine (CudaDriver::host_memory, the test engine) matches
// a CPU OpenCL device of visible index i with its device ordinal i.
#pragma once

#include "cl/opencl.h"
#include "vendor/cuda_driver.h"

#include <optional>

namespace aethercl::vendor {

// The CUDA ordinal of the OpenCL device (visible_index is its gpu_index), or nullopt with the
// reason at debug level.
std::optional<int> cuda_ordinal_of(const CudaDriver& cuda, cl_device_id device, int visible_index);

// Whether the device lists the OpenCL extension `name` (a whole word of CL_DEVICE_EXTENSIONS).
bool device_has_extension(cl_device_id device, const char* name);

}  // namespace aethercl::vendor
