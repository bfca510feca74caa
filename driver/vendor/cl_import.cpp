// Importing memory the CUDA driver exported into OpenCL buffers.
#include "vendor/cl_import.h"

#include "vendor/device_match.h"

#include "cl/cl_error.h"
#include "support/error.h"

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#if !defined(_WIN32)
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace aethercl::vendor {
namespace {

// Values of cl_khr_external_memory(_opaque_fd) (not in every cl_ext.h).
constexpr cl_ulong kExternalMemoryOpaqueFd = 0x2060;
constexpr cl_ulong kDeviceHandleList = 0x2051;
constexpr cl_ulong kDeviceHandleListEnd = 0;

using CreateBufferWithProperties = cl_mem (*)(cl_context, const cl_ulong*, cl_mem_flags,
                                              std::size_t, void*, cl_int*);

// clCreateBufferWithProperties is OpenCL 3.0: looked up at run time so the library still loads
// with an OpenCL 1.2 ICD loader. Looked up in the loader this library linked (found through one
// of its functions): RTLD_DEFAULT would miss it when the library itself was loaded RTLD_LOCAL, as
// Python's ctypes does.
CreateBufferWithProperties create_buffer_with_properties() {
#if !defined(_WIN32)
  static CreateBufferWithProperties found = [] {
    void* address = nullptr;
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&clGetPlatformIDs), &info) != 0 &&
        info.dli_fname != nullptr) {
      if (void* loader = dlopen(info.dli_fname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
        address = dlsym(loader, "clCreateBufferWithProperties");
      }
    }
    if (address == nullptr) address = dlsym(RTLD_DEFAULT, "clCreateBufferWithProperties");
    return reinterpret_cast<CreateBufferWithProperties>(address);
  }();
  return found;
#else
  return nullptr;
#endif
}

bool is_cpu(cl_device_id device) {
  cl_device_type type = 0;
  return clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof(type), &type, nullptr) == CL_SUCCESS &&
         (type & CL_DEVICE_TYPE_CPU) != 0;
}

}  // namespace

bool can_import(const CudaDriver& cuda, cl_device_id device) {
  if (cuda.host_memory) return is_cpu(device);
  return device_has_extension(device, "cl_khr_external_memory_opaque_fd") &&
         create_buffer_with_properties() != nullptr;
}

ImportedBuffer::ImportedBuffer(const CudaDriver& cuda, cl_context context, cl_device_id device,
                               int fd, std::uint64_t bytes) {
#if !defined(_WIN32)
  cl_int status = CL_SUCCESS;
  if (cuda.host_memory) {
    void* mapping = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int mapped_errno = errno;
    close(fd);
    if (mapping == MAP_FAILED) {
      fail(Status::kDeviceError, "mmap of the host-memory engine's descriptor failed: {}",
           std::strerror(mapped_errno));
    }
    mapping_ = mapping;
    mapping_bytes_ = bytes;
    mem_ = cl::Mem(clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, mapping,
                                  &status));
    if (status != CL_SUCCESS) release();
    cl::check(status, "clCreateBuffer (CL_MEM_USE_HOST_PTR over the engine's memory)");
    return;
  }
  auto create = create_buffer_with_properties();
  if (create == nullptr) {
    close(fd);
    fail(Status::kNotImplemented, "the OpenCL loader has no clCreateBufferWithProperties");
  }
  const cl_ulong properties[] = {kExternalMemoryOpaqueFd, static_cast<cl_ulong>(fd),
                                 kDeviceHandleList, reinterpret_cast<cl_ulong>(device),
                                 kDeviceHandleListEnd, 0};
  mem_ = cl::Mem(create(context, properties, CL_MEM_READ_WRITE, bytes, nullptr, &status));
  // On success the descriptor stays open: whether the OpenCL driver took ownership (as Vulkan's
  // import does) is not specified, and closing one it owns would break the buffer.
  if (status != CL_SUCCESS) close(fd);
  cl::check(status, "clCreateBufferWithProperties (CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR)");
#else
  (void)cuda, (void)context, (void)device, (void)fd, (void)bytes;
  fail(Status::kNotImplemented, "vendor engines are not built on Windows");
#endif
}

ImportedBuffer::ImportedBuffer(ImportedBuffer&& other) noexcept
    : mem_(std::move(other.mem_)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      mapping_bytes_(std::exchange(other.mapping_bytes_, 0)) {}

ImportedBuffer& ImportedBuffer::operator=(ImportedBuffer&& other) noexcept {
  if (this != &other) {
    release();
    mem_ = std::move(other.mem_);
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_bytes_ = std::exchange(other.mapping_bytes_, 0);
  }
  return *this;
}

ImportedBuffer::~ImportedBuffer() { release(); }

void ImportedBuffer::release() noexcept {
  mem_.reset();  // the buffer goes before the memory it wraps
#if !defined(_WIN32)
  if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
#endif
  mapping_ = nullptr;
  mapping_bytes_ = 0;
}

}  // namespace aethercl::vendor
