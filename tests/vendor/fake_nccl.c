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
 * - Across processes: ncclGetUniqueId writes a rendezvous file's name into the id (nothing is
 *   created yet); ncclCommInitRank maps that file (created by whichever rank comes first; an
 *   all-zero header is its initial state), waits until all nranks ranks have joined (at most
 *   FAKE_NCCL_TIMEOUT seconds, default 60, then ncclSystemError), and rank 0 then unlinks it, so
 *   it is gone once the last rank unmaps it at ncclCommDestroy. Its collectives run at stream
 *   synchronisation in chunks: each rank copies its send chunk into its slot of the file, a
 *   process-shared barrier (futex), each rank computes its own output from every slot in the same
 *   order as above, a barrier. A barrier that waits FAKE_NCCL_TIMEOUT seconds (a peer died)
 *   ends the process with status 3 and a message. The file lives in FAKE_NCCL_DIR, else
 *   /dev/shm, else $TMPDIR or /tmp.
 * - FAKE_NCCL_FAIL=<function name> makes that function return ncclUnhandledCudaError;
 *   FAKE_ENGINE_TRACE (fake_cuda.c) records each collective.
 * - Built twice: FAKE_NCCL_INCOMPLETE leaves out ncclReduceScatter. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

void fake_cuda_trace(const char* what);
void fake_cuda_defer(void (*run)(void*), void* arg);

enum { SUCCESS = 0, UNHANDLED_CUDA = 1, SYSTEM_ERROR = 2, INTERNAL = 3, INVALID_ARGUMENT = 4,
       INVALID_USAGE = 5 };
enum { KIND_ALL_REDUCE, KIND_BROADCAST, KIND_ALL_GATHER, KIND_REDUCE_SCATTER };
enum { F16 = 6, F32 = 7, BF16 = 9 };
enum { OP_SUM = 0, OP_AVG = 4 };

struct Group { int ranks; int live; };
struct Shared;
/* group: ranks of this process (ncclCommInitAll); shared: a communicator across processes. */
struct ncclComm { struct Group* group; struct Shared* shared; int ranks; int rank; int device; };
typedef struct { char internal[128]; } ncclUniqueId;

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

/* ---- communicators across processes -------------------------------------------------------- */

#define MAX_RANKS 64
#define HEADER_BYTES 4096
#define SLOT_BYTES ((size_t)1 << 20)
#define SHARED_BYTES (HEADER_BYTES + MAX_RANKS * SLOT_BYTES) /* sparse: slots are touched as used */
static const char kIdMagic[8] = {'f', 'a', 'k', 'e', 'n', 'c', 'c', 'l'};

/* The rendezvous file's header; all zero is the state before the first rank joins. */
struct Shared {
  int nranks;
  int joined[MAX_RANKS];
  unsigned generation; /* barrier */
  int arrived;
};

