/* Test engine: the CUDA driver API functions the vendor layer resolves, with host memory as
 * "device memory" (tests/python/test_vendor_engines.py says how the tests use it).
 *
 * - Exports aethercl_engine_host_memory: the layer then matches its devices to CPU OpenCL devices
 *   (device i = gpu_index i) and imports its memory by mapping the exported descriptor.
 * - Memory: cuMemCreate makes a memfd, cuMemAddressReserve reserves address space, cuMemMap maps
 *   the memfd there, cuMemExportToShareableHandle hands out a duplicate of the descriptor.
 * - Streams are deferred: work enqueued on a stream (cuMemcpy*Async, NCCL calls through
 *   fake_cuda_defer) runs only when a stream is synchronised, so a caller that reads results
 *   without waiting sees stale data.
 * - FAKE_CUDA_FAIL=<function name> makes that function fail (CUDA_ERROR_OUT_OF_MEMORY for the
 *   allocations, CUDA_ERROR_UNKNOWN otherwise); FAKE_CUDA_DEVICES sets the device count (4);
 *   FAKE_ENGINE_TRACE=<file> appends the name of each allocation, copy and NCCL call to the file.
 * - Built twice: FAKE_CUDA_INCOMPLETE leaves out cuMemExportToShareableHandle (a driver too old
 *   for the layer). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <pthread.h>

#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct { unsigned char bytes[16]; } CUuuid;
typedef struct { int type; int id; } CUmemLocation;
typedef struct {
  int type;
  int requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  unsigned char alloc_flags[8];
} CUmemAllocationProp;
typedef struct { CUmemLocation location; int flags; } CUmemAccessDesc;

enum { SUCCESS = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3,
       INVALID_DEVICE = 101, INVALID_CONTEXT = 201, UNKNOWN = 999 };

struct FakeContext { int device; };
struct FakeJob { void (*run)(void*); void* arg; struct FakeJob* next; };
struct CUstream_st { int device; };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct FakeContext contexts[64];
static int initialised;
static __thread struct FakeContext* current;
static struct FakeJob* jobs_head;
static struct FakeJob* jobs_tail;

EXPORT int aethercl_engine_host_memory = 1;

EXPORT void fake_cuda_trace(const char* what) {
  const char* path = getenv("FAKE_ENGINE_TRACE");
  if (path == NULL || *path == '\0') return;
  FILE* file = fopen(path, "a");
  if (file == NULL) return;
  fprintf(file, "%s\n", what);
  fclose(file);
}

static int failing(const char* function) {
  const char* wanted = getenv("FAKE_CUDA_FAIL");
  return wanted != NULL && strcmp(wanted, function) == 0;
}

static int device_count(void) {
  const char* text = getenv("FAKE_CUDA_DEVICES");
  int count = text != NULL ? atoi(text) : 4;
  return count < 0 ? 0 : (count > 64 ? 64 : count);
}

#define FAIL_IF_ASKED(name, code) do { if (failing(name)) return (code); } while (0)
#define REQUIRE_INIT() do { if (!initialised) return NOT_INITIALIZED; } while (0)

/* Queues work for the next stream synchronisation (used by fake_nccl.c too). */
EXPORT void fake_cuda_defer(void (*run)(void*), void* arg) {
  struct FakeJob* job = calloc(1, sizeof *job);
  job->run = run;
  job->arg = arg;
  pthread_mutex_lock(&lock);
  if (jobs_tail != NULL) jobs_tail->next = job; else jobs_head = job;
  jobs_tail = job;
  pthread_mutex_unlock(&lock);
}

static void run_jobs(void) {
  pthread_mutex_lock(&lock);
  struct FakeJob* job = jobs_head;
  jobs_head = jobs_tail = NULL;
  pthread_mutex_unlock(&lock);
  while (job != NULL) {
    struct FakeJob* next = job->next;
    job->run(job->arg);
    free(job);
    job = next;
  }
}

EXPORT CUresult cuInit(unsigned flags) {
  (void)flags;
  FAIL_IF_ASKED("cuInit", UNKNOWN);
  initialised = 1;
  return SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int* version) {
  if (version == NULL) return INVALID_VALUE;
  *version = 12040;
  return SUCCESS;
}

static const char* error_name(CUresult error) {
  switch (error) {
    case SUCCESS: return "CUDA_SUCCESS";
    case INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case UNKNOWN: return "CUDA_ERROR_UNKNOWN";
    default: return NULL;
  }
}

EXPORT CUresult cuGetErrorName(CUresult error, const char** name) {
  *name = error_name(error);
  return *name != NULL ? SUCCESS : INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult error, const char** text) {
  switch (error) {
    case SUCCESS: *text = "no error"; break;
    case OUT_OF_MEMORY: *text = "out of memory (fake engine)"; break;
    case UNKNOWN: *text = "unknown error (fake engine, asked by FAKE_CUDA_FAIL)"; break;
    default: *text = error_name(error); break;
  }
  return *text != NULL ? SUCCESS : INVALID_VALUE;
}

EXPORT CUresult cuDeviceGetCount(int* count) {
  REQUIRE_INIT();
  *count = device_count();
  return SUCCESS;
}

