// Matching OpenCL devices to CUDA devices by UUID or PCI address.
#include "vendor/device_match.h"

#include "support/log.h"

#include <array>
#include <cstring>
#include <string>

namespace aethercl::vendor {
namespace {

// Values of cl_khr_device_uuid and cl_nv_device_attribute_query (not in every cl_ext.h).
constexpr cl_device_info kDeviceUuid = 0x106A;
constexpr cl_device_info kPciBusNv = 0x4008;
constexpr cl_device_info kPciSlotNv = 0x4009;
constexpr cl_device_info kPciDomainNv = 0x400A;

std::string extensions_of(cl_device_id device) {
  std::size_t size = 0;
  if (clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, 0, nullptr, &size) != CL_SUCCESS) return {};
  std::string text(size, '\0');
  if (clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, size, text.data(), nullptr) != CL_SUCCESS) {
    return {};
  }
  return text;
}

bool has_extension(const std::string& extensions, const char* name) {
  std::size_t at = extensions.find(name);
  std::size_t length = std::strlen(name);
  while (at != std::string::npos) {
    bool starts = at == 0 || extensions[at - 1] == ' ';
    bool ends = at + length == extensions.size() || extensions[at + length] == ' ' ||
                extensions[at + length] == '\0';
    if (starts && ends) return true;
    at = extensions.find(name, at + 1);
  }
  return false;
}

cl_uint uint_info(cl_device_id device, cl_device_info what, bool& ok) {
  cl_uint value = 0;
  ok = ok && clGetDeviceInfo(device, what, sizeof(value), &value, nullptr) == CL_SUCCESS;
  return value;
}

std::optional<int> by_uuid(const CudaDriver& cuda, cl_device_id device, int count) {
  std::array<unsigned char, 16> uuid{};
  if (clGetDeviceInfo(device, kDeviceUuid, uuid.size(), uuid.data(), nullptr) != CL_SUCCESS) {
    return std::nullopt;
  }
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice handle = 0;
    CUuuid other{};
    if (cuda.cuDeviceGet(&handle, ordinal) != kCudaSuccess ||
        cuda.cuDeviceGetUuid(&other, handle) != kCudaSuccess) {
      continue;
    }
    if (std::memcmp(other.bytes, uuid.data(), uuid.size()) == 0) return ordinal;
  }
  return std::nullopt;
}

std::optional<int> by_pci(const CudaDriver& cuda, cl_device_id device, int count) {
  bool ok = true;
  cl_uint bus = uint_info(device, kPciBusNv, ok);
  cl_uint slot = uint_info(device, kPciSlotNv, ok);
  cl_uint domain = uint_info(device, kPciDomainNv, ok);
  if (!ok) return std::nullopt;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice handle = 0;
    int cuda_bus = -1, cuda_device = -1, cuda_domain = -1;
    if (cuda.cuDeviceGet(&handle, ordinal) != kCudaSuccess ||
        cuda.cuDeviceGetAttribute(&cuda_bus, kDeviceAttributePciBusId, handle) != kCudaSuccess ||
        cuda.cuDeviceGetAttribute(&cuda_device, kDeviceAttributePciDeviceId, handle) !=
            kCudaSuccess ||
        cuda.cuDeviceGetAttribute(&cuda_domain, kDeviceAttributePciDomainId, handle) !=
            kCudaSuccess) {
      continue;
    }
    // The slot attribute is documented as the device number; some drivers report
    // (device << 3) | function: either form names the same device.
    bool same_slot = static_cast<int>(slot) == cuda_device ||
                     static_cast<int>(slot >> 3) == cuda_device;
    if (static_cast<int>(bus) == cuda_bus && static_cast<int>(domain) == cuda_domain && same_slot) {
      return ordinal;
    }
  }
  return std::nullopt;
}

}  // namespace

bool device_has_extension(cl_device_id device, const char* name) {
  return has_extension(extensions_of(device), name);
}

std::optional<int> cuda_ordinal_of(const CudaDriver& cuda, cl_device_id device, int visible_index) {
  int count = 0;
  if (cuda.cuDeviceGetCount(&count) != kCudaSuccess || count < 1) {
    log().debug("vendor engines: the CUDA driver lists no device");
    return std::nullopt;
  }
  if (cuda.host_memory) {
    cl_device_type type = 0;
    clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof(type), &type, nullptr);
    if ((type & CL_DEVICE_TYPE_CPU) != 0 && visible_index < count) return visible_index;
    log().debug("vendor engines: device {} is not a CPU device the host-memory engine serves",
                visible_index);
    return std::nullopt;
  }
  std::string extensions = extensions_of(device);
  std::optional<int> ordinal;
  if (has_extension(extensions, "cl_khr_device_uuid")) ordinal = by_uuid(cuda, device, count);
  if (!ordinal && has_extension(extensions, "cl_nv_device_attribute_query")) {
    ordinal = by_pci(cuda, device, count);
  }
  if (!ordinal) {
    log().debug("vendor engines: device {} matches none of the {} CUDA devices", visible_index,
                count);
  }
  return ordinal;
}

}  // namespace aethercl::vendor