static double timeout_seconds(void) {
  const char* text = getenv("FAKE_NCCL_TIMEOUT");
  double value = text != NULL ? atof(text) : 60.0;
  return value > 0 ? value : 60.0;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Every rank of shared waits here; -1 after timeout_seconds() (the barrier is then unusable). */
static int barrier(struct Shared* shared, int ranks) {
  unsigned generation = __atomic_load_n(&shared->generation, __ATOMIC_ACQUIRE);
  if (__atomic_add_fetch(&shared->arrived, 1, __ATOMIC_ACQ_REL) == ranks) {
    __atomic_store_n(&shared->arrived, 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&shared->generation, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &shared->generation, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    return 0;
  }
  double deadline = now_seconds() + timeout_seconds();
  while (__atomic_load_n(&shared->generation, __ATOMIC_ACQUIRE) == generation) {
    struct timespec wait = {0, 100 * 1000 * 1000};
    syscall(SYS_futex, &shared->generation, FUTEX_WAIT, generation, &wait, NULL, 0);
    if (now_seconds() > deadline) return -1;
  }
  return 0;
}

static unsigned char* slot(struct Shared* shared, int rank) {
  return (unsigned char*)shared + HEADER_BYTES + SLOT_BYTES * (size_t)rank;
}

static void collective_barrier(struct ncclComm* comm) {
  if (barrier(comm->shared, comm->ranks) == 0) return;
  fprintf(stderr, "fake_nccl: rank %d of %d waited %.0f s for its peers in a collective (a peer "
          "died or makes other calls); exiting\n", comm->rank, comm->ranks, timeout_seconds());
  _exit(3);
}

/* One rank's part of a collective across processes, chunk by chunk through the slots. */
static void run_across(void* arg) {
  struct Call* c = arg;
  struct ncclComm* comm = c->comm;
  int ranks = comm->ranks, me = comm->rank, dtype = c->dtype;
  size_t size = element_size(dtype), count = c->count;
  size_t sent = c->kind == KIND_REDUCE_SCATTER ? count * (size_t)ranks : count;
  size_t chunk = SLOT_BYTES / size;
  const unsigned char* send = c->send;
  unsigned char* recv = c->recv;
  for (size_t begin = 0; begin < sent; begin += chunk) {
    size_t n = sent - begin < chunk ? sent - begin : chunk;
    if (c->kind != KIND_BROADCAST || me == c->root) {
      memcpy(slot(comm->shared, me), send + begin * size, n * size);
    }
    collective_barrier(comm);
    if (c->kind == KIND_ALL_REDUCE || c->kind == KIND_REDUCE_SCATTER) {
      size_t first = c->kind == KIND_ALL_REDUCE ? 0 : count * (size_t)me;
      size_t last = c->kind == KIND_ALL_REDUCE ? count : first + count;
      for (size_t i = 0; i < n; ++i) {
        size_t at = begin + i;
        if (at < first || at >= last) continue;
        float acc = load(dtype, slot(comm->shared, ranks - 1), i);
        for (int r = ranks - 2; r >= 0; --r) {
          acc = round_to(dtype, acc + load(dtype, slot(comm->shared, r), i));
        }
        if (c->op == OP_AVG) acc = round_to(dtype, acc / (float)ranks);
        store(dtype, recv, at - first, acc);
      }
    } else if (c->kind == KIND_BROADCAST) {
      memmove(recv + begin * size, slot(comm->shared, c->root), n * size);
    } else {
      for (int r = 0; r < ranks; ++r) {
        memmove(recv + (count * (size_t)r + begin) * size, slot(comm->shared, r), n * size);
      }
    }
    collective_barrier(comm);
  }
  free(c);
}

static void defer_across(const struct Call* call) {
  struct Call* copy = malloc(sizeof *copy);
  *copy = *call;
  fake_cuda_defer(run_across, copy);
}

static const char* rendezvous_dir(void) {
  const char* dir = getenv("FAKE_NCCL_DIR");
  if (dir != NULL && *dir != '\0') return dir;
  if (access("/dev/shm", W_OK) == 0) return "/dev/shm";
  dir = getenv("TMPDIR");
  return dir != NULL && *dir != '\0' ? dir : "/tmp";
}

EXPORT int ncclGetUniqueId(ncclUniqueId* id) {
  static int counter;
  if (failing("ncclGetUniqueId")) return UNHANDLED_CUDA;
  if (id == NULL) return INVALID_ARGUMENT;
  memset(id, 0, sizeof *id);
  memcpy(id->internal, kIdMagic, sizeof kIdMagic);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int length = snprintf(id->internal + sizeof kIdMagic, sizeof id->internal - sizeof kIdMagic,
                        "%s/fake_nccl_%d_%d_%lx", rendezvous_dir(), (int)getpid(),
                        __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED),
                        (unsigned long)ts.tv_nsec ^ (unsigned long)ts.tv_sec);
  if (length < 0 || (size_t)length >= sizeof id->internal - sizeof kIdMagic) return SYSTEM_ERROR;
  return SUCCESS;
}

EXPORT int ncclCommInitRank(struct ncclComm** out, int nranks, ncclUniqueId id, int rank) {
  if (failing("ncclCommInitRank")) return UNHANDLED_CUDA;
  if (out == NULL || nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks) {
    return INVALID_ARGUMENT;
  }
  const char* path = id.internal + sizeof kIdMagic;
  if (memcmp(id.internal, kIdMagic, sizeof kIdMagic) != 0 ||
      memchr(path, '\0', sizeof id.internal - sizeof kIdMagic) == NULL || path[0] != '/' ||
      strstr(path, "/fake_nccl_") == NULL) {
    return INVALID_ARGUMENT; /* not an id of ncclGetUniqueId */
  }
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return SYSTEM_ERROR;
  struct stat info;
  if (fstat(fd, &info) != 0 || (info.st_size < (off_t)SHARED_BYTES &&
                                ftruncate(fd, (off_t)SHARED_BYTES) != 0)) {
    close(fd);
    return SYSTEM_ERROR;
  }
  struct Shared* shared = mmap(NULL, SHARED_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (shared == MAP_FAILED) return SYSTEM_ERROR;
  int expected = 0;
  if (!__atomic_compare_exchange_n(&shared->nranks, &expected, nranks, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE) && expected != nranks) {
    munmap(shared, SHARED_BYTES);
    return INVALID_ARGUMENT; /* another rank said another nranks */
  }
  expected = 0;
  if (!__atomic_compare_exchange_n(&shared->joined[rank], &expected, 1, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    munmap(shared, SHARED_BYTES);
    return INVALID_USAGE; /* that rank has joined already */
  }
  if (barrier(shared, nranks) != 0) {
    munmap(shared, SHARED_BYTES);
    unlink(path);
    return SYSTEM_ERROR; /* not every rank came within FAKE_NCCL_TIMEOUT */
  }
  if (rank == 0) unlink(path); /* every rank has it mapped */
  struct ncclComm* comm = calloc(1, sizeof *comm);
  comm->shared = shared;
  comm->ranks = nranks;
  comm->rank = rank;
  fake_cuda_trace("ncclCommInitRank");
  *out = comm;
  return SUCCESS;
}

/* ---- both kinds ----------------------------------------------------------------------------- */

static int enqueue(struct Call call, const char* name) {
  if (failing(name)) return UNHANDLED_CUDA;
  if (call.comm == NULL || (call.comm->group == NULL && call.comm->shared == NULL)) {
    return INVALID_ARGUMENT;
  }
  if (call.dtype != F16 && call.dtype != F32 && call.dtype != BF16) return INVALID_ARGUMENT;
  if (call.comm->shared != NULL && depth == 0) {
    fake_cuda_trace(name);
    defer_across(&call);
    return SUCCESS;
  }
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
    if (pending[i].comm->shared != NULL) {
      defer_across(&pending[i]);
      pending[i].comm = NULL;
      continue;
    }
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
    comms[r]->ranks = ranks;
    comms[r]->rank = r;
    comms[r]->device = devices != NULL ? devices[r] : r;
  }
  fake_cuda_trace("ncclCommInitAll");
  return SUCCESS;
}

static int release(struct ncclComm* comm, const char* name) {
  if (comm == NULL) return INVALID_ARGUMENT;
  fake_cuda_trace(name);
  if (comm->shared != NULL) {
    munmap(comm->shared, SHARED_BYTES);
  } else if (--comm->group->live == 0) {
    free(comm->group);
  }
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
  if (comm != NULL && (root < 0 || root >= comm->ranks)) return INVALID_ARGUMENT;
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
