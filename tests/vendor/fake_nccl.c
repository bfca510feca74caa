/* Test engine: the NCCL functions the vendor layer resolves, computing on host memory (the fake
 * CUDA's "device memory", tests/vendor/fake_cuda.c).
 *
 * - Calls are collected between ncclGroupStart and ncclGroupEnd; at the outermost ncclGroupEnd
 *   every communicator set must have one matching call per rank (else ncclInvalidUsage, as a real
 *   single process would hang), and the collective is queued on the fake CUDA streams: it runs
 *   when a stream is synchronised.
 * - Reductions fold in reverse rank order (rank P-1 first), rounding to the dtype after each step
 *   as NCCL does for f16/bf16: a different order from the driver's exact path on purpose. Avg is
 *   that sum divided by P.
 * - FAKE_NCCL_FAIL=<function name> makes that function return ncclUnhandledCudaError;
 *   FAKE_ENGINE_TRACE (fake_cuda.c) records each collective.
 * - Built twice: FAKE_NCCL_INCOMPLETE leaves out ncclReduceScatter. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

void fake_cuda_trace(const char* what);
void fake_cuda_defer(void (*run)(void*), void* arg);

enum { SUCCESS = 0, UNHANDLED_CUDA = 1, SYSTEM_ERROR = 2, INTERNAL = 3, INVALID_ARGUMENT = 4,
       INVALID_USAGE = 5 };
enum { KIND_ALL_REDUCE, KIND_BROADCAST, KIND_ALL_GATHER, KIND_REDUCE_SCATTER };
enum { F16 = 6, F32 = 7, BF16 = 9 };
enum { OP_SUM = 0, OP_AVG = 4 };

struct Group { int ranks; int live; };
struct ncclComm { struct Group* group; int rank; int device; };

struct Call {
  int kind;
  const void* send;
  void* recv;
  size_t count;
  int dtype, op, root;
  struct ncclComm* comm;
};

static int depth;
static struct Call pending[256];
static int pending_count;

static int failing(const char* function) {
  const char* wanted = getenv("FAKE_NCCL_FAIL");
  return wanted != NULL && strcmp(wanted, function) == 0;
}

static size_t element_size(int dtype) { return dtype == F32 ? 4 : 2; }

static float load(int dtype, const void* base, size_t i) {
  if (dtype == F32) return ((const float*)base)[i];
  if (dtype == F16) return (float)((const _Float16*)base)[i];
  uint32_t bits = (uint32_t)((const uint16_t*)base)[i] << 16;
  float value;
  memcpy(&value, &bits, 4);
  return value;
}

static void store(int dtype, void* base, size_t i, float value) {
  if (dtype == F32) {
    ((float*)base)[i] = value;
  } else if (dtype == F16) {
    ((_Float16*)base)[i] = (_Float16)value;
  } else {
    uint32_t bits;
    memcpy(&bits, &value, 4);
    if (value != value) {
      bits = (bits >> 16) | 0x40;
    } else {
      bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16;
    }
    ((uint16_t*)base)[i] = (uint16_t)bits;
  }
}

static float round_to(int dtype, float value) {
  unsigned char cell[4];
  store(dtype, cell, 0, value);
  return load(dtype, cell, 0);
}

struct Job { int ranks; struct Call calls[64]; };

/* calls[r] is rank r's call. */
static void run_job(void* arg) {
  struct Job* job = arg;
  int ranks = job->ranks;
  struct Call* c = job->calls;
  size_t count = c[0].count, size = element_size(c[0].dtype);
  int dtype = c[0].dtype;
  if (c[0].kind == KIND_ALL_REDUCE || c[0].kind == KIND_REDUCE_SCATTER) {
    size_t total = c[0].kind == KIND_ALL_REDUCE ? count : count * (size_t)ranks;
    float* result = malloc(total * sizeof(float));
    for (size_t i = 0; i < total; ++i) {
      float acc = load(dtype, c[ranks - 1].send, i);
      for (int r = ranks - 2; r >= 0; --r) acc = round_to(dtype, acc + load(dtype, c[r].send, i));
      if (c[0].op == OP_AVG) acc = round_to(dtype, acc / (float)ranks);
      result[i] = acc;
    }
    for (int r = 0; r < ranks; ++r) {
      size_t first = c[0].kind == KIND_ALL_REDUCE ? 0 : count * (size_t)r;
      for (size_t i = 0; i < count; ++i) store(dtype, c[r].recv, i, result[first + i]);
    }
    free(result);
  } else if (c[0].kind == KIND_BROADCAST) {
    int root = c[0].root;
    for (int r = 0; r < ranks; ++r) {
      if (c[r].recv != c[root].send) memmove(c[r].recv, c[root].send, count * size);
    }
  } else {
    unsigned char* gathered = malloc(count * size * (size_t)ranks);
    for (int r = 0; r < ranks; ++r) memcpy(gathered + count * size * r, c[r].send, count * size);
    for (int r = 0; r < ranks; ++r) memcpy(c[r].recv, gathered, count * size * (size_t)ranks);
    free(gathered);
  }
  free(job);
}

