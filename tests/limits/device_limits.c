/* A device that reports other limits: preloaded (LD_PRELOAD) over the OpenCL loader, it replaces
 * the local memory size and work-group limits that clGetDeviceInfo and clGetKernelWorkGroupInfo
 * report, so the suites run against devices of other shapes than the machine's (tests/limits/).
 *
 *   AETHERCL_FAKE_LOCAL_MEM   bytes of local memory a device reports (CL_DEVICE_LOCAL_MEM_SIZE)
 *   AETHERCL_FAKE_WORK_GROUP  work-items a group may have: caps CL_DEVICE_MAX_WORK_GROUP_SIZE,
 *                             each of CL_DEVICE_MAX_WORK_ITEM_SIZES and CL_KERNEL_WORK_GROUP_SIZE
 *
 * Reporting more local memory than the device has is safe on PoCL, whose local memory is host
 * memory allocated per launch from the sizes the kernel asks for. */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* The loader's function: RTLD_NEXT finds nothing when the loader came in with a library opened
 * RTLD_LOCAL (ctypes does that), so the loader is then asked by name. */
static void* next_function(const char* name) {
  void* function = dlsym(RTLD_NEXT, name);
  if (function != NULL) return function;
  void* loader = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (loader == NULL) loader = dlopen("libOpenCL.so.1", RTLD_NOW);
  return loader != NULL ? dlsym(loader, name) : NULL;
}

static unsigned long long limit_from(const char* name) {
  const char* text = getenv(name);
  if (text == NULL || *text == '\0') return 0;
  char* end = NULL;
  unsigned long long value = strtoull(text, &end, 10);
  return (end != NULL && *end == '\0') ? value : 0;
}

typedef cl_int (*device_info_fn)(cl_device_id, cl_device_info, size_t, void*, size_t*);
typedef cl_int (*kernel_wg_info_fn)(cl_kernel, cl_device_id, cl_kernel_work_group_info, size_t,
                                    void*, size_t*);

CL_API_ENTRY cl_int CL_API_CALL clGetDeviceInfo(cl_device_id device, cl_device_info param,
                                                size_t size, void* value, size_t* size_ret) {
  static device_info_fn next;
  if (next == NULL) next = (device_info_fn)next_function("clGetDeviceInfo");
  if (next == NULL) return CL_INVALID_OPERATION;
  cl_int status = next(device, param, size, value, size_ret);
  if (status != CL_SUCCESS || value == NULL) return status;
  const unsigned long long local = limit_from("AETHERCL_FAKE_LOCAL_MEM");
  const unsigned long long group = limit_from("AETHERCL_FAKE_WORK_GROUP");
  if (param == CL_DEVICE_LOCAL_MEM_SIZE && local != 0 && size >= sizeof(cl_ulong)) {
    *(cl_ulong*)value = local;
  } else if (param == CL_DEVICE_MAX_WORK_GROUP_SIZE && group != 0 && size >= sizeof(size_t)) {
    if (*(size_t*)value > group) *(size_t*)value = (size_t)group;
  } else if (param == CL_DEVICE_MAX_WORK_ITEM_SIZES && group != 0) {
    size_t* sizes = (size_t*)value;
    for (size_t i = 0; i < size / sizeof(size_t); ++i) {
      if (sizes[i] > group) sizes[i] = (size_t)group;
    }
  }
  return status;
}

CL_API_ENTRY cl_int CL_API_CALL clGetKernelWorkGroupInfo(cl_kernel kernel, cl_device_id device,
                                                         cl_kernel_work_group_info param,
                                                         size_t size, void* value,
                                                         size_t* size_ret) {
  static kernel_wg_info_fn next;
  if (next == NULL) next = (kernel_wg_info_fn)next_function("clGetKernelWorkGroupInfo");
  if (next == NULL) return CL_INVALID_OPERATION;
  cl_int status = next(kernel, device, param, size, value, size_ret);
  if (status != CL_SUCCESS || value == NULL) return status;
  const unsigned long long group = limit_from("AETHERCL_FAKE_WORK_GROUP");
  if (param == CL_KERNEL_WORK_GROUP_SIZE && group != 0 && size >= sizeof(size_t) &&
      *(size_t*)value > group) {
    *(size_t*)value = (size_t)group;
  }
  return status;
}
