// What the driver knows about one OpenCL device: identity and the capabilities kernels depend on.
#pragma once

#include "cl/opencl.h"

#include <cstdint>
#include <string>
#include <vector>

namespace aethercl {

enum class DeviceKind : int { kGpu = 0, kAccelerator = 1, kCpu = 2, kOther = 3 };

struct DeviceInfo {
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
  std::string name;
  std::string vendor;
  std::string platform_name;
  std::string platform_version;
  std::string device_version;   // "OpenCL 3.0 CUDA"
  std::string driver_version;
  DeviceKind kind = DeviceKind::kOther;
  std::uint32_t compute_units = 0;
  std::uint64_t global_mem_bytes = 0;
  std::uint64_t max_alloc_bytes = 0;
  std::uint64_t local_mem_bytes = 0;
  std::size_t max_work_group_size = 1;
  std::uint32_t mem_base_align_bytes = 128;
  bool fp64 = false;
  bool fp16 = false;
  bool subgroups = false;
  // NVIDIA compute capability as major * 10 + minor (cl_nv_device_attribute_query), else 0.
  int nv_compute_capability = 0;
  bool int32_global_atomics = false;  // core since 1.1; the extension names older runtimes
  bool int64_atomics = false;
  std::uint32_t address_bits = 64;
  std::size_t max_parameter_size = 1024;  // bytes of all kernel arguments together
  std::vector<std::size_t> max_work_item_sizes;  // one entry per dimension (usually 3)
  std::string il_version;  // "SPIR-V_1.2 ..." where the device accepts IL, else empty
  bool il_program_khr = false;  // IL through cl_khr_il_program on a pre-2.1 device
  std::vector<std::string> extensions;

  bool has_extension(const std::string& extension_name) const;
};

const char* kind_name(DeviceKind kind) noexcept;

// Queries every field; throws Error(kDeviceError) if the runtime refuses a core query.
DeviceInfo query_device_info(cl_platform_id platform, cl_device_id device);

// A string property of a device, trailing NULs and spaces removed. Throws on an OpenCL error.
std::string device_string(cl_device_id device, cl_device_info param);

// A JSON object of the fields above (plus the visible index and whether it is initialised).
std::string device_info_json(const DeviceInfo& info, int index, bool initialized);

// Escapes a string for inclusion between JSON quotes; ill-formed UTF-8 becomes U+FFFD, so the
// result is always valid JSON string content whatever bytes an OpenCL runtime or client gave.
std::string json_escape(const std::string& text);

}  // namespace aethercl