static int enqueue(struct Call call, const char* name) {
  if (failing(name)) return UNHANDLED_CUDA;
  if (call.comm == NULL || call.comm->group == NULL) return INVALID_ARGUMENT;
  if (call.dtype != F16 && call.dtype != F32 && call.dtype != BF16) return INVALID_ARGUMENT;
  if (depth == 0) return INVALID_USAGE; /* one process, several ranks: only inside a group */
  if (pending_count == 256) return INTERNAL;
  fake_cuda_trace(name);
  pending[pending_count++] = call;
  return SUCCESS;
}

static int flush(void) {
  int status = SUCCESS;
  for (int i = 0; i < pending_count; ++i) {
    if (pending[i].comm == NULL) continue;
    struct Group* group = pending[i].comm->group;
    struct Job* job = calloc(1, sizeof *job);
    job->ranks = group->ranks;
    int found = 0;
    for (int j = i; j < pending_count; ++j) {
      if (pending[j].comm == NULL || pending[j].comm->group != group) continue;
      if (pending[j].kind != pending[i].kind || pending[j].count != pending[i].count) continue;
      int rank = pending[j].comm->rank;
      if (job->calls[rank].comm != NULL) continue; /* that rank's next collective */
      job->calls[rank] = pending[j];
      pending[j].comm = NULL;
      ++found;
      if (found == group->ranks) break;
    }
    if (found != group->ranks) {
      free(job);
      status = INVALID_USAGE;
      continue;
    }
    fake_cuda_defer(run_job, job);
  }
  pending_count = 0;
  return status;
}

EXPORT int ncclGetVersion(int* version) {
  *version = 22105;
  return SUCCESS;
}

EXPORT const char* ncclGetErrorString(int result) {
  switch (result) {
    case SUCCESS: return "no error";
    case UNHANDLED_CUDA: return "unhandled cuda error (fake engine, asked by FAKE_NCCL_FAIL)";
    case SYSTEM_ERROR: return "unhandled system error";
    case INTERNAL: return "internal error";
    case INVALID_ARGUMENT: return "invalid argument";
    case INVALID_USAGE: return "invalid usage";
    default: return "unknown result code";
  }
}

EXPORT int ncclCommInitAll(struct ncclComm** comms, int ranks, const int* devices) {
  if (failing("ncclCommInitAll")) return UNHANDLED_CUDA;
  if (ranks < 1 || ranks > 64) return INVALID_ARGUMENT;
  struct Group* group = calloc(1, sizeof *group);
  group->ranks = group->live = ranks;
  for (int r = 0; r < ranks; ++r) {
    comms[r] = calloc(1, sizeof **comms);
    comms[r]->group = group;
    comms[r]->rank = r;
    comms[r]->device = devices != NULL ? devices[r] : r;
  }
  fake_cuda_trace("ncclCommInitAll");
  return SUCCESS;
}

static int release(struct ncclComm* comm, const char* name) {
  if (comm == NULL) return INVALID_ARGUMENT;
  fake_cuda_trace(name);
  if (--comm->group->live == 0) free(comm->group);
  free(comm);
  return SUCCESS;
}

EXPORT int ncclCommDestroy(struct ncclComm* comm) { return release(comm, "ncclCommDestroy"); }
EXPORT int ncclCommAbort(struct ncclComm* comm) { return release(comm, "ncclCommAbort"); }

EXPORT int ncclGroupStart(void) {
  ++depth;
  return SUCCESS;
}

EXPORT int ncclGroupEnd(void) {
  if (depth == 0) return INVALID_USAGE;
  if (--depth > 0) return SUCCESS;
  if (failing("ncclGroupEnd")) {
    pending_count = 0;
    return UNHANDLED_CUDA;
  }
  return flush();
}

EXPORT int ncclAllReduce(const void* send, void* recv, size_t count, int dtype, int op,
                         struct ncclComm* comm, void* stream) {
  (void)stream;
  if (op != OP_SUM && op != OP_AVG) return INVALID_ARGUMENT;
  struct Call call = {KIND_ALL_REDUCE, send, recv, count, dtype, op, 0, comm};
  return enqueue(call, "ncclAllReduce");
}

EXPORT int ncclBroadcast(const void* send, void* recv, size_t count, int dtype, int root,
                         struct ncclComm* comm, void* stream) {
  (void)stream;
  if (comm != NULL && (root < 0 || root >= comm->group->ranks)) return INVALID_ARGUMENT;
  struct Call call = {KIND_BROADCAST, send, recv, count, dtype, 0, root, comm};
  return enqueue(call, "ncclBroadcast");
}

EXPORT int ncclAllGather(const void* send, void* recv, size_t count, int dtype,
                         struct ncclComm* comm, void* stream) {
  (void)stream;
  struct Call call = {KIND_ALL_GATHER, send, recv, count, dtype, 0, 0, comm};
  return enqueue(call, "ncclAllGather");
}

#ifndef FAKE_NCCL_INCOMPLETE
EXPORT int ncclReduceScatter(const void* send, void* recv, size_t count, int dtype, int op,
                             struct ncclComm* comm, void* stream) {
  (void)stream;
  if (op != OP_SUM && op != OP_AVG) return INVALID_ARGUMENT;
  struct Call call = {KIND_REDUCE_SCATTER, send, recv, count, dtype, op, 0, comm};
  return enqueue(call, "ncclReduceScatter");
}
#endif
