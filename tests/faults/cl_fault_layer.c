/* An OpenCL fault layer: preloaded (LD_PRELOAD) over the OpenCL loader, it counts every OpenCL call
 * the process makes and makes the Nth fail with a chosen error, and it keeps a count of the OpenCL
 * objects the process holds (tests/faults/, docs/RELIABILITY.md "Fault injection at every OpenCL call").
 *
 *   AETHERCL_FAULT_AT=N      fail the first call, counting from 1, at or after the Nth that the
 *                            OpenCL specification lets return the error (0 or unset: no fault)
 *   AETHERCL_FAULT_ERROR=E   the error's name: CL_OUT_OF_RESOURCES, CL_OUT_OF_HOST_MEMORY,
 *                            CL_INVALID_COMMAND_QUEUE, CL_BUILD_PROGRAM_FAILURE, CL_MAP_FAILURE,
 *                            CL_MEM_OBJECT_ALLOCATION_FAILURE,
 *                            CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST
 *
 * A failed call does nothing and returns the error (through errcode_ret, with NULL, for the calls
 * that return an object), except the clRelease* calls, which release and then report the error:
 * a release has nothing to undo, and not releasing would be a leak this layer made.
 *
 * The process asks the layer through its exported functions (aethercl_fault_*, below; ctypes finds
 * them with CDLL(None)). The cl_khr_command_buffer functions, which the driver fetches through
 * clGetExtensionFunctionAddressForPlatform, are counted and failed too: that call hands out this
 * layer's versions of them. */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors and which calls may return them ------------------------------------------------- */

enum {
  E_RES = 1 << 0,   /* CL_OUT_OF_RESOURCES */
  E_HOST = 1 << 1,  /* CL_OUT_OF_HOST_MEMORY */
  E_QUEUE = 1 << 2, /* CL_INVALID_COMMAND_QUEUE */
  E_BUILD = 1 << 3, /* CL_BUILD_PROGRAM_FAILURE */
  E_MAP = 1 << 4,   /* CL_MAP_FAILURE */
  E_ALLOC = 1 << 5, /* CL_MEM_OBJECT_ALLOCATION_FAILURE */
  E_WAIT = 1 << 6,  /* CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST */
};

static const struct {
  const char* name;
  cl_int code;
  unsigned bit;
} kErrors[] = {
    {"CL_OUT_OF_RESOURCES", CL_OUT_OF_RESOURCES, E_RES},
    {"CL_OUT_OF_HOST_MEMORY", CL_OUT_OF_HOST_MEMORY, E_HOST},
    {"CL_INVALID_COMMAND_QUEUE", CL_INVALID_COMMAND_QUEUE, E_QUEUE},
    {"CL_BUILD_PROGRAM_FAILURE", CL_BUILD_PROGRAM_FAILURE, E_BUILD},
    {"CL_MAP_FAILURE", CL_MAP_FAILURE, E_MAP},
    {"CL_MEM_OBJECT_ALLOCATION_FAILURE", CL_MEM_OBJECT_ALLOCATION_FAILURE, E_ALLOC},
    {"CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST", CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST,
     E_WAIT},
};

#define RH (E_RES | E_HOST)
#define QRH (E_QUEUE | E_RES | E_HOST)
#define ENQ (E_QUEUE | E_ALLOC | E_RES | E_HOST)

