// Device capability queries and their JSON form.
#include "runtime/device_info.h"

#include "cl/cl_error.h"
#include "support/utf8.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sstream>

namespace aethercl {
namespace {

// The string a clGet*Info query returns for (object, param), without trailing NULs and spaces.
template <typename Query, typename Object, typename Param>
std::string info_string(Query query, const char* query_name, Object object, Param param) {
  size_t size = 0;
  cl::check(query(object, param, 0, nullptr, &size), query_name);
  std::string value(size, '\0');
  cl::check(query(object, param, size, value.data(), nullptr), query_name);
  while (!value.empty() && (value.back() == '\0' || value.back() == ' ')) value.pop_back();
  return value;
}

std::string platform_string(cl_platform_id platform, cl_platform_info param) {
  return info_string(clGetPlatformInfo, "clGetPlatformInfo", platform, param);
}

template <typename T>
T device_value(cl_device_id device, cl_device_info param) {
  T value{};
  cl::check(clGetDeviceInfo(device, param, sizeof(T), &value, nullptr), "clGetDeviceInfo");
  return value;
}

}  // namespace

std::string device_string(cl_device_id device, cl_device_info param) {
  return info_string(clGetDeviceInfo, "clGetDeviceInfo", device, param);
}

bool DeviceInfo::has_extension(const std::string& extension_name) const {
  for (const auto& extension : extensions)
    if (extension == extension_name) return true;
  return false;
}

const char* kind_name(DeviceKind kind) noexcept {
  switch (kind) {
    case DeviceKind::kGpu: return "gpu";
    case DeviceKind::kAccelerator: return "accelerator";
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kOther: return "other";
  }
  return "other";
}

namespace {

// NVIDIA's attribute query (cl_nv_device_attribute_query): compute capability major * 10 + minor,
// 0 when the extension or either value is unavailable.
int nv_compute_capability(const DeviceInfo& info) {
  constexpr cl_device_info kComputeCapabilityMajorNv = 0x4000;
  constexpr cl_device_info kComputeCapabilityMinorNv = 0x4001;
  if (!info.has_extension("cl_nv_device_attribute_query")) return 0;
  cl_uint major = 0;
  cl_uint minor = 0;
  if (clGetDeviceInfo(info.id, kComputeCapabilityMajorNv, sizeof(major), &major, nullptr) !=
          CL_SUCCESS ||
      clGetDeviceInfo(info.id, kComputeCapabilityMinorNv, sizeof(minor), &minor, nullptr) !=
          CL_SUCCESS) {
    return 0;
  }
  return static_cast<int>(major * 10 + minor);
}

}  // namespace

DeviceInfo query_device_info(cl_platform_id platform, cl_device_id device) {
  DeviceInfo info;
  info.platform = platform;
  info.id = device;
  info.name = device_string(device, CL_DEVICE_NAME);
  info.vendor = device_string(device, CL_DEVICE_VENDOR);
  info.device_version = device_string(device, CL_DEVICE_VERSION);
  info.driver_version = device_string(device, CL_DRIVER_VERSION);
  info.platform_name = platform_string(platform, CL_PLATFORM_NAME);
  info.platform_version = platform_string(platform, CL_PLATFORM_VERSION);
  auto type = device_value<cl_device_type>(device, CL_DEVICE_TYPE);
  info.kind = (type & CL_DEVICE_TYPE_GPU)           ? DeviceKind::kGpu
              : (type & CL_DEVICE_TYPE_ACCELERATOR) ? DeviceKind::kAccelerator
              : (type & CL_DEVICE_TYPE_CPU)         ? DeviceKind::kCpu
                                                    : DeviceKind::kOther;
  info.compute_units = device_value<cl_uint>(device, CL_DEVICE_MAX_COMPUTE_UNITS);
  info.global_mem_bytes = device_value<cl_ulong>(device, CL_DEVICE_GLOBAL_MEM_SIZE);
  info.max_alloc_bytes = device_value<cl_ulong>(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  info.local_mem_bytes = device_value<cl_ulong>(device, CL_DEVICE_LOCAL_MEM_SIZE);
  info.max_work_group_size = device_value<size_t>(device, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  info.mem_base_align_bytes = device_value<cl_uint>(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
  if (info.mem_base_align_bytes == 0) info.mem_base_align_bytes = 128;

  std::istringstream words(device_string(device, CL_DEVICE_EXTENSIONS));
  for (std::string word; words >> word;) info.extensions.push_back(word);
  auto fp64_config = device_value<cl_device_fp_config>(device, CL_DEVICE_DOUBLE_FP_CONFIG);
  info.fp64 = fp64_config != 0 || info.has_extension("cl_khr_fp64");
  info.fp16 = info.has_extension("cl_khr_fp16");
  info.subgroups = info.has_extension("cl_khr_subgroups") ||
                   info.has_extension("cl_intel_subgroups");
  info.nv_compute_capability = nv_compute_capability(info);
  // 32-bit global atomics are core from OpenCL 1.1 on; 1.0 runtimes name the extension.
  info.int32_global_atomics = info.device_version.rfind("OpenCL 1.0", 0) != 0 ||
                              info.has_extension("cl_khr_global_int32_base_atomics");
  info.int64_atomics = info.has_extension("cl_khr_int64_base_atomics");
  info.address_bits = device_value<cl_uint>(device, CL_DEVICE_ADDRESS_BITS);
  info.max_parameter_size = device_value<size_t>(device, CL_DEVICE_MAX_PARAMETER_SIZE);
  auto dimensions = device_value<cl_uint>(device, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS);
  info.max_work_item_sizes.assign(dimensions, 0);
  cl::check(clGetDeviceInfo(device, CL_DEVICE_MAX_WORK_ITEM_SIZES,
                            dimensions * sizeof(std::size_t), info.max_work_item_sizes.data(),
                            nullptr),
            "clGetDeviceInfo");
  // CL_DEVICE_IL_VERSION (2.1 core) and CL_DEVICE_IL_VERSION_KHR share one value; a 1.2 device
  // without the extension may refuse the query, which means no IL.
  constexpr cl_device_info kIlVersion = 0x105B;
  info.il_program_khr = info.has_extension("cl_khr_il_program");
  size_t il_size = 0;
  if (clGetDeviceInfo(device, kIlVersion, 0, nullptr, &il_size) == CL_SUCCESS && il_size > 1) {
    std::string value(il_size, '\0');
    if (clGetDeviceInfo(device, kIlVersion, il_size, value.data(), nullptr) == CL_SUCCESS) {
      while (!value.empty() && (value.back() == '\0' || value.back() == ' ')) value.pop_back();
      info.il_version = value;
    }
  }
  return info;
}

std::string json_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : to_valid_utf8(text)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
  }
  return out;
}

std::string device_info_json(const DeviceInfo& info, int index, bool initialized) {
  return fmt::format(
      "{{\"index\": {}, \"name\": \"{}\", \"vendor\": \"{}\", \"platform\": \"{}\", "
      "\"platform_version\": \"{}\", \"device_version\": \"{}\", \"driver_version\": \"{}\", "
      "\"type\": \"{}\", \"compute_units\": {}, \"global_mem_bytes\": {}, "
      "\"max_alloc_bytes\": {}, \"local_mem_bytes\": {}, \"max_work_group_size\": {}, "
      "\"fp64\": {}, \"fp16\": {}, \"subgroups\": {}, \"int32_global_atomics\": {}, "
      "\"int64_atomics\": {}, \"address_bits\": {}, \"max_work_item_sizes\": [{}], "
      "\"il_version\": \"{}\", \"initialized\": {}}}",
      index, json_escape(info.name), json_escape(info.vendor), json_escape(info.platform_name),
      json_escape(info.platform_version), json_escape(info.device_version),
      json_escape(info.driver_version), kind_name(info.kind), info.compute_units,
      info.global_mem_bytes, info.max_alloc_bytes, info.local_mem_bytes,
      info.max_work_group_size, info.fp64, info.fp16, info.subgroups, info.int32_global_atomics,
      info.int64_atomics, info.address_bits, fmt::join(info.max_work_item_sizes, ", "),
      json_escape(info.il_version), initialized);
}

}  // namespace aethercl