EXPORT CUresult cuDeviceGet(int* device, int ordinal) {
  REQUIRE_INIT();
  if (ordinal < 0 || ordinal >= device_count()) return INVALID_DEVICE;
  *device = ordinal;
  return SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int* value, int attribute, int device) {
  REQUIRE_INIT();
  if (device < 0 || device >= device_count()) return INVALID_DEVICE;
  *value = attribute == 33 ? device + 1 : 0; /* PCI bus = ordinal + 1, the rest 0 */
  return SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid(CUuuid* uuid, int device) {
  REQUIRE_INIT();
  if (device < 0 || device >= device_count()) return INVALID_DEVICE;
  memset(uuid->bytes, 0, sizeof uuid->bytes);
  memcpy(uuid->bytes, "fake-cuda-dev", 13);
  uuid->bytes[15] = (unsigned char)device;
  return SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(struct FakeContext** context, int device) {
  REQUIRE_INIT();
  FAIL_IF_ASKED("cuDevicePrimaryCtxRetain", UNKNOWN);
  if (device < 0 || device >= device_count()) return INVALID_DEVICE;
  contexts[device].device = device;
  *context = &contexts[device];
  return SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease(int device) {
  return device >= 0 && device < device_count() ? SUCCESS : INVALID_DEVICE;
}

EXPORT CUresult cuCtxGetCurrent(struct FakeContext** context) {
  *context = current;
  return SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(struct FakeContext* context) {
  current = context;
  return SUCCESS;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                              int option) {
  (void)option;
  if (prop->location.id < 0 || prop->location.id >= device_count()) return INVALID_DEVICE;
  *granularity = (size_t)sysconf(_SC_PAGESIZE);
  return SUCCESS;
}

/* Allocation handles are memfd descriptors + 1 (0 is never a handle). */
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                            const CUmemAllocationProp* prop, unsigned long long flags) {
  (void)flags;
  REQUIRE_INIT();
  FAIL_IF_ASKED("cuMemCreate", OUT_OF_MEMORY);
  if (current == NULL) return INVALID_CONTEXT;
  if (prop->requestedHandleTypes != 1 || prop->location.type != 1) return INVALID_VALUE;
  int fd = memfd_create("fake_cuda", MFD_CLOEXEC);
  if (fd < 0) return OUT_OF_MEMORY;
  if (ftruncate(fd, (off_t)size) != 0) {
    close(fd);
    return OUT_OF_MEMORY;
  }
  fake_cuda_trace("cuMemCreate");
  *handle = (CUmemGenericAllocationHandle)fd + 1;
  return SUCCESS;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  return close((int)(handle - 1)) == 0 ? SUCCESS : INVALID_VALUE;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr* pointer, size_t size, size_t alignment,
                                    CUdeviceptr address, unsigned long long flags) {
  (void)alignment, (void)address, (void)flags;
  void* reserved = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) return OUT_OF_MEMORY;
  *pointer = (CUdeviceptr)(uintptr_t)reserved;
  return SUCCESS;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr pointer, size_t size) {
  return munmap((void*)(uintptr_t)pointer, size) == 0 ? SUCCESS : INVALID_VALUE;
}

EXPORT CUresult cuMemMap(CUdeviceptr pointer, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags) {
  (void)flags;
  void* mapped = mmap((void*)(uintptr_t)pointer, size, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_FIXED, (int)(handle - 1), (off_t)offset);
  return mapped == MAP_FAILED ? INVALID_VALUE : SUCCESS;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr pointer, size_t size) {
  /* Back to a reservation, as the real driver leaves it. */
  void* reserved = mmap((void*)(uintptr_t)pointer, size, PROT_NONE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return reserved == MAP_FAILED ? INVALID_VALUE : SUCCESS;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr pointer, size_t size, const CUmemAccessDesc* desc,
                               size_t count) {
  (void)pointer, (void)size;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.id < 0 || desc[i].location.id >= device_count()) return INVALID_DEVICE;
  }
  return SUCCESS;
}

#ifndef FAKE_CUDA_INCOMPLETE
EXPORT CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                             int type, unsigned long long flags) {
  (void)flags;
  FAIL_IF_ASKED("cuMemExportToShareableHandle", UNKNOWN);
  if (type != 1) return INVALID_VALUE;
  int fd = dup((int)(handle - 1));
  if (fd < 0) return INVALID_VALUE;
  *(int*)shareable = fd;
  return SUCCESS;
}
#endif

EXPORT CUresult cuStreamCreate(struct CUstream_st** stream, unsigned flags) {
  (void)flags;
  if (current == NULL) return INVALID_CONTEXT;
  *stream = calloc(1, sizeof **stream);
  (*stream)->device = current->device;
  return SUCCESS;
}

EXPORT CUresult cuStreamDestroy(struct CUstream_st* stream) {
  free(stream);
  return SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(struct CUstream_st* stream) {
  (void)stream;
  FAIL_IF_ASKED("cuStreamSynchronize", UNKNOWN);
  run_jobs();
  return SUCCESS;
}

struct CopyJob { CUdeviceptr dst, src; size_t bytes; };

static void run_copy(void* arg) {
  struct CopyJob* job = arg;
  memmove((void*)(uintptr_t)job->dst, (const void*)(uintptr_t)job->src, job->bytes);
  free(job);
}

static CUresult defer_copy(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  struct CopyJob* job = malloc(sizeof *job);
  job->dst = dst;
  job->src = src;
  job->bytes = bytes;
  fake_cuda_defer(run_copy, job);
  return SUCCESS;
}

EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, struct FakeContext* dst_context, CUdeviceptr src,
                                  struct FakeContext* src_context, size_t bytes,
                                  struct CUstream_st* stream) {
  (void)stream;
  FAIL_IF_ASKED("cuMemcpyPeerAsync", UNKNOWN);
  if (dst_context == NULL || src_context == NULL) return INVALID_CONTEXT;
  fake_cuda_trace("cuMemcpyPeerAsync");
  return defer_copy(dst, src, bytes);
}

EXPORT CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                  struct CUstream_st* stream) {
  (void)stream;
  fake_cuda_trace("cuMemcpyDtoDAsync");
  return defer_copy(dst, src, bytes);
}