/* Every wrapped call: its name and the errors of the list above its specification lists. */
#define CALLS(X)                                                         \
  X(clGetPlatformIDs, E_HOST)                                            \
  X(clGetPlatformInfo, E_HOST)                                           \
  X(clGetDeviceIDs, RH)                                                  \
  X(clGetDeviceInfo, RH)                                                 \
  X(clCreateContext, RH)                                                 \
  X(clRetainContext, RH)                                                 \
  X(clReleaseContext, RH)                                                \
  X(clCreateCommandQueue, RH)                                            \
  X(clRetainCommandQueue, QRH)                                           \
  X(clReleaseCommandQueue, QRH)                                          \
  X(clGetCommandQueueInfo, QRH)                                          \
  X(clCreateBuffer, E_ALLOC | RH)                                        \
  X(clReleaseMemObject, RH)                                              \
  X(clGetMemObjectInfo, RH)                                              \
  X(clCreateProgramWithSource, RH)                                       \
  X(clCreateProgramWithBinary, RH)                                       \
  X(clCreateProgramWithIL, RH)                                           \
  X(clCreateProgramWithILKHR, RH)                                        \
  X(clBuildProgram, E_BUILD | RH)                                        \
  X(clReleaseProgram, RH)                                                \
  X(clGetProgramInfo, RH)                                                \
  X(clGetProgramBuildInfo, RH)                                           \
  X(clCreateKernel, RH)                                                  \
  X(clReleaseKernel, RH)                                                 \
  X(clSetKernelArg, RH)                                                  \
  X(clGetKernelInfo, RH)                                                 \
  X(clGetKernelArgInfo, RH)                                              \
  X(clGetKernelWorkGroupInfo, RH)                                        \
  X(clWaitForEvents, E_WAIT | RH)                                        \
  X(clGetEventInfo, RH)                                                  \
  X(clCreateUserEvent, RH)                                               \
  X(clRetainEvent, RH)                                                   \
  X(clReleaseEvent, RH)                                                  \
  X(clSetUserEventStatus, RH)                                            \
  X(clSetEventCallback, RH)                                              \
  X(clGetEventProfilingInfo, RH)                                         \
  X(clFlush, QRH)                                                        \
  X(clFinish, QRH)                                                       \
  X(clEnqueueReadBuffer, ENQ)                                            \
  X(clEnqueueWriteBuffer, ENQ)                                           \
  X(clEnqueueCopyBuffer, ENQ)                                            \
  X(clEnqueueFillBuffer, ENQ)                                            \
  X(clEnqueueMapBuffer, E_MAP | ENQ)                                     \
  X(clEnqueueUnmapMemObject, QRH)                                        \
  X(clEnqueueNDRangeKernel, ENQ)                                         \
  X(clEnqueueMarkerWithWaitList, QRH)                                    \
  X(clEnqueueBarrierWithWaitList, QRH)                                   \
  X(clCreateCommandBufferKHR, QRH)                                       \
  X(clFinalizeCommandBufferKHR, RH)                                      \
  X(clReleaseCommandBufferKHR, RH)                                       \
  X(clEnqueueCommandBufferKHR, QRH)                                      \
  X(clCommandNDRangeKernelKHR, QRH)                                      \
  X(clCommandCopyBufferKHR, QRH)                                         \
  X(clCommandFillBufferKHR, QRH)

#define AS_ID(name, errors) ID_##name,
enum { CALLS(AS_ID) CALL_COUNT };
#define AS_INFO(name, errors) {#name, errors},
static const struct {
  const char* name;
  unsigned errors;
} kCalls[] = {CALLS(AS_INFO)};

/* ---- counting and the fault ----------------------------------------------------------------- */

#define TRACE_CAPACITY (1u << 22)
static atomic_ulong call_count;
static unsigned char trace_ids[TRACE_CAPACITY]; /* the call id of each call, in order */
static unsigned long fault_at;                  /* from AETHERCL_FAULT_AT; 0: no fault */
static unsigned fault_bit;
static cl_int fault_code;
static const char* fault_error_name = "";
static atomic_ulong fault_index;                /* the call that failed; 0: none yet */
static atomic_int fault_call = -1;

__attribute__((constructor)) static void read_environment(void) {
  const char* at = getenv("AETHERCL_FAULT_AT");
  const char* error = getenv("AETHERCL_FAULT_ERROR");
  if (at == NULL || *at == '\0') return;
  char* end = NULL;
  unsigned long value = strtoul(at, &end, 10);
  if (end == NULL || *end != '\0') return;
  for (size_t i = 0; error != NULL && i < sizeof kErrors / sizeof kErrors[0]; ++i) {
    if (strcmp(error, kErrors[i].name) == 0) {
      fault_bit = kErrors[i].bit;
      fault_code = kErrors[i].code;
      fault_error_name = kErrors[i].name;
      fault_at = value;
    }
  }
}

/* Counts the call and says whether it is the one to fail. */
static int fault_here(int id) {
  unsigned long index = atomic_fetch_add(&call_count, 1) + 1;
  if (index <= TRACE_CAPACITY) trace_ids[index - 1] = (unsigned char)id;
  if (fault_at == 0 || index < fault_at || (kCalls[id].errors & fault_bit) == 0) return 0;
  unsigned long none = 0;
  if (!atomic_compare_exchange_strong(&fault_index, &none, index)) return 0;
  atomic_store(&fault_call, id);
  return 1;
}

/* The loader's function: RTLD_NEXT finds nothing when the loader came in with a library opened
 * RTLD_LOCAL (ctypes does that), so the loader is then asked by name. */
static void* next_function(const char* name) {
  void* function = dlsym(RTLD_NEXT, name);
  if (function != NULL) return function;
  void* loader = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (loader == NULL) loader = dlopen("libOpenCL.so.1", RTLD_NOW);
  return loader != NULL ? dlsym(loader, name) : NULL;
}

/* ---- the objects the process holds ---------------------------------------------------------- */

enum { K_CONTEXT, K_QUEUE, K_MEM, K_PROGRAM, K_KERNEL, K_EVENT, K_COMMAND_BUFFER, KIND_COUNT };
static const char* const kKindNames[KIND_COUNT] = {"context", "queue",  "mem",           "program",
                                                   "kernel",  "event",  "command_buffer"};

#define OBJECT_CAPACITY (1u << 19)
static struct {
  const void* handle;
  int kind;
  long references;
} objects[OBJECT_CAPACITY];
static pthread_mutex_t objects_lock = PTHREAD_MUTEX_INITIALIZER;
static int objects_overflow;  /* the table filled: counts are no longer known */
static long over_released;    /* releases of objects the process held no reference to */

/* Adds delta to the references of handle (a new entry when it has none). */
static void reference(const void* handle, int kind, long delta) {
  if (handle == NULL) return;
  pthread_mutex_lock(&objects_lock);
  size_t slot = ((uintptr_t)handle >> 4) * 0x9E3779B97F4A7C15ull % OBJECT_CAPACITY;
  size_t probes = 0;
  while (objects[slot].handle != NULL && objects[slot].handle != handle &&
         probes < OBJECT_CAPACITY) {
    slot = (slot + 1) % OBJECT_CAPACITY;
    ++probes;
  }
  if (probes == OBJECT_CAPACITY) {
    objects_overflow = 1;
  } else {
    /* A handle seen before belongs to a new object when its old one was released. */
    if (objects[slot].handle == NULL || objects[slot].references <= 0) {
      if (delta < 0) ++over_released;
      objects[slot].handle = handle;
      objects[slot].kind = kind;
      objects[slot].references = delta > 0 ? delta : 0;
    } else {
      objects[slot].references += delta;
    }
  }
  pthread_mutex_unlock(&objects_lock);
}

/* ---- what the process asks ------------------------------------------------------------------ */

__attribute__((visibility("default"))) unsigned long aethercl_fault_calls(void) {
  return atomic_load(&call_count);
}

/* The index of the call that failed (0: none), and its name and error through the pointers. */
__attribute__((visibility("default"))) unsigned long aethercl_fault_hit(const char** call,
                                                                        const char** error) {
  int id = atomic_load(&fault_call);
  if (call != NULL) *call = id >= 0 ? kCalls[id].name : "";
  if (error != NULL) *error = id >= 0 ? fault_error_name : "";
  return atomic_load(&fault_index);
}

/* Writes the names of calls first..last (1-based, inclusive), one a line, to path; 1 on success. */
__attribute__((visibility("default"))) int aethercl_fault_write_trace(const char* path,
                                                                      unsigned long first,
                                                                      unsigned long last) {
  FILE* file = fopen(path, "w");
  if (file == NULL) return 0;
  unsigned long count = atomic_load(&call_count);
  if (last > count) last = count;
  if (last > TRACE_CAPACITY) last = TRACE_CAPACITY;
  for (unsigned long i = first == 0 ? 1 : first; i <= last; ++i)
    fprintf(file, "%s\n", kCalls[trace_ids[i - 1]].name);
  return fclose(file) == 0;
}

/* Writes "kind count" pairs of the objects the process holds references to into out (a C string;
 * "overflow" when the table filled, "over-released N" when releases outnumbered references);
 * returns the number of objects held. */
__attribute__((visibility("default"))) long aethercl_fault_live_objects(char* out, size_t size) {
  long counts[KIND_COUNT] = {0};
  long total = 0;
  pthread_mutex_lock(&objects_lock);
  for (size_t i = 0; i < OBJECT_CAPACITY; ++i) {
    if (objects[i].handle != NULL && objects[i].references > 0) {
      ++counts[objects[i].kind];
      ++total;
    }
  }
  int overflow = objects_overflow;
  long over = over_released;
  pthread_mutex_unlock(&objects_lock);
  if (out != NULL && size > 0) {
    size_t used = 0;
    out[0] = '\0';
    for (int kind = 0; kind < KIND_COUNT; ++kind) {
      if (counts[kind] != 0 && used < size)
        used += (size_t)snprintf(out + used, size - used, "%s%s %ld", used ? ", " : "",
                                 kKindNames[kind], counts[kind]);
    }
    if (overflow && used < size)
      used += (size_t)snprintf(out + used, size - used, "%soverflow", used ? ", " : "");
    if (over != 0 && used < size)
      snprintf(out + used, size - used, "%sover-released %ld", used ? ", " : "", over);
  }
  return total + (overflow ? 1 : 0) + over;
}

/* ---- the wrapped calls ---------------------------------------------------------------------- */

/* The next function of call `name`, looked up once. */
#define NEXT(name)                                                          \
  static __typeof__(&name) next_##name;                                     \
  if (next_##name == NULL) next_##name = (__typeof__(&name))next_function(#name); \
  if (next_##name == NULL) return CL_INVALID_OPERATION

/* A call that returns a status and creates nothing. */
#define STATUS_CALL(name, params, args)                  \
  CL_API_ENTRY cl_int CL_API_CALL name params {          \
    NEXT(name);                                          \
    if (fault_here(ID_##name)) return fault_code;        \
    return next_##name args;                             \
  }

/* A call that returns an object through its result and errcode_ret. */
#define CREATE_CALL(type, name, kind, params, args)                   \
  CL_API_ENTRY type CL_API_CALL name params {                         \
    static __typeof__(&name) next_##name;                             \
    if (next_##name == NULL) next_##name = (__typeof__(&name))next_function(#name); \
    if (next_##name == NULL || fault_here(ID_##name)) {               \
      if (errcode_ret != NULL)                                        \
        *errcode_ret = next_##name == NULL ? CL_INVALID_OPERATION : fault_code; \
      return NULL;                                                    \
    }                                                                 \
    type object = next_##name args;                                   \
    reference(object, kind, 1);                                       \
    return object;                                                    \
  }

/* Retain and release: the layer counts the references. */
#define RETAIN_CALL(type, name, kind)                       \
  CL_API_ENTRY cl_int CL_API_CALL name(type object) {       \
    NEXT(name);                                             \
    if (fault_here(ID_##name)) return fault_code;           \
    cl_int status = next_##name(object);                    \
    if (status == CL_SUCCESS) reference(object, kind, 1);   \
    return status;                                          \
  }
#define RELEASE_CALL(type, name, kind)                      \
  CL_API_ENTRY cl_int CL_API_CALL name(type object) {       \
    NEXT(name);                                             \
    int fail = fault_here(ID_##name);                       \
    cl_int status = next_##name(object);                    \
    if (status == CL_SUCCESS) reference(object, kind, -1);  \
    return fail ? fault_code : status;                      \
  }

/* An enqueue: its event, when asked for, is a new reference. */
#define ENQUEUE_CALL(name, params, args)                    \
  CL_API_ENTRY cl_int CL_API_CALL name params {             \
    NEXT(name);                                             \
    if (fault_here(ID_##name)) return fault_code;           \
    cl_int status = next_##name args;                       \
    if (status == CL_SUCCESS && event != NULL) reference(*event, K_EVENT, 1); \
    return status;                                          \
  }

STATUS_CALL(clGetPlatformIDs, (cl_uint num_entries, cl_platform_id* platforms, cl_uint* num),
            (num_entries, platforms, num))
STATUS_CALL(clGetPlatformInfo,
            (cl_platform_id platform, cl_platform_info param, size_t size, void* value,
             size_t* size_ret),
            (platform, param, size, value, size_ret))
STATUS_CALL(clGetDeviceIDs,
            (cl_platform_id platform, cl_device_type type, cl_uint num_entries,
             cl_device_id* devices, cl_uint* num),
            (platform, type, num_entries, devices, num))
STATUS_CALL(clGetDeviceInfo,
            (cl_device_id device, cl_device_info param, size_t size, void* value,
             size_t* size_ret),
            (device, param, size, value, size_ret))
CREATE_CALL(cl_context, clCreateContext, K_CONTEXT,
            (const cl_context_properties* properties, cl_uint num_devices,
             const cl_device_id* devices,
             void(CL_CALLBACK* notify)(const char*, const void*, size_t, void*), void* user_data,
             cl_int* errcode_ret),
            (properties, num_devices, devices, notify, user_data, errcode_ret))
RETAIN_CALL(cl_context, clRetainContext, K_CONTEXT)
RELEASE_CALL(cl_context, clReleaseContext, K_CONTEXT)
CREATE_CALL(cl_command_queue, clCreateCommandQueue, K_QUEUE,
            (cl_context context, cl_device_id device, cl_command_queue_properties properties,
             cl_int* errcode_ret),
            (context, device, properties, errcode_ret))
RETAIN_CALL(cl_command_queue, clRetainCommandQueue, K_QUEUE)
RELEASE_CALL(cl_command_queue, clReleaseCommandQueue, K_QUEUE)
STATUS_CALL(clGetCommandQueueInfo,
            (cl_command_queue queue, cl_command_queue_info param, size_t size, void* value,
             size_t* size_ret),
            (queue, param, size, value, size_ret))
CREATE_CALL(cl_mem, clCreateBuffer, K_MEM,
            (cl_context context, cl_mem_flags flags, size_t size, void* host, cl_int* errcode_ret),
            (context, flags, size, host, errcode_ret))
RELEASE_CALL(cl_mem, clReleaseMemObject, K_MEM)
STATUS_CALL(clGetMemObjectInfo,
            (cl_mem mem, cl_mem_info param, size_t size, void* value, size_t* size_ret),
            (mem, param, size, value, size_ret))
CREATE_CALL(cl_program, clCreateProgramWithSource, K_PROGRAM,
            (cl_context context, cl_uint count, const char** strings, const size_t* lengths,
             cl_int* errcode_ret),
            (context, count, strings, lengths, errcode_ret))
CREATE_CALL(cl_program, clCreateProgramWithBinary, K_PROGRAM,
            (cl_context context, cl_uint num_devices, const cl_device_id* devices,
             const size_t* lengths, const unsigned char** binaries, cl_int* binary_status,
             cl_int* errcode_ret),
            (context, num_devices, devices, lengths, binaries, binary_status, errcode_ret))
CREATE_CALL(cl_program, clCreateProgramWithIL, K_PROGRAM,
            (cl_context context, const void* il, size_t length, cl_int* errcode_ret),
            (context, il, length, errcode_ret))
STATUS_CALL(clBuildProgram,
            (cl_program program, cl_uint num_devices, const cl_device_id* devices,
             const char* options, void(CL_CALLBACK* notify)(cl_program, void*), void* user_data),
            (program, num_devices, devices, options, notify, user_data))
RELEASE_CALL(cl_program, clReleaseProgram, K_PROGRAM)
STATUS_CALL(clGetProgramInfo,
            (cl_program program, cl_program_info param, size_t size, void* value,
             size_t* size_ret),
            (program, param, size, value, size_ret))
STATUS_CALL(clGetProgramBuildInfo,
            (cl_program program, cl_device_id device, cl_program_build_info param, size_t size,
             void* value, size_t* size_ret),
            (program, device, param, size, value, size_ret))
CREATE_CALL(cl_kernel, clCreateKernel, K_KERNEL,
            (cl_program program, const char* name, cl_int* errcode_ret),
            (program, name, errcode_ret))
RELEASE_CALL(cl_kernel, clReleaseKernel, K_KERNEL)
STATUS_CALL(clSetKernelArg, (cl_kernel kernel, cl_uint index, size_t size, const void* value),
            (kernel, index, size, value))
STATUS_CALL(clGetKernelInfo,
            (cl_kernel kernel, cl_kernel_info param, size_t size, void* value, size_t* size_ret),
            (kernel, param, size, value, size_ret))
STATUS_CALL(clGetKernelArgInfo,
            (cl_kernel kernel, cl_uint index, cl_kernel_arg_info param, size_t size, void* value,
             size_t* size_ret),
            (kernel, index, param, size, value, size_ret))
STATUS_CALL(clGetKernelWorkGroupInfo,
            (cl_kernel kernel, cl_device_id device, cl_kernel_work_group_info param, size_t size,
             void* value, size_t* size_ret),
            (kernel, device, param, size, value, size_ret))
STATUS_CALL(clWaitForEvents, (cl_uint count, const cl_event* events), (count, events))
STATUS_CALL(clGetEventInfo,
            (cl_event event, cl_event_info param, size_t size, void* value, size_t* size_ret),
            (event, param, size, value, size_ret))
CREATE_CALL(cl_event, clCreateUserEvent, K_EVENT, (cl_context context, cl_int* errcode_ret),
            (context, errcode_ret))
RETAIN_CALL(cl_event, clRetainEvent, K_EVENT)
RELEASE_CALL(cl_event, clReleaseEvent, K_EVENT)
STATUS_CALL(clSetUserEventStatus, (cl_event event, cl_int status), (event, status))
STATUS_CALL(clSetEventCallback,
            (cl_event event, cl_int type, void(CL_CALLBACK* notify)(cl_event, cl_int, void*),
             void* user_data),
            (event, type, notify, user_data))
STATUS_CALL(clGetEventProfilingInfo,
            (cl_event event, cl_profiling_info param, size_t size, void* value, size_t* size_ret),
            (event, param, size, value, size_ret))
STATUS_CALL(clFlush, (cl_command_queue queue), (queue))
STATUS_CALL(clFinish, (cl_command_queue queue), (queue))
ENQUEUE_CALL(clEnqueueReadBuffer,
             (cl_command_queue queue, cl_mem buffer, cl_bool blocking, size_t offset, size_t size,
              void* ptr, cl_uint num_events, const cl_event* wait_list, cl_event* event),
             (queue, buffer, blocking, offset, size, ptr, num_events, wait_list, event))
ENQUEUE_CALL(clEnqueueWriteBuffer,
             (cl_command_queue queue, cl_mem buffer, cl_bool blocking, size_t offset, size_t size,
              const void* ptr, cl_uint num_events, const cl_event* wait_list, cl_event* event),
             (queue, buffer, blocking, offset, size, ptr, num_events, wait_list, event))
ENQUEUE_CALL(clEnqueueCopyBuffer,
             (cl_command_queue queue, cl_mem source, cl_mem destination, size_t source_offset,
              size_t destination_offset, size_t size, cl_uint num_events,
              const cl_event* wait_list, cl_event* event),
             (queue, source, destination, source_offset, destination_offset, size, num_events,
              wait_list, event))
ENQUEUE_CALL(clEnqueueFillBuffer,
             (cl_command_queue queue, cl_mem buffer, const void* pattern, size_t pattern_size,
              size_t offset, size_t size, cl_uint num_events, const cl_event* wait_list,
              cl_event* event),
             (queue, buffer, pattern, pattern_size, offset, size, num_events, wait_list, event))
ENQUEUE_CALL(clEnqueueUnmapMemObject,
             (cl_command_queue queue, cl_mem memobj, void* mapped, cl_uint num_events,
              const cl_event* wait_list, cl_event* event),
             (queue, memobj, mapped, num_events, wait_list, event))
ENQUEUE_CALL(clEnqueueNDRangeKernel,
             (cl_command_queue queue, cl_kernel kernel, cl_uint work_dim, const size_t* offset,
              const size_t* global, const size_t* local, cl_uint num_events,
              const cl_event* wait_list, cl_event* event),
             (queue, kernel, work_dim, offset, global, local, num_events, wait_list, event))
ENQUEUE_CALL(clEnqueueMarkerWithWaitList,
             (cl_command_queue queue, cl_uint num_events, const cl_event* wait_list,
              cl_event* event),
             (queue, num_events, wait_list, event))
ENQUEUE_CALL(clEnqueueBarrierWithWaitList,
             (cl_command_queue queue, cl_uint num_events, const cl_event* wait_list,
              cl_event* event),
             (queue, num_events, wait_list, event))

CL_API_ENTRY void* CL_API_CALL clEnqueueMapBuffer(cl_command_queue queue, cl_mem buffer,
                                                  cl_bool blocking, cl_map_flags flags,
                                                  size_t offset, size_t size, cl_uint num_events,
                                                  const cl_event* wait_list, cl_event* event,
                                                  cl_int* errcode_ret) {
  static __typeof__(&clEnqueueMapBuffer) next;
  if (next == NULL) next = (__typeof__(&clEnqueueMapBuffer))next_function("clEnqueueMapBuffer");
  if (next == NULL || fault_here(ID_clEnqueueMapBuffer)) {
    if (errcode_ret != NULL) *errcode_ret = next == NULL ? CL_INVALID_OPERATION : fault_code;
    return NULL;
  }
  cl_int status = CL_SUCCESS;
  void* mapped = next(queue, buffer, blocking, flags, offset, size, num_events, wait_list, event,
                      &status);
  if (status == CL_SUCCESS && event != NULL) reference(*event, K_EVENT, 1);
  if (errcode_ret != NULL) *errcode_ret = status;
  return mapped;
}

/* ---- extension functions -------------------------------------------------------------------- */

/* The platform's own function of each extension call this layer wraps (one platform here: the
 * last one asked for wins, which is enough for a machine with one OpenCL platform). */
static clCreateCommandBufferKHR_fn real_create_command_buffer;
static clFinalizeCommandBufferKHR_fn real_finalize_command_buffer;
static clReleaseCommandBufferKHR_fn real_release_command_buffer;
static clEnqueueCommandBufferKHR_fn real_enqueue_command_buffer;
static clCommandNDRangeKernelKHR_fn real_command_kernel;
static clCommandCopyBufferKHR_fn real_command_copy;
static clCommandFillBufferKHR_fn real_command_fill;
static clCreateProgramWithILKHR_fn real_create_with_il_khr;

static cl_command_buffer_khr CL_API_CALL create_command_buffer(
    cl_uint num_queues, const cl_command_queue* queues,
    const cl_command_buffer_properties_khr* properties, cl_int* errcode_ret) {
  if (fault_here(ID_clCreateCommandBufferKHR)) {
    if (errcode_ret != NULL) *errcode_ret = fault_code;
    return NULL;
  }
  cl_command_buffer_khr buffer =
      real_create_command_buffer(num_queues, queues, properties, errcode_ret);
  reference(buffer, K_COMMAND_BUFFER, 1);
  return buffer;
}

static cl_int CL_API_CALL finalize_command_buffer(cl_command_buffer_khr buffer) {
  if (fault_here(ID_clFinalizeCommandBufferKHR)) return fault_code;
  return real_finalize_command_buffer(buffer);
}

static cl_int CL_API_CALL release_command_buffer(cl_command_buffer_khr buffer) {
  int fail = fault_here(ID_clReleaseCommandBufferKHR);
  cl_int status = real_release_command_buffer(buffer);
  if (status == CL_SUCCESS) reference(buffer, K_COMMAND_BUFFER, -1);
  return fail ? fault_code : status;
}

static cl_int CL_API_CALL enqueue_command_buffer(cl_uint num_queues, cl_command_queue* queues,
                                                 cl_command_buffer_khr buffer, cl_uint num_events,
                                                 const cl_event* wait_list, cl_event* event) {
  if (fault_here(ID_clEnqueueCommandBufferKHR)) return fault_code;
  cl_int status =
      real_enqueue_command_buffer(num_queues, queues, buffer, num_events, wait_list, event);
  if (status == CL_SUCCESS && event != NULL) reference(*event, K_EVENT, 1);
  return status;
}

static cl_int CL_API_CALL command_kernel(
    cl_command_buffer_khr buffer, cl_command_queue queue,
    const cl_ndrange_kernel_command_properties_khr* properties, cl_kernel kernel,
    cl_uint work_dim, const size_t* offset, const size_t* global, const size_t* local,
    cl_uint num_sync, const cl_sync_point_khr* sync_list, cl_sync_point_khr* sync_point,
    cl_mutable_command_khr* mutable_handle) {
  if (fault_here(ID_clCommandNDRangeKernelKHR)) return fault_code;
  return real_command_kernel(buffer, queue, properties, kernel, work_dim, offset, global, local,
                             num_sync, sync_list, sync_point, mutable_handle);
}

static cl_int CL_API_CALL command_copy(cl_command_buffer_khr buffer, cl_command_queue queue,
                                       cl_mem source, cl_mem destination, size_t source_offset,
                                       size_t destination_offset, size_t size, cl_uint num_sync,
                                       const cl_sync_point_khr* sync_list,
                                       cl_sync_point_khr* sync_point,
                                       cl_mutable_command_khr* mutable_handle) {
  if (fault_here(ID_clCommandCopyBufferKHR)) return fault_code;
  return real_command_copy(buffer, queue, source, destination, source_offset, destination_offset,
                           size, num_sync, sync_list, sync_point, mutable_handle);
}

static cl_int CL_API_CALL command_fill(cl_command_buffer_khr buffer, cl_command_queue queue,
                                       cl_mem memory, const void* pattern, size_t pattern_size,
                                       size_t offset, size_t size, cl_uint num_sync,
                                       const cl_sync_point_khr* sync_list,
                                       cl_sync_point_khr* sync_point,
                                       cl_mutable_command_khr* mutable_handle) {
  if (fault_here(ID_clCommandFillBufferKHR)) return fault_code;
  return real_command_fill(buffer, queue, memory, pattern, pattern_size, offset, size, num_sync,
                           sync_list, sync_point, mutable_handle);
}

static cl_program CL_API_CALL create_with_il_khr(cl_context context, const void* il,
                                                 size_t length, cl_int* errcode_ret) {
  if (fault_here(ID_clCreateProgramWithILKHR)) {
    if (errcode_ret != NULL) *errcode_ret = fault_code;
    return NULL;
  }
  cl_program program = real_create_with_il_khr(context, il, length, errcode_ret);
  reference(program, K_PROGRAM, 1);
  return program;
}

/* Not counted: it creates nothing and fails only by answering NULL (no such function). */
CL_API_ENTRY void* CL_API_CALL clGetExtensionFunctionAddressForPlatform(cl_platform_id platform,
                                                                        const char* name) {
  static __typeof__(&clGetExtensionFunctionAddressForPlatform) next;
  if (next == NULL)
    next = (__typeof__(&clGetExtensionFunctionAddressForPlatform))next_function(
        "clGetExtensionFunctionAddressForPlatform");
  if (next == NULL) return NULL;
  void* real = next(platform, name);
  if (real == NULL || name == NULL) return real;
#define WRAP(call, slot, wrapper)           \
  if (strcmp(name, #call) == 0) {           \
    slot = (__typeof__(slot))real;          \
    return (void*)wrapper;                  \
  }
  WRAP(clCreateCommandBufferKHR, real_create_command_buffer, create_command_buffer)
  WRAP(clFinalizeCommandBufferKHR, real_finalize_command_buffer, finalize_command_buffer)
  WRAP(clReleaseCommandBufferKHR, real_release_command_buffer, release_command_buffer)
  WRAP(clEnqueueCommandBufferKHR, real_enqueue_command_buffer, enqueue_command_buffer)
  WRAP(clCommandNDRangeKernelKHR, real_command_kernel, command_kernel)
  WRAP(clCommandCopyBufferKHR, real_command_copy, command_copy)
  WRAP(clCommandFillBufferKHR, real_command_fill, command_fill)
  WRAP(clCreateProgramWithILKHR, real_create_with_il_khr, create_with_il_khr)
#undef WRAP
  return real;
}

/* ---- for the test's planning (the layer loaded with dlopen, not preloaded) ------------------ */

/* 1 when the specification lets call return error, both by name. */
__attribute__((visibility("default"))) int aethercl_fault_applies(const char* call,
                                                                  const char* error) {
  for (size_t i = 0; i < sizeof kErrors / sizeof kErrors[0]; ++i) {
    if (strcmp(error, kErrors[i].name) != 0) continue;
    for (int id = 0; id < CALL_COUNT; ++id) {
      if (strcmp(call, kCalls[id].name) == 0) return (kCalls[id].errors & kErrors[i].bit) != 0;
    }
  }
  return 0;
}
