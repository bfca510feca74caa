/* AetherCL driver: the public C ABI of driver.so / driver.dll, and its manual.
 *
 * One shared library exports the OCL-LLM compute API, the AetherCL host-memory ("simulated") API and
 * the aethercl_* extensions. abi/driver.abi lists every exported symbol; a test keeps this header,
 * that manifest and the library's dynamic symbol table identical. docs/ABI.md explains the rules
 * below, how the existing clients call these functions, and which defects of the original drivers
 * this library does not repeat.
 *
 * Conventions shared by every function below:
 *  - gpu_index names a device of the visible device list (aethercl_device_count(); order: GPUs,
 *    accelerators, CPUs; AETHERCL_DEVICES narrows or reorders it). initialize_gpu refuses an index
 *    that is out of range. Every other call accepts any int: an index that was never initialised
 *    runs on the only initialised device when exactly one is, and fails otherwise (docs/ABI.md
 *    section 3.2).
 *  - Buffer handles are opaque tokens from allocate_gpu_memory, never pointers. Unknown, freed,
 *    NULL or other-device handles are refused; handle values are never reused.
 *  - int functions return exactly 1 on success and 0 on failure; pointer and address functions
 *    return NULL / 0 on failure. After any failure aethercl_last_error() explains it; the library
 *    keeps working after every refused call. No function aborts, throws or exits the process.
 *  - Tensors are dense row-major float32 (int32 for ids and targets) unless stated otherwise.
 *  - Ordering: every call observes the results of all earlier calls on the same stream (see
 *    "Streams and events"; a program that creates no stream has one stream per device, so every
 *    call observes all earlier calls on the device). Compute calls may return before the device
 *    has finished (AETHERCL_SYNC=1 finishes after every call); read_gpu_to_host_blocking,
 *    aethercl_synchronize and shutdown_driver wait for every stream of the device and report
 *    deferred device errors. Host memory passed to any call may be reused or freed as soon as the
 *    call returns, except pinned memory given to aethercl_write_async / aethercl_read_async.
 *  - Writes past a buffer's end (a user kernel's bug): with AETHERCL_CHECK_BOUNDS=1 every buffer
 *    has a guard zone after its bytes; the guards of buffers that launches took are compared by
 *    the synchronising calls above, aethercl_stream_synchronize, a blocking aethercl_read_async
 *    and free_gpu_memory; a damaged guard fails that call with AETHERCL_OUT_OF_RANGE, naming the
 *    buffer, its size, how many bytes past its end were written and the launches that took it
 *    since the last clean check, and is re-armed (README.md, environment variables).
 *  - Thread-safety: every function may be called from any thread; calls on one device are
 *    serialised by the driver. The last error is per thread.
 *  - In place (one handle passed as several buffer arguments): each section below says which
 *    pairings its functions accept. An accepted pairing computes exactly what separate buffers
 *    with the same contents would give (inputs are read as they were before the call; where an
 *    output is smaller than the input sharing its buffer, the bytes past the output keep their
 *    contents). Every other pairing is refused with AETHERCL_INVALID_ARGUMENT and a message
 *    naming both arguments, before anything is written. Two inputs may always share a buffer.
 *  - fork(): see "Processes and fork()" below; a child forked after the first device call
 *    cannot use devices.
 */
#ifndef AETHERCL_DRIVER_H
#define AETHERCL_DRIVER_H

#include <stddef.h>

#define AETHERCL_VERSION_MAJOR 0
#define AETHERCL_VERSION_MINOR 1
#define AETHERCL_VERSION_PATCH 0
#define AETHERCL_VERSION_STRING "0.1.0"
/* Bumped whenever exported symbols are added; matches aethercl_abi_version(). */
#define AETHERCL_ABI_VERSION 4

#if defined(_WIN32)
#  if defined(AETHERCL_BUILDING_DRIVER)
#    define AETHERCL_API __declspec(dllexport)
#  else
#    define AETHERCL_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define AETHERCL_API __attribute__((visibility("default")))
#else
#  define AETHERCL_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes of aethercl_last_error_code(). Values are stable. (One table, abi/status.def, gives
 * the driver's names and the Python constants; a test keeps this enum equal to it.) */
enum aethercl_status {
  AETHERCL_OK = 0,               /* success: no error */
  AETHERCL_INVALID_ARGUMENT = 1, /* a NULL, negative, overflowing or inconsistent argument */
  AETHERCL_INVALID_HANDLE = 2,   /* unknown, freed or other-device buffer handle or address */
  AETHERCL_OUT_OF_RANGE = 3,     /* a buffer is too small for the requested bytes or elements */
  AETHERCL_OUT_OF_MEMORY = 4,    /* device or host memory exhausted (after releasing the pool) */
  AETHERCL_NOT_INITIALIZED = 5,  /* no device initialised, called after shutdown_driver, or in a
                                    child forked after the first device call */
  AETHERCL_NO_DEVICE = 6,        /* no OpenCL platform/device, or gpu_index out of range */
  AETHERCL_BUILD_FAILED = 7,     /* a kernel program failed to build; the message has the log */
  AETHERCL_DEVICE_ERROR = 8,     /* an OpenCL call failed; the message names it and the code */
  AETHERCL_NOT_IMPLEMENTED = 9,  /* the entry point exists but is not available in this build */
  AETHERCL_INTERNAL = 10         /* a bug in the driver; please report the message */
};

/* ===================================================================================== */
/* Processes and fork()                                                                   */
/* ===================================================================================== */

/* OpenCL state (contexts, queues, buffers, and the threads of the OpenCL runtime) cannot cross
 * fork(): a child that used it would hang in its first call that waits for the device. The first
 * call that touches OpenCL (aethercl_device_count, aethercl_device_info, initialize_gpu, ...)
 * therefore arms a fork handler (pthread_atfork), and in a child forked without exec after it,
 * and in that child's own children, every function that needs a device fails at once, without
 * waiting and without taking any lock a parent thread may have held: it returns its failure value
 * (0 or NULL; 16 from simulated_get_compute_unit_count; shutdown_driver and free_gpu_memory do
 * nothing) with AETHERCL_NOT_INITIALIZED and a message that says why. initialize_gpu is refused
 * too: the child cannot start afresh, because the OpenCL runtime's own process-wide state is the
 * parent's. The parent's objects are neither used nor released in the child, and the parent
 * keeps working. In the child, simulated_kernel_allocate/free/write/read (host memory) and the
 * version, error and status-name functions keep working, and leaving it by exit() or _exit() is
 * safe. What to do instead: start worker processes with the multiprocessing "spawn" or
 * "forkserver" start method, exec a new program after fork(), or fork before the first device
 * call (a child of a process that never touched OpenCL initialises and works normally). */

/* ===================================================================================== */
/* Lifecycle                                                                              */
/* ===================================================================================== */

/* Initialises device gpu_index: context, in-order queue, memory pool, kernel cache. Kernels are
 * built lazily on first use. Idempotent: a second call for an initialised index returns 1 and
 * changes nothing. Returns 0 when no OpenCL device exists or gpu_index is out of range (the message
 * lists the devices). Several indices may be initialised side by side. */
AETHERCL_API int initialize_gpu(int gpu_index);

/* Waits for all outstanding work, then releases every buffer still registered, all programs,
 * queues and contexts of every device. Harmless before initialisation and when called twice.
 * Afterwards the driver behaves as before initialisation (allocations return NULL, compute and
 * transfer calls return 0, frees are no-ops) until initialize_gpu is called again; handles issued
 * before the shutdown stay invalid forever. Host blocks of simulated_kernel_allocate survive. */
AETHERCL_API void shutdown_driver(void);

/* ===================================================================================== */
/* Device memory and transfers                                                            */
/* ===================================================================================== */

/* Allocates size bytes of device memory (contents undefined) from the device's caching pool and
 * returns a new handle. NULL when size is 0, the device is not initialised, size exceeds the
 * device's maximum allocation, or memory is exhausted even after the pool released its cache. */
AETHERCL_API void* allocate_gpu_memory(int gpu_index, size_t size);

/* Returns the buffer to the pool in stream order (work already enqueued on it still completes).
 * NULL, unknown or already-freed handles, and calls after shutdown, are harmless no-ops. With
 * AETHERCL_CHECK_BOUNDS=1 the call first waits for the buffer's work and compares its guard: a
 * write past its end sets aethercl_last_error_code() to AETHERCL_OUT_OF_RANGE with the report,
 * and the buffer is freed all the same. */
AETHERCL_API void free_gpu_memory(int gpu_index, void* buffer_handle);

/* Copies size bytes from host memory to buffer bytes [offset, offset+size). The data is staged in
 * driver memory, so the call returns without draining the queue and host_source_ptr may be freed
 * at once. size 0 returns 1 (host_source_ptr may then be NULL). Returns 0 for an invalid handle,
 * a NULL source, or offset+size beyond the buffer (checked without overflow). */
AETHERCL_API int write_host_to_gpu_blocking(int gpu_index, void* gpu_buffer_handle, size_t offset,
                                            size_t size, const void* host_source_ptr);

/* Copies buffer bytes [offset, offset+size) to host memory after all earlier work on the device
 * has finished; this is the synchronisation point and reports deferred device errors. size 0
 * returns 1. Returns 0 for an invalid handle, a NULL destination or an out-of-range span. */
AETHERCL_API int read_gpu_to_host_blocking(int gpu_index, void* gpu_buffer_handle, size_t offset,
                                           size_t size, void* host_destination_ptr);

/* Copies bytes [0, size) of src to bytes [0, size) of dst (a prefix copy is allowed). size 0
 * returns 1; src == dst is a no-op. Returns 0 when size exceeds either buffer. */
AETHERCL_API int execute_clone_on_gpu(int gpu_index, void* src_buffer, void* dst_buffer,
                                      size_t size);

/* ===================================================================================== */
/* Matrix products (float32, docs/ABI.md section 4.4). Argument order is B, M, N, K.      */
/* In place: never. An output that is an input, or dA == dB, is refused.                  */
/* ===================================================================================== */

/* C(B,M,N) = A(B,M,K) @ W(K,N), W shared across the batch; B = 1 for 2-D. K == 0 returns 1 and
 * leaves C unwritten; any zero dimension returns 1 without touching memory; negative -> 0.
 * Every buffer must hold its full declared shape (float32), also when a dimension is zero. */
AETHERCL_API int execute_matmul_on_gpu(int gpu_index, void* buffer_a, void* buffer_b,
                                       void* buffer_c, int B, int M, int N, int K);

/* dA(B,M,K) = dC @ W^T and dW(K,N) = sum over b of A[b]^T @ dC[b] (overwritten, not
 * accumulated). buffer_da and/or buffer_db may be NULL and are then skipped; both NULL returns 1. */
AETHERCL_API int execute_matmul_backward_on_gpu(int gpu_index, void* buffer_a, void* buffer_b,
                                                void* buffer_dc, void* buffer_da, void* buffer_db,
                                                int B, int M, int N, int K);

/* C[b] = A[b](M,K) @ B[b](K,N) for every b < B. */
AETHERCL_API int execute_matmul_batched_on_gpu(int gpu_index, void* buffer_a, void* buffer_b,
                                               void* buffer_c, int B, int M, int N, int K);

/* dA[b] = dC[b] @ B[b]^T and dB[b] = A[b]^T @ dC[b]; no reduction over b. NULL rules as for
 * execute_matmul_backward_on_gpu. */
AETHERCL_API int execute_matmul_batched_backward_on_gpu(int gpu_index, void* buffer_a,
                                                        void* buffer_b, void* buffer_dc,
                                                        void* buffer_da, void* buffer_db, int B,
                                                        int M, int N, int K);

/* ===================================================================================== */
/* Elementwise (docs/ABI.md section 4.5): num_elements 0 returns 1, negative returns 0.   */
/* In place: any output may be any input. dA == dB is refused, and so is a mul_backward   */
/* whose dA is dC or A while its dB is dC or B (each would overwrite the other's input).  */
/* ===================================================================================== */

/* c = a + b. */
AETHERCL_API int execute_add_on_gpu(int gpu_index, void* buffer_a, void* buffer_b, void* buffer_c,
                                    int num_elements);
/* c = a * b. */
AETHERCL_API int execute_mul_on_gpu(int gpu_index, void* buffer_a, void* buffer_b, void* buffer_c,
                                    int num_elements);
/* dA = dC * B and dB = dC * A; either output may be NULL (skipped, never written through). */
AETHERCL_API int execute_mul_backward_on_gpu(int gpu_index, void* buffer_dC, void* buffer_A,
                                             void* buffer_B, void* buffer_dA, void* buffer_dB,
                                             int num_elements);
/* y = 0.5 x (1 + erf(x / sqrt 2)), the exact erf form. */
AETHERCL_API int execute_gelu_on_gpu(int gpu_index, void* buffer_input, void* buffer_output,
                                     int num_elements);
/* dx = dy * GELU'(x); argument order input, grad_output, grad_input. */
AETHERCL_API int execute_gelu_backward_on_gpu(int gpu_index, void* buffer_input,
                                              void* buffer_grad_output, void* buffer_grad_input,
                                              int num_elements);

/* ===================================================================================== */
/* Row-wise (docs/ABI.md section 4.6): one work-group per row, deterministic reductions.  */
/* In place: softmax, log-softmax, LayerNorm and their backward passes accept an output   */
/* that is any input. Cross-entropy refuses an output that is an input or the other one.  */
/* ===================================================================================== */

/* y = (x - mean) / sqrt(var + eps) per row, biased two-pass variance; eps <= 0 means 1e-5. */
AETHERCL_API int execute_layernorm_on_gpu(int gpu_index, void* buffer_input, void* buffer_output,
                                          int num_rows, int row_size, float eps);
/* dx from dy and the forward input x (statistics recomputed). */
AETHERCL_API int execute_layernorm_backward_on_gpu(int gpu_index, void* buffer_dy, void* buffer_x,
                                                   void* buffer_dx, int num_rows, int row_size,
                                                   float eps);
/* y = exp(x - max) / (sum + 1e-9) per row. */
AETHERCL_API int execute_softmax_on_gpu(int gpu_index, void* buffer_input, void* buffer_output,
                                        int num_rows, int row_size);
/* dx = (dy - sum(dy * y)) * y per row; y is the forward output. */
AETHERCL_API int execute_softmax_backward_on_gpu(int gpu_index, void* buffer_dy, void* buffer_y,
                                                 void* buffer_dx, int num_rows, int row_size);
/* out = (x - max) - ln(sum + 1e-9) over rows B*S of length V. */
AETHERCL_API int execute_log_softmax_stable_gpu(int gpu_index, void* input_logits,
                                                void* output_log_probs, int B, int S, int V);
/* grad = exp(lp) - onehot(t); loss = -lp[t] (0 for a target outside [0, V), whose grad row is the
 * plain probabilities). target_indices is int32 (B*S). */
AETHERCL_API int execute_cross_entropy_loss_grad_gpu(int gpu_index, void* log_probs,
                                                     void* target_indices, void* grad_input,
                                                     void* loss_per_sample, int B, int S, int V);

/* ===================================================================================== */
/* Layout (docs/ABI.md section 4.7): exact copies.                                        */
/* In place: never (input == output is refused).                                          */
/* ===================================================================================== */

/* out(cols, rows) = in(rows, cols)^T. */
AETHERCL_API int execute_transpose_on_gpu(int gpu_index, void* buffer_input, void* buffer_output,
                                          int rows, int cols);
/* dA(rows_A, cols_A) = dC(cols_A, rows_A)^T. */
AETHERCL_API int execute_transpose_backward_on_gpu(int gpu_index, void* buffer_dC,
                                                   void* buffer_dA, int rows_A, int cols_A);
/* out(B_flat, d2, d1) with out[b,j,i] = in[b,i,j]. */
AETHERCL_API int execute_transpose_batched_gpu(int gpu_index, void* in, void* out, int B_flat,
                                               int d1, int d2);
/* out(B, D2, D1, D3) with out[b,j,i,k] = in[b,i,j,k]. */
AETHERCL_API int execute_transpose_12_batched_gpu(int gpu_index, void* buffer_in,
                                                  void* buffer_out, int B, int D1, int D2,
                                                  int D3);

/* ===================================================================================== */
/* Reductions, broadcasts, embeddings, optimiser (docs/ABI.md sections 4.8, 4.9)          */
/* In place: the broadcast adds accept output == the full-size input (c == a, output ==   */
/* input) and refuse the broadcast operand as output; reduce_sum and both embedding       */
/* functions refuse an output that is an input; Adam accepts grad == param, m or v and    */
/* refuses param, m and v sharing a buffer.                                               */
/* ===================================================================================== */

/* out[n] = sum over b, m of in[b,m,n]. */
AETHERCL_API int execute_reduce_sum_gpu(int gpu_index, void* in, void* out, int B, int M, int N);
/* c[b,m,n] = a[b,m,n] + bias[n]. */
AETHERCL_API int execute_broadcast_add_gpu(int gpu_index, void* a, void* b, void* c, int B, int M,
                                           int N);
/* y[b,s,e] = x[b,s,e] + pe[s,e]; pe_slice holds S*E floats. */
AETHERCL_API int execute_add_broadcast_pe_gpu(int gpu_index, void* input, void* pe_slice,
                                              void* output, int B, int S, int E);
/* o[i,j,:] = w[idx[i,j],:], a zero row for an id outside [0, v). idx is int32 (b, s). o may be
 * tagged AETHERCL_F16 or AETHERCL_BF16 (aethercl_buffer_set_dtype): the float32 weights are then
 * written rounded once to that format (nearest even), sizes in its elements; w is a float32
 * master (any tag but AETHERCL_F32 refused), as is d_w below. */
AETHERCL_API int execute_embedding_lookup_gpu(int gpu_index, void* idx, void* w, void* o, int b,
                                              int s, int d, int v);
/* d_w[idx[i,j],:] += d_o[i,j,:] for every valid id; accumulates, no update is lost. d_o may be
 * f16 or bf16 by its tag (read into float32; d_w stays float32). By default
 * the additions run in ascending (i, j) order (bit-reproducible); AETHERCL_DETERMINISTIC=0
 * selects a float-atomic kernel whose rounding may vary run to run. */
AETHERCL_API int execute_embedding_backward_gpu(int gpu_index, void* d_o, void* idx, void* d_w,
                                                int b, int s, int d, int v);
/* Adam with coupled L2 weight decay and bias correction, in place on param, m and v. Returns 0
 * for t <= 0, lr < 0, beta outside [0, 1), eps < 0 or weight_decay < 0, and for NaN or infinite
 * lr, eps, weight_decay or betas; num_elements == 0 returns 1 before these checks. */
AETHERCL_API int execute_adam_update_on_gpu(int gpu_index, void* param_buffer, void* grad_buffer,
                                            void* m_buffer, void* v_buffer, int num_elements,
                                            int t, float lr, float beta1, float beta2, float eps,
                                            float weight_decay);

/* ===================================================================================== */
/* Host-memory ("simulated") API (docs/ABI.md section 4.10): registered host blocks.      */
/* ===================================================================================== */

/* Returns the address of a new 64-byte aligned host block of size bytes (contents undefined, as
 * with malloc); 0 for size 0 or on failure. gpu_index is ignored by this function and the next
 * three. Blocks are plain host memory: they stay valid across shutdown_driver until freed. Only a
 * block's start address is valid; an address inside a block is refused like an unknown one. */
AETHERCL_API unsigned long long simulated_kernel_allocate(int gpu_index, size_t size);
/* Frees a block; size is ignored. 0, unknown and already-freed addresses do nothing (message). */
AETHERCL_API void simulated_kernel_free(int gpu_index, unsigned long long address, size_t size);
/* Copies size bytes from source into the start of the block (a prefix when size is smaller);
 * refused (no copy, message) when the address is not a live block, size exceeds it, or source
 * is NULL with size > 0. size 0 copies nothing. */
AETHERCL_API void simulated_kernel_write(int gpu_index, unsigned long long address, size_t size,
                                         const void* source);
/* Copies the first size bytes of the block to destination, refused like simulated_kernel_write.
 * The block stays valid (unlike the original, which freed it here): read it again or free it. */
AETHERCL_API void simulated_kernel_read(int gpu_index, unsigned long long address, size_t size,
                                        void* destination);
/* float64 C = A(rows_a, cols_a) @ B(rows_b, cols_b) on the device (host fallback without fp64, with
 * a warning), returned as a new registered block of rows_a*cols_b*8 bytes; each element is summed
 * with k ascending. shape_* are int[2] {rows, cols}. The operands are copied to device buffers,
 * the product is read back asynchronously and confirmed by an event callback before the call
 * returns. Returns 0 for NULL, mismatched or non-positive shapes, sizes that differ from the
 * shapes, unknown addresses or operand blocks smaller than the sizes, or when no device is
 * initialised. The inputs are neither modified nor freed. */
AETHERCL_API unsigned long long simulated_matrix_multiply(int gpu_index,
                                                          unsigned long long address_a,
                                                          unsigned long long address_b,
                                                          size_t size_a, size_t size_b,
                                                          int* shape_a, int* shape_b);
/* The device's compute-unit count; 16 when gpu_index resolves to no initialised device. */
AETHERCL_API unsigned int simulated_get_compute_unit_count(int gpu_index);

/* ===================================================================================== */
/* AetherCL extensions                                                                    */
/* ===================================================================================== */

/* The library version, e.g. "0.1.0"; equals AETHERCL_VERSION_STRING of the header it was built
 * with. Never NULL. */
AETHERCL_API const char* aethercl_version(void);

/* The ABI version the library implements; compare with AETHERCL_ABI_VERSION. */
AETHERCL_API int aethercl_abi_version(void);

/* The message of the calling thread's most recent failed call, "" when its most recent call
 * succeeded. Owned by the library; valid until the thread's next driver call. Never NULL. */
AETHERCL_API const char* aethercl_last_error(void);

/* The aethercl_status code that goes with aethercl_last_error(); AETHERCL_OK when none. */
AETHERCL_API int aethercl_last_error_code(void);

/* A static name for a status code ("AETHERCL_OUT_OF_RANGE"), "AETHERCL_UNKNOWN_STATUS" otherwise. */
AETHERCL_API const char* aethercl_status_name(int status);

/* Number of visible OpenCL devices (enumerated once; no initialisation needed); 0 when none, and
 * 0 with a message naming the call when an OpenCL call of the enumeration failed (the next call
 * enumerates again, as do initialize_gpu and aethercl_device_info, which fail the same way). */
AETHERCL_API int aethercl_device_count(void);

/* Writes a JSON object describing visible device gpu_index (name, vendor, platform, type, compute
 * units, memory, local memory, max work-group size, fp64/fp16/subgroup/atomics support,
 * initialised) into buffer, truncated to capacity-1 bytes and NUL-terminated. Returns the full
 * JSON length (call with buffer NULL to size it), 0 on failure. */
AETHERCL_API size_t aethercl_device_info(int gpu_index, char* buffer, size_t capacity);

/* Waits until all work enqueued on the device has finished. Returns 0 if a deferred device error
 * is found (the message names it). */
AETHERCL_API int aethercl_synchronize(int gpu_index);

/* Writes the device's memory statistics as JSON (bytes in use, cached, peak, live buffers, pool
 * hits and misses, staging bytes, labelled buffers), with the same buffer rules as
 * aethercl_device_info. Returns the full length, 0 on failure. */
AETHERCL_API size_t aethercl_memory_stats(int gpu_index, char* buffer, size_t capacity);

/* Attaches a label (copied, at most 63 bytes kept) to a buffer; error messages and memory
 * statistics name the buffer by it. NULL or "" clears it. Returns 0 for an invalid handle.
 * The label is read up to its NUL; ill-formed UTF-8 (overlong forms, surrogates, code points above
 * U+10FFFF, bytes C0, C1, F5-FF, stray or missing continuation bytes) is replaced by U+FFFD, one
 * per maximal ill-formed subpart as Unicode recommends, and the result is cut to 63 bytes without
 * splitting a character. Every JSON text the library writes is well-formed UTF-8. */
AETHERCL_API int aethercl_set_buffer_label(int gpu_index, void* buffer_handle, const char* label);

/* Starts tracing every kernel launch and transfer on every device, with device timestamps from
 * OpenCL profiling events; aethercl_trace_stop writes them to path as Chrome-trace JSON (open in
 * chrome://tracing or Perfetto). AETHERCL_TRACE=path does the same from initialize_gpu to
 * shutdown_driver and logs a per-kernel summary. Returns 0 when a trace is already running. */
AETHERCL_API int aethercl_trace_start(const char* path);

/* Waits for all devices, writes the trace file and ends tracing; the per-kernel summary goes to the
 * log at info level. Streams other than timing streams get queues without profiling back, and
 * launches the submission thread again. Returns 0 when no trace is running or the file cannot be
 * written. */
AETHERCL_API int aethercl_trace_stop(void);

/* Writes the per-kernel totals of the running trace as JSON ({"active", "pending", "kernels":
 * [{"name", "calls", "total_ns", "bytes"}]}), with the buffer rules of aethercl_device_info. */
AETHERCL_API size_t aethercl_trace_summary(char* buffer, size_t capacity);

/* ===================================================================================== */
/* Streams and events (ABI version 3)                                                      */
/* ===================================================================================== */
/* A stream is an in-order sequence of work on one device. Each device has a default stream (the
 * one every call used before streams existed) and any number of streams made with
 * aethercl_stream_create. Every function without a stream argument (all the seed functions)
 * runs on the calling thread's current stream of its device, the default stream until
 * aethercl_stream_set_current says otherwise, as PyTorch's current stream. Work on different
 * streams is ordered only by events (aethercl_event_record + aethercl_stream_wait_event) and by
 * the calls that wait for every stream (read_gpu_to_host_blocking, aethercl_synchronize,
 * shutdown_driver).
 *
 * Streams and events are opaque tokens of their own type: a token of another type (a buffer
 * handle where a stream is expected, say), a destroyed, unknown or made-up one, or a stream of
 * another device is refused with AETHERCL_INVALID_HANDLE and a message naming the argument.
 * Token values are never reused. A `stream` argument of NULL means the device's default stream.
 *
 * Memory follows streams: a buffer freed while work on other streams may still use it is handed
 * out again only after that work (the driver notes every stream a buffer is used on; events
 * recorded at the free decide when the memory can be reused), so freeing a buffer is always safe
 * as soon as the freeing thread no longer needs it.
 *
 * Where enqueueing work costs the calling thread microseconds (GPUs), a submission thread per
 * device enqueues on the caller's behalf: every call still validates its arguments and reports
 * refusals at once; a failure while enqueueing is reported by the next call that waits
 * (read_gpu_to_host_blocking, aethercl_synchronize, aethercl_stream_synchronize,
 * aethercl_event_synchronize), like a kernel that failed on the device. AETHERCL_SUBMIT_THREAD=0
 * or 1 turns it off or on for every device. */

#define AETHERCL_STREAM_TIMING 1u /* aethercl_stream_create: events on it record device times */

/* A new stream on device gpu_index; flags is 0 or AETHERCL_STREAM_TIMING (other bits are
 * refused). Returns NULL on failure. */
AETHERCL_API void* aethercl_stream_create(int gpu_index, unsigned int flags);

/* Destroys a stream of the device. Work already issued on it still completes (this returns
 * without waiting for it); events recorded on it stay valid. A thread whose current stream it
 * was uses the default stream afterwards. NULL (the default stream) is refused. */
AETHERCL_API int aethercl_stream_destroy(int gpu_index, void* stream);

/* Makes stream the calling thread's current stream of the device (NULL: the default stream).
 * Other threads keep theirs. */
AETHERCL_API int aethercl_stream_set_current(int gpu_index, void* stream);

/* The calling thread's current stream of the device: NULL for the default stream, and NULL with
 * aethercl_last_error() set on failure (an uninitialised device), so check the last error. */
AETHERCL_API void* aethercl_stream_current(int gpu_index);

/* Waits on the host until all work issued on stream so far has finished (other threads may keep
 * issuing work meanwhile). Returns 0 with a message for a deferred error of the device. */
AETHERCL_API int aethercl_stream_synchronize(int gpu_index, void* stream);

/* A new event marking the current end of stream's work (NULL: the default stream): it completes
 * when everything issued on the stream before it has. Destroy it with aethercl_event_destroy.
 * Returns NULL on failure. */
AETHERCL_API void* aethercl_event_record(int gpu_index, void* stream);

/* Makes later work on stream (of device gpu_index) wait until event has completed, without
 * blocking the calling thread. The event may belong to another device: the wait then goes
 * through the host (OpenCL's event callback completes a stand-in event of this device), still
 * without blocking the caller. */
AETHERCL_API int aethercl_stream_wait_event(int gpu_index, void* stream, void* event);

/* Sets *done to 1 when the event has completed, 0 when not yet; never blocks. Returns 0 (with
 * *done untouched) for a bad token or NULL done, and when the work before the event failed on
 * the device. */
AETHERCL_API int aethercl_event_query(void* event, int* done);

/* Waits on the host until the event has completed. Returns 0 when the work before it failed or
 * the device reports a deferred error. */
AETHERCL_API int aethercl_event_synchronize(void* event);

/* *ms = device time from start to end in milliseconds (negative when end was recorded first),
 * with the resolution of the device's profiling clock. Both events must come from streams made
 * with AETHERCL_STREAM_TIMING on the same device; waits for both to complete first. */
AETHERCL_API int aethercl_event_elapsed_ms(void* start, void* end, float* ms);

/* Releases an event token. Waits and queries already started are unaffected. */
AETHERCL_API int aethercl_event_destroy(void* event);

/* ===================================================================================== */
/* Host memory and transfers (ABI version 3)                                               */
/* ===================================================================================== */

/* size bytes of page-locked host memory (a mapped CL_MEM_ALLOC_HOST_PTR allocation in device
 * gpu_index's context), usable with any device and any host code. Transfers between it and
 * buffers of that device are asynchronous DMA (aethercl_write_async / aethercl_read_async); with
 * other devices it behaves as ordinary memory. shutdown_driver frees it. NULL on failure (size 0
 * is refused). */
AETHERCL_API void* aethercl_host_alloc(int gpu_index, size_t size);

/* Frees memory from aethercl_host_alloc, after the transfers that use it have finished (it waits
 * for every stream of its device, as cudaFreeHost does); memory a live graph's recorded transfers
 * name is released with the last such graph, the pointer being invalid at once. NULL is a no-op;
 * any other pointer (including one inside an allocation) is refused with AETHERCL_INVALID_HANDLE. */
AETHERCL_API int aethercl_host_free(void* host_ptr);

/* Copies size bytes from source to buffer at byte offset, ordered on stream (NULL: the default
 * stream). With source in pinned memory of this device (aethercl_host_alloc) it returns once the
 * copy is issued and source must stay untouched until the stream has passed this point (an event
 * or aethercl_stream_synchronize says when). With any other memory it copies source before
 * returning (the copy to the device still runs asynchronously), so source is free at once. Size 0
 * does nothing; offset + size beyond the buffer is refused with AETHERCL_OUT_OF_RANGE. */
AETHERCL_API int aethercl_write_async(int gpu_index, void* buffer, size_t offset, size_t size,
                                      const void* source, void* stream);

/* Copies size bytes of buffer at byte offset to destination, ordered on stream (NULL: the
 * default stream). Into pinned memory of this device it returns once issued: the bytes are there
 * when the stream has passed this point. Into any other memory it returns after the bytes have
 * arrived (waiting for that stream only). */
AETHERCL_API int aethercl_read_async(int gpu_index, void* buffer, size_t offset, size_t size,
                                     void* destination, void* stream);

/* Copies size bytes from src at src_offset to dst at dst_offset on the device, ordered on stream
 * (NULL: the default stream). Overlapping ranges of one buffer are refused; each range must lie
 * within its buffer. */
AETHERCL_API int aethercl_copy(int gpu_index, void* dst, size_t dst_offset, void* src,
                               size_t src_offset, size_t size, void* stream);

/* Sets size bytes of buffer from byte offset to (unsigned char)value, ordered on stream (NULL: the
 * default stream), as C's memset. */
AETHERCL_API int aethercl_memset(int gpu_index, void* buffer, size_t offset, size_t size,
                                 int value, void* stream);
/* General matrix product (ABI version 3)                                                 */
/* ===================================================================================== */

/* Element types of typed memory (aethercl_gemm, aethercl_buffer_set_dtype, aethercl_convert, the
 * 16-bit operands of the training ops). Half types are stored as 16-bit patterns on every device
 * (no cl_khr_fp16 needed). */
enum aethercl_dtype {
  AETHERCL_F32 = 0, AETHERCL_F16 = 1, AETHERCL_BF16 = 2, AETHERCL_F64 = 3,
  AETHERCL_I32 = 4, AETHERCL_I64 = 5, AETHERCL_I8 = 6, AETHERCL_U8 = 7
};

/* Compute modes of aethercl_gemm; every one accumulates in float32. What each multiplies:
 *   FP32   the inputs as they are (float32 products: exact for f32, f16 and bf16 storage).
 *   TF32   inputs rounded to TF32 (10 mantissa bits; round to nearest, ties to even).
 *   3XTF32 each input split into a TF32 part and a TF32 residual; three products (residual x
 *          part, part x residual, part x part) give about float32 accuracy on tensor cores.
 *   BF16   inputs rounded to bfloat16 (7 mantissa bits, nearest even).
 *   FP16   inputs rounded to IEEE half (nearest even; beyond 65504 they become infinite).
 *   DEFAULT the device's matmul precision (aethercl_set_matmul_precision), FP32 unless set.
 * Inputs already stored in a narrower format are exact in the wider ones (f16 and bf16 values are
 * TF32 values; f16 values are FP16 values, bf16 values BF16 values). On NVIDIA GPUs of compute
 * capability 8.0 and later the reduced modes run on tensor cores; everywhere else portable
 * kernels round the same way, so results agree up to the order of the float32 additions. */
enum aethercl_compute {
  AETHERCL_COMPUTE_DEFAULT = 0, AETHERCL_COMPUTE_FP32 = 1, AETHERCL_COMPUTE_TF32 = 2,
  AETHERCL_COMPUTE_3XTF32 = 3, AETHERCL_COMPUTE_BF16 = 4, AETHERCL_COMPUTE_FP16 = 5
};

/* One product C[b] (m x n) = alpha * op(A[b]) op(B[b]) + beta * C[b], for b < batch.
 * Row-major: op(A) is m x k and op(B) is k x n. A is stored m x k with lda >= k (trans_a = 0) or
 * k x m with lda >= m (trans_a = 1); B is stored k x n with ldb >= n or n x k with ldb >= k; C is
 * m x n with ldc >= n. A leading dimension of a matrix without columns may be anything >= 1.
 * Batch item b of an operand starts at offset + b * stride elements (a stride of 0 broadcasts
 * A or B over the batch; stride_c = 0 with batch > 1 is refused). a, b and c are buffer handles
 * of the device; offsets, strides and leading dimensions count elements of the operand's dtype. */
typedef struct aethercl_gemm_desc {
  size_t struct_size;              /* sizeof(aethercl_gemm_desc) of the caller */
  int trans_a, trans_b;            /* 0 or 1 */
  int m, n, k, batch;              /* C[b] (m x n) = alpha * op(A[b]) op(B[b]) + beta * C[b] */
  long long stride_a, stride_b, stride_c;   /* elements between batch items; 0 = broadcast */
  int lda, ldb, ldc;               /* row-major leading dimensions, in elements */
  float alpha, beta;
  void* a; size_t offset_a; int dtype_a;    /* offsets in elements */
  void* b; size_t offset_b; int dtype_b;
  void* c; size_t offset_c; int dtype_c;
  int compute;                     /* compute mode */
} aethercl_gemm_desc;

/* Enqueues the product described by desc on stream (NULL: the device's default stream; otherwise
 * a live stream of this device from aethercl_stream_create, refused with a message when it is
 * not) and returns 1; the call may return before the device has finished, like every call that
 * issues work on a stream.
 * dtypes: A and B the same, each AETHERCL_F32, AETHERCL_F16 or AETHERCL_BF16; C one of those
 * three. Zero work is not an error: m = 0, n = 0 or batch = 0 returns 1 and touches nothing; k = 0
 * computes C = beta * C. beta = 0 never reads C (NaN or garbage there does not leak into the
 * result). alpha and beta are applied in float32 to the float32 sum; the result is rounded once
 * to C's dtype (nearest even). Every element touched is checked against the buffers before
 * anything runs: the call is refused (0, message naming the field) for a NULL desc, a
 * struct_size below this header's sizeof(aethercl_gemm_desc) (a larger one from a newer header is
 * accepted), trans flags other than 0/1, negative m, n, k, batch, strides or offsets, leading
 * dimensions below the stored row length, stride_c = 0 with batch > 1, unknown, unsupported or
 * mismatched dtypes, an unknown compute mode, invalid or foreign buffer handles, operands that
 * do not fit their buffers (offset + (batch - 1) * stride + (rows - 1) * ld + cols elements),
 * overflowing sizes, and a C that overlaps A or B in the same buffer. Every mode runs on every
 * device (portable kernels where there are no tensor cores): no mode is refused as unsupported.
 * Tensor cores are probed at the first reduced-precision product of a device; a failed probe
 * logs one warning and leaves the portable kernels in charge. Float32 A and B in BF16 or FP16
 * mode are rounded to 16 bits by the tensor-core kernel as it reads them (with
 * AETHERCL_GEMM_NARROWING=copies, or where that kernel does not take the product, first into
 * 16-bit copies from the device's memory pool, half their size). On
 * compute capability 9.0 a large product may also copy A and B into a packed layout from the pool
 * (about their size; twice that for 3XTF32), returned when it has run; where that memory is not
 * available, a kernel that reads the operands in place runs instead. */
AETHERCL_API int aethercl_gemm(int gpu_index, const aethercl_gemm_desc* desc, void* stream);

/* Sets the compute mode the seed matrix products (execute_matmul_on_gpu, its backward and
 * batched forms) and AETHERCL_COMPUTE_DEFAULT use on device gpu_index, like
 * torch.set_float32_matmul_precision: AETHERCL_COMPUTE_FP32 or AETHERCL_COMPUTE_DEFAULT restore
 * exact float32. Until the first call, the environment variable AETHERCL_MATMUL_PRECISION
 * (fp32, tf32, 3xtf32, bf16 or fp16, any case) gives the mode; a malformed value is reported once
 * (a warning naming it) and FP32 is used. The setting lasts until changed or until shutdown_driver. Returns 0
 * for an unknown mode or an uninitialised device. */
AETHERCL_API int aethercl_set_matmul_precision(int gpu_index, int compute);

/* ===================================================================================== */
/* GEMM with a fused epilogue (ABI version 4)                                             */
/* ===================================================================================== */

/* What aethercl_gemm_fused applies to each output v = alpha * op(A) op(B) + beta * C:
 *   BIAS            v + bias[j]
 *   BIAS_RELU       relu(v + bias[j])         relu(x) = x < 0 ? 0 : x (NaN stays NaN)
 *   BIAS_GELU       gelu(v + bias[j])         gelu(x) = 0.5 x (1 + erf(x / sqrt 2))
 *   BIAS_GELU_TANH  gelu_tanh(v + bias[j])    0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
 *   RELU            relu(v)
 *   GELU            gelu(v)
 *   DGELU           v * gelu'(pre[i, j])       the backward of GELU (erf) through a product:
 *                                              pre is read, not written (the forward's value
 *                                              before the GELU, stored like C)
 * for the output in column j. The activations and GELU's slope are aethercl_unary's
 * (AETHERCL_UNARY_RELU, _GELU, _GELU_TANH) and aethercl_unary_backward's, evaluated the same
 * way; DGELU's product is not rounded before the multiply (one rounding where the unfused
 * product and aethercl_unary_backward round twice). */
enum aethercl_gemm_epilogue_kind {
  AETHERCL_EPILOGUE_BIAS = 1, AETHERCL_EPILOGUE_BIAS_RELU = 2, AETHERCL_EPILOGUE_BIAS_GELU = 3,
  AETHERCL_EPILOGUE_BIAS_GELU_TANH = 4, AETHERCL_EPILOGUE_RELU = 5, AETHERCL_EPILOGUE_GELU = 6,
  AETHERCL_EPILOGUE_DGELU = 7
};

/* The epilogue of aethercl_gemm_fused. bias (kinds 1-4) holds n elements of dtype_bias
 * (AETHERCL_F32, AETHERCL_F16 or AETHERCL_BF16) from element offset_bias; element j is added to
 * column j of every row of every batch item (one bias per column, shared by the batch). pre
 * (kinds 1-6: optional, NULL: not stored) receives the value before the activation, stored in C's
 * layout and dtype: element offset_pre + b * desc->stride_c + i * desc->ldc + j holds C's element
 * (b, i, j) before act. DGELU (kind 7) reads pre (required) in that same layout and dtype: the
 * pre of the forward's BIAS_GELU or GELU product. residual (optional, NULL: none; any kind) is
 * read in C's layout and dtype from offset_residual and added to each output after the epilogue
 * (C = act(...) + residual, summed in float32 and rounded once): a residual connection y = r +
 * x W + b in the product's store. Offsets count elements. residual and offset_residual came
 * after the first version-4 header: a struct_size that ends at offset_pre is accepted and means
 * no residual. */
typedef struct aethercl_gemm_epilogue {
  size_t struct_size;              /* sizeof(aethercl_gemm_epilogue) of the caller */
  int kind;                        /* aethercl_gemm_epilogue_kind */
  void* bias; size_t offset_bias; int dtype_bias;  /* n elements; kinds 1-4, else NULL */
  void* pre; size_t offset_pre;    /* optional: the value before the activation */
  void* residual; size_t offset_residual;  /* optional: added after the epilogue */
} aethercl_gemm_epilogue;

/* C[b] = act(alpha * op(A[b]) op(B[b]) + beta * C[b] + bias) (+ residual[b]) for b < batch
 * (DGELU: that sum times gelu'(pre)): aethercl_gemm with an epilogue applied in the product's own store (one pass over C on every kernel path: portable,
 * split-K, tensor cores; no separate bias or activation kernel). Every rule of aethercl_gemm
 * holds (desc is validated first, with its messages; beta != 0 reads C, which then enters the
 * sum before the bias and activation, as beta * C). The value before act is computed in float32
 * and rounded once to C's dtype where it is stored (C for BIAS; pre); C is act of that float32
 * value, rounded once. epilogue NULL is exactly aethercl_gemm. Refused (0, message naming the
 * field): a struct_size below this header's sizeof(aethercl_gemm_epilogue) (larger is accepted),
 * a kind outside 1..7, a NULL bias for kinds 1-4 and a non-NULL bias for kinds 5-7 (a bias that
 * would be ignored is taken as a mistake), a NULL pre for kind 7, an unsupported dtype_bias,
 * invalid or foreign bias and pre handles, a bias or pre that does not fit its buffer (offset_bias + n elements; offset_pre
 * plus C's extent: (batch - 1) * stride_c + (m - 1) * ldc + n elements; residual likewise), pre
 * overlapping A, B, C or the bias in the same buffer, C overlapping the bias, and a residual
 * overlapping C or pre (an in-place residual is beta = 1). Zero work (m, n or batch 0) checks
 * the handles and offsets and touches nothing. Tolerance: that of aethercl_gemm for the product,
 * then the activation's float32 evaluation (a few units in the last place) and C's rounding. */
AETHERCL_API int aethercl_gemm_fused(int gpu_index, const aethercl_gemm_desc* desc,
                                     const aethercl_gemm_epilogue* epilogue, void* stream);
/* Training ops (version 3)                                                               */
/* ===================================================================================== */
/* Conventions of this section, in addition to those at the top of the file:
 *  - Every function takes gpu_index first and a stream last: NULL is the device's default
 *    stream, anything else a live stream token of that device (others are refused with
 *    AETHERCL_INVALID_HANDLE); the work is ordered on that stream.
 *  - Element counts are size_t; tensor dimensions are int and must be >= 0. Zero work (a count
 *    of 0, an empty tensor) returns 1 without touching memory; buffers are still checked
 *    against the sizes their (possibly empty) shapes need.
 *  - Descriptor structs start with size_t struct_size = sizeof(the struct) of the caller's
 *    header; smaller is refused, larger (a newer header) is accepted. NULL descriptors are
 *    refused. A descriptor is read once, during the call.
 *  - Optional buffers are NULL to skip; NULL required buffers, bad tokens and buffers smaller than
 *    the shape needs are refused with the argument named (descriptor fields as "desc.x").
 *  - Outputs are overwritten, never accumulated, unless a function says otherwise. Elementwise
 *    functions may run in place (an output equal to an input of the same shape); functions that
 *    reduce or gather refuse an output that is also an input.
 *  - Results are deterministic: the same call on the same device gives the same bits. Sums use a
 *    fixed order and accumulate in double on devices with FP64, in float otherwise.
 *  - Float hyper-parameters that are NaN or out of their documented range are refused
 *    (AETHERCL_INVALID_ARGUMENT). */

/* Reduction ops (version-3 codes; ARGMAX/ARGMIN write int32 indices). */
enum aethercl_reduce_op {
  AETHERCL_SUM = 0,
  AETHERCL_MEAN = 1,
  AETHERCL_MAX = 2,
  AETHERCL_MIN = 3,
  AETHERCL_ARGMAX = 4,
  AETHERCL_ARGMIN = 5,
  AETHERCL_NO_REDUCTION = 6 /* losses only: one value per element / row */
};

/* ---- Random numbers: Philox4x32-10 ----------------------------------------------------------
 * The generator is Philox4x32-10 (Salmon et al., SC11, the Random123 definition), keyed by
 * seed (key word 0 = low 32 bits, word 1 = high 32 bits). It defines one stream of 32-bit words:
 * word w is lane (w mod 4) of the block whose 128-bit counter is (w / 4) as a 64-bit number in
 * counter words 0 (low) and 1 (high), words 2 and 3 zero. Element i of a call with `offset` uses
 * stream position e = offset + i, so filling n elements at offset o and then n at o + n gives the
 * same values as filling 2n at o. Output is bit-identical on every device for BITS and UNIFORM
 * (the float expressions below are evaluated without contraction); NORMAL goes through the
 * device's log, sqrt, cos and sin and agrees to a few ulp. */
enum aethercl_rng_distribution {
  AETHERCL_RNG_BITS = 0,    /* the raw word e, as uint32; a and b are ignored */
  AETHERCL_RNG_UNIFORM = 1, /* u = (word e >> 8) * 2^-24 in [0, 1); value a + (b - a) * u */
  AETHERCL_RNG_NORMAL = 2   /* Box-Muller on the word pair p = e / 2 (words 2p, 2p+1):
                               u1 = ((w[2p] >> 8) + 1) * 2^-24, u2 = (w[2p+1] >> 8) * 2^-24,
                               r = sqrt(-2 ln u1); even e takes r cos(2 pi u2), odd e
                               r sin(2 pi u2); value a + b * z (a = mean, b = std >= 0) */
};

/* Fills count elements of buffer (float32; uint32 for BITS) with the distribution. a and b must
 * be finite; UNIFORM needs a <= b and NORMAL b >= 0. */
AETHERCL_API int aethercl_rng_fill(int gpu_index, void* buffer, size_t count, int distribution,
                                   float a, float b, unsigned long long seed,
                                   unsigned long long offset, void* stream);

/* Dropout: element i is kept when the UNIFORM value (a = 0, b = 1) at stream position offset + i
 * is >= p; kept elements are scaled by 1 / (1 - p) (float32 division), dropped ones are 0.
 * p in [0, 1]; p = 1 drops everything. mask (uint8, count bytes: 1 kept, 0 dropped) is optional;
 * y may equal x. */
AETHERCL_API int aethercl_dropout(int gpu_index, void* x, void* y, void* mask, size_t count,
                                  float p, unsigned long long seed, unsigned long long offset,
                                  void* stream);
/* dx = mask ? dy / (1 - p) : 0, with the mask of the forward call; dx may equal dy. */
AETHERCL_API int aethercl_dropout_backward(int gpu_index, void* dy, void* mask, void* dx,
                                           size_t count, float p, void* stream);

/* ---- 16-bit operands of the training ops ------------------------------------------------------
 * aethercl_unary, aethercl_unary_backward, aethercl_binary, aethercl_binary_backward,
 * aethercl_norm_forward, aethercl_norm_backward and aethercl_cross_entropy (and the rows of
 * execute_embedding_lookup_gpu / execute_embedding_backward_gpu) take the format of each
 * activation or gradient operand from its buffer's tag (aethercl_buffer_set_dtype): no tag or
 * AETHERCL_F32 is float32, AETHERCL_F16 IEEE half, AETHERCL_BF16 bfloat16; an operand tagged
 * anything else is refused (0, a message naming it). Counts and sizes are in elements of each
 * operand's own format. Each operand is read in its format, every value is computed in float32
 * (sums as the float32 form keeps them) and each result is rounded once, to nearest even, to its
 * output's format (half overflow gives +-inf; NaN stays NaN). Operands of one call may mix the
 * three formats in any combination (a bf16 activation plus a float32 bias row writing bf16, a
 * float32 residual normalised into f16, ...); each function says which of its operands stay
 * float32 (weights and their gradients: float32 masters, as PyTorch's autocast; losses) and
 * refuses a 16-bit tag on those. Untagged buffers run the float32 kernels, bit for bit as before.
 * A 16-bit combination builds its own kernel program on first use. */

/* ---- Elementwise: unary ops, scalar forms, broadcasting binary ops ---------------------------
 * Unary ops y = f(x; alpha). Derivatives used by aethercl_unary_backward are given where they
 * are not the textbook ones. */
enum aethercl_unary_op {
  AETHERCL_UNARY_RELU = 0,       /* max(x, 0); derivative 0 at x = 0 */
  AETHERCL_UNARY_LEAKY_RELU = 1, /* x > 0 ? x : alpha * x (alpha = negative slope) */
  AETHERCL_UNARY_SIGMOID = 2,
  AETHERCL_UNARY_TANH = 3,
  AETHERCL_UNARY_SILU = 4,       /* x * sigmoid(x) */
  AETHERCL_UNARY_GELU = 5,       /* 0.5 x (1 + erf(x / sqrt 2)) */
  AETHERCL_UNARY_GELU_TANH = 6,  /* 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) */
  AETHERCL_UNARY_EXP = 7,
  AETHERCL_UNARY_LOG = 8,
  AETHERCL_UNARY_SQRT = 9,
  AETHERCL_UNARY_RSQRT = 10,     /* 1 / sqrt(x) */
  AETHERCL_UNARY_ABS = 11,       /* derivative 0 at x = 0 */
  AETHERCL_UNARY_NEG = 12,
  AETHERCL_UNARY_ADD_SCALAR = 13,  /* x + alpha */
  AETHERCL_UNARY_SUB_SCALAR = 14,  /* x - alpha */
  AETHERCL_UNARY_RSUB_SCALAR = 15, /* alpha - x */
  AETHERCL_UNARY_MUL_SCALAR = 16,  /* x * alpha */
  AETHERCL_UNARY_DIV_SCALAR = 17,  /* x / alpha */
  AETHERCL_UNARY_RDIV_SCALAR = 18, /* alpha / x */
  AETHERCL_UNARY_MAX_SCALAR = 19,  /* max(x, alpha); gradient passes where x >= alpha */
  AETHERCL_UNARY_MIN_SCALAR = 20,  /* min(x, alpha); gradient passes where x <= alpha */
  AETHERCL_UNARY_POW_SCALAR = 21   /* pow(x, alpha) (NaN for x < 0 and non-integer alpha) */
};

/* y[i] = f(x[i]) over count elements; y may equal x. alpha is used by the ops that say so and
 * must be finite for them. x and y may each be float32, f16 or bf16 (see "16-bit operands of the
 * training ops"). */
AETHERCL_API int aethercl_unary(int gpu_index, int op, void* x, void* y, size_t count,
                                float alpha, void* stream);
/* dx[i] = dy[i] * f'(x[i]) with the forward input x; dx may equal dy. x, dy and dx may each be
 * float32, f16 or bf16. */
AETHERCL_API int aethercl_unary_backward(int gpu_index, int op, void* x, void* dy, void* dx,
                                         size_t count, float alpha, void* stream);

enum aethercl_binary_op {
  AETHERCL_BINARY_ADD = 0,
  AETHERCL_BINARY_SUB = 1, /* a - b */
  AETHERCL_BINARY_MUL = 2,
  AETHERCL_BINARY_DIV = 3, /* a / b */
  AETHERCL_BINARY_MAX = 4, /* gradient split in halves where a == b (as PyTorch's maximum) */
  AETHERCL_BINARY_MIN = 5, /* likewise */
  AETHERCL_BINARY_POW = 6  /* pow(a, b); d/db = pow(a, b) ln a */
};

/* Two dense row-major operands of ndim (1 to 4) dimensions each, broadcast as NumPy does: in
 * every dimension the sizes are equal or one of them is 1 (pad the shorter shape with leading
 * 1s). c has the broadcast shape max(shape_a[d], shape_b[d]) (0 where either is 0). a, b and c
 * (and dc, da, db of the backward) may each be float32, f16 or bf16, in any combination (see
 * "16-bit operands of the training ops"); sizes below count elements of each one's format. */
typedef struct aethercl_broadcast_desc {
  size_t struct_size;
  int ndim;
  int shape_a[4];
  int shape_b[4];
  void* a; /* prod(shape_a) elements */
  void* b; /* prod(shape_b) elements */
  void* c; /* prod(broadcast shape) elements; read by neither function */
} aethercl_broadcast_desc;

/* c = a op b with broadcasting. c may equal a (or b) when that operand has the full shape. */
AETHERCL_API int aethercl_binary(int gpu_index, int op, const aethercl_broadcast_desc* desc,
                                 void* stream);
/* Gradients of c = a op b: da (shape_a) and db (shape_b), each optional, are the upstream dc
 * (broadcast shape) times the partial derivative, summed over the dimensions that operand was
 * broadcast along, in a fixed order for a given shape and device (repeatable run to run; the sums
 * of ADD and SUB over leading dimensions, such as a bias row's gradient, are compensated sums over
 * column tiles, otherwise ascending). desc->a and desc->b are the forward inputs (ADD and SUB do
 * not read them and accept NULL); desc->c is ignored. da and db must not alias dc. */
AETHERCL_API int aethercl_binary_backward(int gpu_index, int op,
                                          const aethercl_broadcast_desc* desc, void* dc,
                                          void* da, void* db, void* stream);

/* ---- Reductions over one axis ------------------------------------------------------------------
 * x has ndim (1 to 4) dimensions shape[0..ndim-1]; axis is in [-ndim, ndim) (negative counts from
 * the end). y has the shape without that axis (keep-dims is the same memory): float32, or int32
 * indices for ARGMAX/ARGMIN. MAX and MIN propagate NaN; ARGMAX/ARGMIN return the first index of
 * the extreme value (a NaN counts as the extreme). An empty axis gives SUM 0 and MEAN NaN and is
 * refused for the others (unless y is empty too). y must not alias x. */
AETHERCL_API int aethercl_reduce(int gpu_index, int op, void* x, void* y, int ndim,
                                 const int* shape, int axis, void* stream);
/* dx (shape) from dy (the reduced shape): SUM broadcasts dy, MEAN broadcasts dy / shape[axis],
 * MAX and MIN route dy to the index ARGMAX / ARGMIN picks (x required; NULL accepted for SUM and
 * MEAN). ARGMAX and ARGMIN have no gradient and are refused. */
AETHERCL_API int aethercl_reduce_backward(int gpu_index, int op, void* x, void* dy, void* dx,
                                          int ndim, const int* shape, int axis, void* stream);

/* ---- Gather and scatter-add along one axis ---------------------------------------------------
 * As torch.gather and Tensor.scatter_add_. x has shape_a; index (int32) and y have shape_b; both
 * have ndim (1 to 4) dimensions, equal sizes in every dimension but axis ([-ndim, ndim), negative
 * counts from the end), and are dense row-major. With i the position along axis:
 *   aethercl_gather:      y[.., i, ..]  = x[.., index[.., i, ..], ..]   (y written, x read)
 *   aethercl_scatter_add: x[.., index[.., i, ..], ..] += y[.., i, ..]  (x updated in place)
 * An index outside [0, shape_a[axis]) gives 0 (gather) or adds nothing (scatter_add), as the
 * embedding ops treat invalid ids; nothing outside the buffers is touched. scatter_add adds the
 * contributions to an element in ascending order of i: deterministic, no atomics (one work-item
 * per position of the other dimensions walks the axis). The gradient of gather is scatter_add of
 * dy into a zeroed dx; of scatter_add, gather of dx. x must not alias index or y; gather's y must
 * not alias index. */
typedef struct aethercl_index_desc {
  size_t struct_size;
  int ndim;
  int axis;
  int shape_a[4]; /* x */
  int shape_b[4]; /* index and y */
  void* x;        /* prod(shape_a) floats */
  void* index;    /* prod(shape_b) int32 */
  void* y;        /* prod(shape_b) floats */
} aethercl_index_desc;

AETHERCL_API int aethercl_gather(int gpu_index, const aethercl_index_desc* desc, void* stream);
AETHERCL_API int aethercl_scatter_add(int gpu_index, const aethercl_index_desc* desc,
                                      void* stream);

/* ---- Normalisation --------------------------------------------------------------------------- */
enum aethercl_norm_kind {
  AETHERCL_NORM_LAYER = 0, /* y = (x - mean) * rstd * gamma + beta, rstd = 1/sqrt(var + eps),
                              var biased, over each row */
  AETHERCL_NORM_RMS = 1    /* y = x * rstd * gamma + beta, rstd = 1/sqrt(mean(x^2) + eps) */
};

/* Row-wise normalisation of x (rows x cols). gamma and beta (cols) are optional (NULL: 1 and 0).
 * The forward reads x, gamma, beta and writes y; the backward reads x, gamma, dy and writes any of
 * dx (rows x cols), dgamma = sum over rows of dy * xhat and dbeta = sum over rows of dy (cols
 * each), recomputing the statistics from x. eps > 0. x, y, dy and dx may each be float32, f16 or
 * bf16, in any combination (see "16-bit operands of the training ops"); gamma, beta, dgamma and
 * dbeta are float32 masters (a 16-bit tag on them is refused) and the row statistics are
 * computed from the values read, as in float32.
 * dres (ABI version 4; backward only, optional): a gradient of x's shape in dx's format that is
 * added to dx (dx = the normalisation's gradient + dres, summed in float32 and rounded once), as
 * when x also feeds a residual connection; it may be dx itself (accumulated in place) but not x,
 * dy, gamma, dgamma or dbeta, and needs dx. A struct_size of the version-3 descriptor (up to
 * dbeta) is accepted and means dres = NULL.
 * res and sum (ABI version 4; forward only, optional, both or neither): the residual add before
 * a pre-LN block's normalisation in the same kernel: sum = x + res (summed in float32, rounded
 * once to sum's format, which must be x's), then the rows of sum, as stored, are normalised
 * into y. res has x's shape in any format and may be x; sum must be apart from x, res, y,
 * gamma and beta. The backward then takes sum as its x. Ignored by the backward.
 * dx_copy (ABI version 4; backward only, optional): dx's values, also rounded once into
 * dx_copy's format (a 16-bit copy of a float32 residual gradient for the branch products that
 * read it); needs dx, apart from every other operand. Ignored by the forward. A struct_size
 * ending at dres (or at dbeta) is accepted and means res, sum and dx_copy NULL. */
typedef struct aethercl_norm_desc {
  size_t struct_size;
  int kind;
  int rows, cols;
  float eps;
  void* x;
  void* gamma;
  void* beta;
  void* y;
  void* dy;
  void* dx;
  void* dgamma;
  void* dbeta;
  void* dres;      /* version 4: added to dx (backward); NULL: nothing added */
  void* res;       /* version 4: added to x into sum before normalising (forward) */
  void* sum;       /* version 4: x + res, the rows normalised (forward) */
  void* dx_copy;   /* version 4: dx rounded into this buffer's format too (backward) */
} aethercl_norm_desc;

AETHERCL_API int aethercl_norm_forward(int gpu_index, const aethercl_norm_desc* desc,
                                       void* stream);
AETHERCL_API int aethercl_norm_backward(int gpu_index, const aethercl_norm_desc* desc,
                                        void* stream);

/* Batch normalisation of x (n x channels x spatial; NCHW with spatial = H * W, or 1 for (N, C)).
 * Training (training = 1): per-channel batch mean and biased variance normalise x; save_mean and
 * save_rstd (channels each, optional in the forward) receive mean and 1/sqrt(var + eps); when
 * running_mean/running_var are given they become (1 - momentum) * running + momentum * batch
 * statistic, with the unbiased variance (n * spatial must be > 1). Evaluation (training = 0):
 * running_mean and running_var (required) normalise x. gamma and beta (channels) are optional.
 * The backward in training mode needs save_mean and save_rstd from the forward; in evaluation
 * mode it uses the running statistics. eps > 0, momentum in [0, 1]. */
typedef struct aethercl_batchnorm_desc {
  size_t struct_size;
  int n, channels, spatial;
  int training;
  float momentum;
  float eps;
  void* x;
  void* gamma;
  void* beta;
  void* running_mean;
  void* running_var;
  void* save_mean;
  void* save_rstd;
  void* y;
  void* dy;
  void* dx;
  void* dgamma;
  void* dbeta;
} aethercl_batchnorm_desc;

AETHERCL_API int aethercl_batchnorm_forward(int gpu_index, const aethercl_batchnorm_desc* desc,
                                            void* stream);
AETHERCL_API int aethercl_batchnorm_backward(int gpu_index, const aethercl_batchnorm_desc* desc,
                                             void* stream);

/* ---- Optimisers and gradient clipping -------------------------------------------------------- */
enum aethercl_optimizer_kind {
  AETHERCL_OPTIMIZER_SGD = 0,  /* PyTorch's SGD: g += weight_decay * p; with momentum
                                  buf = step == 1 ? g : momentum * buf + (1 - dampening) * g,
                                  g = nesterov ? g + momentum * buf : buf; p -= lr * g */
  AETHERCL_OPTIMIZER_ADAMW = 1 /* decoupled decay: p *= 1 - lr * weight_decay; then Adam with
                                  bias correction: p -= lr / (1 - beta1^step) * m /
                                  (sqrt(v) / sqrt(1 - beta2^step) + eps) */
};

/* One update, in place on param and the state buffers, over count float32 elements. SGD:
 * state1 is the momentum buffer (required when momentum > 0, else unused); nesterov needs
 * momentum > 0 and dampening 0. AdamW: state1 = m, state2 = v (both required). step >= 1 counts
 * updates from 1. lr, weight_decay, momentum, dampening, eps >= 0 and finite; betas in [0, 1).
 *
 * finite_gate (version 4, optional): a buffer whose first float32 the update reads on the device
 * when it runs; the update happens only if that value is finite, and otherwise leaves param and
 * the states unchanged (a non-finite loss or gradient norm computed on the device skips the step
 * with no host read, and a captured graph keeps the check). It is only read: it may be grad, but
 * not param or a state the kind uses. A finite gate gives the bits of an ungated update. The
 * caller's step count is its own: after a skipped update, the next call passes the same step.
 * A struct_size ending at step (the version-3 size) means no gate. */
typedef struct aethercl_optimizer_desc {
  size_t struct_size;
  int kind;
  size_t count;
  void* param;
  void* grad;
  void* state1;
  void* state2;
  float lr;
  float weight_decay;
  float momentum;
  float dampening;
  int nesterov;
  float beta1;
  float beta2;
  float eps;
  int step;
  void* finite_gate; /* version 4: NULL, or a float32 read on the device (see above) */
} aethercl_optimizer_desc;

AETHERCL_API int aethercl_optimizer_step(int gpu_index, const aethercl_optimizer_desc* desc,
                                         void* stream);

/* Many updates in few launches (version 4): the same result, bit for bit, as calling
 * aethercl_optimizer_step on descs[0], descs[1], ... descs[count - 1] in order; the descriptors
 * may differ in kind, count and hyper-parameters. Every descriptor is validated, by the rules of
 * aethercl_optimizer_step, before anything runs: one bad descriptor refuses the whole call with
 * the status aethercl_optimizer_step gives it and a message naming it ("descs[3].lr = -1 ..."),
 * and no buffer changes. The array's stride is descs[0].struct_size (at least the version-3
 * size, at most 4096 bytes); every element must carry that same struct_size. A buffer an update
 * writes (param, a state the kind uses) may not appear in another descriptor in any role (the
 * in-order result would depend on the order; refused, naming both); several descriptors may
 * share one grad, and one finite_gate (each gate is read, as a grad is). count in [0, 65536]; descs may be NULL when count is 0, which does nothing.
 * Launches: ceil(n / 8) for the n descriptors with count > 0, whatever their kinds (each launch
 * takes 8 tensors' buffers and their hyper-parameters by value; 57 tensors: 8 launches). */
AETHERCL_API int aethercl_optimizer_step_multi(int gpu_index, const aethercl_optimizer_desc* descs,
                                               int count, void* stream);

/* Global L2 gradient-norm clipping on the device, with no host read: total = sqrt(sum over the
 * num_tensors buffers grads[t] of counts[t] float32 elements of g^2); every gradient is
 * multiplied by min(1, max_norm / (total + 1e-6)) (left unchanged when total is not finite).
 * total_norm (optional, one float32) receives total. max_norm >= 0 (infinity: only measure).
 * num_tensors in [0, 65536]; a buffer may appear only once. */
AETHERCL_API int aethercl_clip_grad_norm(int gpu_index, int num_tensors, void* const* grads,
                                         const size_t* counts, float max_norm, void* total_norm,
                                         void* stream);

/* ---- Losses ------------------------------------------------------------------------------------
 * Mean squared error over count float32 elements: loss (one float, optional) = sum of (p - t)^2,
 * divided by count for MEAN; grad (count floats, optional) = d loss / d pred = 2 (p - t)
 * (/ count for MEAN). reduction is AETHERCL_SUM or AETHERCL_MEAN. */
AETHERCL_API int aethercl_mse_loss(int gpu_index, void* pred, void* target, void* loss,
                                   void* grad, size_t count, int reduction, void* stream);

/* Cross-entropy from logits (rows x classes) and int32 class targets (rows), fused with
 * log-softmax. logits and grad may each be float32, f16 or bf16 (see "16-bit operands of the
 * training ops"); loss is float32 (a 16-bit tag on it is refused). A row whose target equals ignore_index contributes 0 and a zero gradient row; a
 * target outside [0, classes) that is not ignore_index makes that row's loss and gradient NaN.
 * With label smoothing s in [0, 1] the target distribution is (1 - s) onehot + s / classes.
 * reduction: AETHERCL_SUM, AETHERCL_MEAN (divided by the number of rows not ignored: NaN when
 * there are none) or AETHERCL_NO_REDUCTION (loss holds one value per row). loss and grad
 * (d loss / d logits, rows x classes) are optional. */
typedef struct aethercl_cross_entropy_desc {
  size_t struct_size;
  int rows, classes;
  int ignore_index;
  float label_smoothing;
  int reduction;
  void* logits;
  void* targets;
  void* loss;
  void* grad;
} aethercl_cross_entropy_desc;

AETHERCL_API int aethercl_cross_entropy(int gpu_index, const aethercl_cross_entropy_desc* desc,
                                        void* stream);

/* ---- Convolution and pooling (NCHW float32) ------------------------------------------------
 * Output size per spatial dimension: out = (in + 2 pad - dilation (kernel - 1) - 1) / stride + 1
 * (floor), which must be >= 1. */

/* 2-D convolution (cross-correlation, as PyTorch): x (n, c_in, h, w), weight (c_out,
 * c_in / groups, kernel_h, kernel_w), bias (c_out, optional), y (n, c_out, out_h, out_w).
 * groups divides c_in and c_out (groups = c_in = c_out is depthwise). stride and dilation >= 1,
 * pad >= 0. The products run on the GEMM engine through im2col / col2im in chunks of images;
 * every product runs in the compute mode `compute` (AETHERCL_COMPUTE_*; DEFAULT: the device's
 * matmul precision, as the seed matmul entry points). The backward reads x, weight and dy and writes any of dx, dweight
 * (overwritten) and dbias. */
typedef struct aethercl_conv2d_desc {
  size_t struct_size;
  int n, c_in, h, w;
  int c_out, kernel_h, kernel_w;
  int stride_h, stride_w;
  int pad_h, pad_w;
  int dilation_h, dilation_w;
  int groups;
  int compute;
  void* x;
  void* weight;
  void* bias;
  void* y;
  void* dy;
  void* dx;
  void* dweight;
  void* dbias;
} aethercl_conv2d_desc;

AETHERCL_API int aethercl_conv2d_forward(int gpu_index, const aethercl_conv2d_desc* desc,
                                         void* stream);
AETHERCL_API int aethercl_conv2d_backward(int gpu_index, const aethercl_conv2d_desc* desc,
                                          void* stream);

enum aethercl_pool_kind {
  AETHERCL_POOL_MAX = 0, /* padding counts as -infinity; NaN propagates */
  AETHERCL_POOL_AVG = 1  /* divisor: kernel_h * kernel_w with count_include_pad, else the
                            number of window positions inside the input */
};

/* 2-D pooling of x (n, channels, h, w) into y (n, channels, out_h, out_w) with kernel, stride
 * (>= 1) and pad (0 <= pad <= kernel / 2), floor mode. MAX may store indices (int32, same shape
 * as y: the flat position h_index * w + w_index of the maximum within its input plane, the first
 * one on ties); its backward needs them. The backward writes dx (every element) from dy. */
typedef struct aethercl_pool2d_desc {
  size_t struct_size;
  int kind;
  int n, channels, h, w;
  int kernel_h, kernel_w;
  int stride_h, stride_w;
  int pad_h, pad_w;
  int count_include_pad;
  void* x;
  void* y;
  void* indices;
  void* dy;
  void* dx;
} aethercl_pool2d_desc;

AETHERCL_API int aethercl_pool2d_forward(int gpu_index, const aethercl_pool2d_desc* desc,
                                         void* stream);
AETHERCL_API int aethercl_pool2d_backward(int gpu_index, const aethercl_pool2d_desc* desc,
                                          void* stream);
/* Memory pool (ABI version 3)                                                            */
/* ===================================================================================== */

/* Returns every cached (freed, kept for reuse) block of the device's memory pool to OpenCL, like
 * torch.cuda.empty_cache: bytes_cached in aethercl_memory_stats drops to 0 and other processes
 * can use that memory. Live buffers are untouched; a freed block still used by enqueued work is
 * released by OpenCL once that work completes. Returns 0 when gpu_index resolves to no
 * initialised device. */
AETHERCL_API int aethercl_empty_cache(int gpu_index);

/* Restarts the peak statistics of the device's pool: peak_bytes_reserved in
 * aethercl_memory_stats becomes the bytes reserved right now, like
 * torch.cuda.reset_peak_memory_stats. Returns 0 when gpu_index resolves to no initialised
 * device. */
AETHERCL_API int aethercl_reset_peak_memory_stats(int gpu_index);
/* ===================================================================================== */
/* Many devices: communicators, collectives, peer copies (ABI version 3)                 */
/* ===================================================================================== */

/* dtype arguments take the aethercl_dtype codes and op arguments AETHERCL_SUM, AETHERCL_MEAN,
 * AETHERCL_MAX or AETHERCL_MIN of aethercl_reduce_op (both defined above; the other reduce codes
 * are refused). For collectives MEAN is the sum divided by the number of devices, and MAX and MIN
 * propagate NaN: any NaN contribution gives NaN. */

/* Creates a communicator over count devices: rank i is gpu_indices[i]. Every index must be
 * initialised (no single-device fallback here) and appear once; count is 1 .. the number of
 * visible devices. Returns a communicator token (never reused), or NULL with the message naming
 * the offending gpu_indices[i]. The communicator picks how bytes move between its devices:
 *  - "engine" path (Linux): every device is a CUDA device (matched by cl_khr_device_uuid's UUID,
 *    else the PCI address of cl_nv_device_attribute_query) and the vendor engines are loaded
 *    (libcuda.so.1 and libnccl.so.2 >= 2.10 through dlopen; AETHERCL_LIBCUDA / AETHERCL_LIBNCCL
 *    name other files, AETHERCL_VENDOR_ENGINES=0 turns them off; absent libraries change nothing,
 *    present but unusable ones give one warning per process). The communicator keeps per device a
 *    staging buffer of CUDA memory imported into OpenCL (cl_khr_external_memory_opaque_fd),
 *    grown to the largest call so far, outside the memory pool's accounting. A collective copies
 *    the user's buffers into the staging on each rank's current stream, waits for the copies,
 *    runs NCCL on the staging (one group over the ranks, a CUDA stream each), waits for NCCL, and
 *    enqueues the copies back on the current streams: it returns once NCCL has finished. MAX and
 *    MIN take the OpenCL path below (NCCL's max and min do not propagate NaN). When a CUDA or
 *    NCCL call (or a copy into the staging) fails, the communicator takes its OpenCL path from
 *    then on (one warning naming the function and its error) and the failing collective runs
 *    there too, from the user's buffers, which the engine had not touched; under
 *    AETHERCL_PEER_PATH=engine it fails instead with AETHERCL_DEVICE_ERROR
 *    (AETHERCL_OUT_OF_MEMORY when the staging cannot be allocated), the message naming the
 *    function, the buffers as they were. A failed copy back out of the staging fails the call;
 *  - "device" path: all its devices share one OpenCL context (the driver gives the visible CPU
 *    devices of one platform a shared context, GPUs one each: AETHERCL_SHARED_CONTEXT=1 shares
 *    GPUs' too, 0 shares none) and copy
 *    from each other's buffers on their own transfer queues; collectives return once enqueued;
 *  - "host" path: the bytes relay through pinned host memory, pipelined in chunks; collectives
 *    return once the data has moved.
 * AETHERCL_PEER_PATH=engine|device|host|auto (default auto) chooses. auto takes the engine path
 * where the engines serve every device, else the device path for CPU devices sharing a context
 * (PoCL) and the host path otherwise: on GPUs NVIDIA's OpenCL serves copies between devices of
 * one context by migrating whole buffers, far slower than the relay (docs/MANY_DEVICES.md).
 * engine is refused with AETHERCL_NOT_IMPLEMENTED, the message saying why, where the engines do
 * not serve the devices (never for a communicator of one device, which moves nothing), and with
 * AETHERCL_DEVICE_ERROR naming the call when creating the NCCL side fails (under auto that
 * failure warns and the OpenCL path is taken); device is refused so when the devices do not
 * share a context. device and host are the bit-exact paths of the collectives' paragraph below.
 * The log names the path at info level. Each communicator keeps per-device scratch (a few
 * pipeline chunks per device, AETHERCL_COLLECTIVE_CHUNK bytes each, default 4 MiB) outside the
 * memory pool's accounting. */
AETHERCL_API void* aethercl_comm_create(int count, const int* gpu_indices);

/* Destroys a communicator once its queued transfers have finished. NULL, unknown and destroyed
 * tokens are refused. shutdown_driver destroys every communicator. */
AETHERCL_API int aethercl_comm_destroy(void* comm);

/* Allocates size bytes (at least 1) on the device of comm's rank (0 .. P-1) for collectives, and
 * returns a buffer token of that device, used and freed (free_gpu_memory) like any other.
 * On the engine path the buffer is CUDA memory imported into OpenCL, outside the memory pool's
 * accounting and AETHERCL_MEMORY_LIMIT, and a collective whose buffers (send and recv alike) are
 * all such buffers of their ranks runs NCCL on them in place: the host waits for the work so far
 * on each rank's current stream, NCCL runs, the host waits for it, and no copy through the
 * staging is made; its bytes are NCCL's, as on the engine path below. A failure inside NCCL then
 * fails the call with AETHERCL_DEVICE_ERROR naming the function (the buffers may be partly
 * written; the communicator takes its OpenCL path from then on). Freeing such a buffer waits on
 * the host for the work that used it. Elsewhere (the OpenCL paths, sizes above
 * AETHERCL_ENGINE_IMPORT_BYTES (default 256 MiB), a device without room for engine memory) it is
 * an ordinary buffer from the pool, and the collectives treat it as such. The buffer outlives the
 * communicator. Refused while the rank's current stream captures a graph. Returns NULL with the
 * message naming the argument on refusal (NULL, unknown or destroyed comm, rank out of range,
 * size 0) and with AETHERCL_OUT_OF_MEMORY when no memory is left. */
AETHERCL_API void* aethercl_comm_alloc(void* comm, int rank, size_t size);

/* Communicators across processes (one process per GPU, on one machine or many; Linux only, like
 * the vendor engines): NCCL bootstraps them from a unique id that one process makes and every
 * process receives by its own means (MPI's broadcast, a file, a socket: this library never links
 * MPI). Without the vendor engines (or with a libnccl.so.2 lacking ncclGetUniqueId or
 * ncclCommInitRank) both functions refuse with AETHERCL_NOT_IMPLEMENTED, the message saying "the
 * vendor engines are not loaded" and why (there is no OpenCL path between processes: exchange
 * host memory through MPI instead, as aethercl.distributed does). AETHERCL_PEER_PATH does not
 * apply to them. */

/* Bytes of NCCL's unique id (ncclUniqueId). */
#define AETHERCL_COMM_ID_BYTES 128

/* Writes a new NCCL unique id (ncclGetUniqueId: on real NCCL it names a bootstrap socket of this
 * process, which must stay alive until every rank has joined) into the AETHERCL_COMM_ID_BYTES
 * first bytes of id; size (the bytes at id) must be at least that. Needs no initialised device.
 * Returns 1, or 0 with AETHERCL_INVALID_ARGUMENT for id NULL or size too small,
 * AETHERCL_NOT_IMPLEMENTED without the engines (above), AETHERCL_DEVICE_ERROR naming
 * ncclGetUniqueId and NCCL's error when it fails. */
AETHERCL_API int aethercl_comm_unique_id(void* id, size_t size);

/* Creates this process's side of a communicator across processes: its one member here is
 * gpu_index (initialised, and a CUDA device the engines serve, matched as for
 * aethercl_comm_create's engine path), global rank rank (0 .. nranks-1) of nranks; id is the
 * AETHERCL_COMM_ID_BYTES bytes of aethercl_comm_unique_id from one process of the job (id_size,
 * the bytes at id, at least that), the same on every rank. It calls ncclCommInitRank, which
 * blocks until all nranks ranks have called it with that id, as NCCL does (there is no timeout:
 * a rank that never comes keeps the others waiting; the caller's watchdog decides), holding no
 * device lock meanwhile (shutdown_driver waits for it). Returns a communicator token (destroyed
 * with aethercl_comm_destroy on every rank), or NULL with: AETHERCL_NOT_INITIALIZED before any
 * device is initialised (as every device call); AETHERCL_INVALID_ARGUMENT for nranks
 * < 1, rank outside 0 .. nranks-1, id NULL or id_size too small; AETHERCL_NO_DEVICE for a
 * gpu_index out of range and AETHERCL_NOT_INITIALIZED for one not initialised (the message
 * naming it); AETHERCL_NOT_IMPLEMENTED without the engines (above) or when they do not serve
 * gpu_index (the message says why); AETHERCL_DEVICE_ERROR naming the CUDA or NCCL call that
 * failed (e.g. ncclCommInitRank, for an id no process made).
 * On such a communicator:
 *  - the collectives take arrays of ONE buffer token, this process's (buffers[0], send[0],
 *    recv[0]), and every size uses P = nranks: all_gather's recv and reduce_scatter's send hold
 *    nranks x count elements, recv of reduce_scatter is block rank of the result, broadcast's
 *    root is a global rank. Every rank must make the same collectives in the same order with the
 *    same count, dtype and op (NCCL's rule; a mismatch hangs or fails inside NCCL);
 *  - SUM and MEAN are NCCL's ncclSum and ncclAvg, with NCCL's order of summation (ring or tree,
 *    by size, P and topology; f16/bf16 rounded after each addition; MEAN may scale each input by
 *    1/P): every rank holds the same bits, within P ulps of sum |x_i| of the exact sum, not
 *    necessarily the bits of the single-process OpenCL paths. MAX and MIN are refused with
 *    AETHERCL_NOT_IMPLEMENTED (no OpenCL path exists between processes, and NCCL's max and min do
 *    not propagate NaN);
 *  - a collective runs NCCL in place on buffers from aethercl_comm_alloc(comm, 0, size) (engine
 *    memory, as above), else through the communicator's staging as on the engine path of
 *    aethercl_comm_create; it is ordered after earlier work on the calling thread's current
 *    stream and returns once NCCL has finished on this rank (so it blocks until the peers take
 *    part). A failing CUDA or NCCL call fails the collective with AETHERCL_DEVICE_ERROR naming
 *    the call (buffers may be partly written), there being no fallback, and every later
 *    collective on the communicator fails with AETHERCL_DEVICE_ERROR too: destroy it (NCCL's
 *    communicator is aborted) and create a new one on every rank. */
AETHERCL_API void* aethercl_comm_create_rank(int nranks, int rank, const void* id, size_t id_size,
                                             int gpu_index);

/* Collectives. P = the communicator's device count (for a communicator across processes, its
 * nranks; its arrays then hold one buffer, this process's: aethercl_comm_create_rank says how it
 * differs); buffers[i], send[i], recv[i] must be buffer tokens of rank i's device, large enough for the elements named below (checked before anything
 * runs), count elements of dtype (f32, f16, bf16; other dtype codes answer
 * AETHERCL_NOT_IMPLEMENTED). Every collective is ordered after all earlier work on the calling
 * thread's current stream of each member device, and later work on those streams observes its
 * result. count 0 validates and
 * returns 1. On the device and host paths results are deterministic for a fixed P: element e of
 * a reduction is ((x_0[e] op x_1[e]) op x_2[e]) ... in rank order, computed in float and rounded
 * once to the dtype (f16/bf16 round to nearest even); MEAN divides that sum by P. So every device
 * holds the same bits, whichever of those two paths ran. On the engine path SUM and MEAN are
 * NCCL's ncclSum and ncclAvg: NCCL picks the order of summation (ring or tree, by size, P and
 * topology), rounds to the dtype after each addition for f16/bf16, and may scale each input by
 * 1/P for MEAN; every device still holds the same bits, within P ulps of sum |x_i| of the exact
 * sum, but not always the bits of the other paths: AETHERCL_PEER_PATH=host (or device) keeps the
 * bit-exact reduction. A communicator of one device is valid: reductions leave the data
 * as it is, all_gather and reduce_scatter copy. send[i] and recv[i] must be different buffers. */

/* buffers[i] (count elements) := the reduction over all ranks, on every rank. */
AETHERCL_API int aethercl_all_reduce(void* comm, void* const* buffers, size_t count, int dtype,
                                     int op);

/* buffers[i] := buffers[root] for every rank (root is a rank, 0 .. P-1); chunks flow along the
 * ranks root, root+1, ... as a pipeline. */
AETHERCL_API int aethercl_broadcast(void* comm, void* const* buffers, size_t count, int dtype,
                                    int root);

/* recv[i] (P x count elements) := send[0] .. send[P-1] (count each) in rank order, every rank. */
AETHERCL_API int aethercl_all_gather(void* comm, void* const* send, void* const* recv,
                                     size_t count, int dtype);

/* recv[i] (count elements) := the reduction over all ranks of block i (elements i*count ..
 * (i+1)*count - 1) of send[j] (P x count elements each). */
AETHERCL_API int aethercl_reduce_scatter(void* comm, void* const* send, void* const* recv,
                                         size_t count, int dtype, int op);

/* Copies size bytes from src (a buffer of src_gpu) at src_offset to dst (a buffer of dst_gpu) at
 * dst_offset, ordered after earlier work on the current streams of both devices; later work on
 * those streams observes it. The
 * path follows the communicator rule above: on the engine path the bytes go through per-device
 * staging (kept until shutdown_driver) with cuMemcpyPeerAsync in chunks of at most 256 MiB and
 * the call returns once the last chunk's copy into dst is enqueued (between two buffers of
 * aethercl_comm_alloc's engine memory, one cuMemcpyPeerAsync from src to dst after host waits for
 * both current streams, and the call returns once it has finished) (when a CUDA call fails, that
 * pair of devices takes the OpenCL path from then on, with one warning naming it, and the copy is
 * redone there; under AETHERCL_PEER_PATH=engine the copy fails with AETHERCL_DEVICE_ERROR
 * instead); on the device path the copy is enqueued and the call returns; on the host path
 * the bytes relay through pinned host memory and the call returns when they have arrived.
 * src_gpu == dst_gpu is a device copy; overlapping ranges of one buffer are refused. Both spans
 * must lie inside their buffers (also for size 0, which then does nothing). gpu indices follow the
 * single-device fallback of every other call. */
AETHERCL_API int aethercl_copy_peer(int dst_gpu, void* dst, size_t dst_offset, int src_gpu,
                                    void* src, size_t src_offset, size_t size);
/* Your own kernels: programs, kernels, stateless launches (ABI version 3)                */
/* ===================================================================================== */

/* Kinds of aethercl_arg. */
enum aethercl_arg_kind {
  AETHERCL_ARG_BUFFER = 0, /* value: a buffer token of the launch's device */
  AETHERCL_ARG_SCALAR = 1, /* value: pointer to size bytes, copied before the call returns */
  AETHERCL_ARG_LOCAL = 2   /* size: bytes of local memory; value ignored */
};

/* One kernel argument of aethercl_launch. */
typedef struct aethercl_arg {
  int kind;          /* AETHERCL_ARG_BUFFER = 0, AETHERCL_ARG_SCALAR = 1, AETHERCL_ARG_LOCAL = 2 */
  size_t size;       /* SCALAR: bytes at value; LOCAL: bytes of local memory; BUFFER: ignored */
  const void* value; /* BUFFER: the buffer token; SCALAR: pointer to the bytes; LOCAL: ignored */
} aethercl_arg;

/* Builds a program from OpenCL C source (NUL-terminated) for device gpu_index and returns a new
 * program token. options (NULL = none) go to the OpenCL compiler unchanged; the driver adds
 * -cl-kernel-arg-info so launches can check scalar sizes and argument kinds. The built binary goes
 * through the on-disk kernel cache (keyed by source, options, device, driver and library version,
 * like the driver's own kernels), so the same program in a second process loads without
 * compiling. A build failure returns NULL with AETHERCL_BUILD_FAILED and the compiler's log in
 * aethercl_last_error(). Programs are independent of the seed kernels and of each other. */
AETHERCL_API void* aethercl_program_create(int gpu_index, const char* source, const char* options);

/* Builds a program from size bytes of SPIR-V (il must start with the SPIR-V magic number). Only
 * devices that accept intermediate language (OpenCL 2.1+ with a CL_DEVICE_IL_VERSION naming
 * SPIR-V, or cl_khr_il_program) can; elsewhere it returns NULL with AETHERCL_NOT_IMPLEMENTED and a
 * message naming what the device lacks (docs/DEVICES.md lists which devices took SPIR-V). */
AETHERCL_API void* aethercl_program_create_il(int gpu_index, const void* il, size_t size,
                                              const char* options);

/* Loads a program binary and builds it with options (plus -cl-kernel-arg-info, as for source).
 * A binary from aethercl_program_binary is checked first: one that is truncated, corrupt or was
 * built for another device or driver is refused with AETHERCL_INVALID_ARGUMENT saying which,
 * before OpenCL sees it. Any other bytes are passed to the runtime as a bare vendor binary (e.g.
 * NVIDIA PTX); one the runtime refuses returns NULL with AETHERCL_BUILD_FAILED and its reason
 * (PoCL aborts the process on a damaged binary of its own format: load those through the checked
 * form). Whether argument types survive in a binary is the runtime's choice (PoCL keeps them;
 * aethercl_kernel_info's "arg_info" tells). */
AETHERCL_API void* aethercl_program_create_binary(int gpu_index, const void* binary, size_t size,
                                                  const char* options);

/* The program's device binary, for aethercl_program_create_binary in this or a later process:
 * returns its full size in bytes; with out non-NULL also copies it there, and then refuses
 * (returns 0, AETHERCL_OUT_OF_RANGE, nothing written) when capacity is smaller. Call with out NULL
 * to size it. The bytes are the runtime's binary after a 56-byte header ("AECLPRG1", 32 hex
 * characters naming the device and driver, the payload's size and checksum as little-endian
 * 64-bit values), which lets create_binary refuse a damaged or foreign binary. */
AETHERCL_API size_t aethercl_program_binary(void* program, void* out, size_t capacity);

/* Releases the program token. Kernels created from it stay valid until they are destroyed. NULL,
 * unknown and already-destroyed tokens are refused (return 0) and change nothing. */
AETHERCL_API int aethercl_program_destroy(void* program);

/* Creates a kernel token for the __kernel function name of program. Returns NULL when the program
 * has no such kernel (the message lists the kernels it has). A kernel token belongs to the
 * program's device and may be launched by several threads at once. */
AETHERCL_API void* aethercl_kernel_create(void* program, const char* name);

/* Writes a JSON description of the kernel, with the buffer rules of aethercl_device_info:
 * {"name", "num_args", "args": [{"index", "kind": "buffer"|"scalar"|"local"|"unknown", "type"
 * (OpenCL type name or null), "name" (or null), "size" (bytes of a scalar whose size is known, else
 * null)}], "max_work_group_size", "local_mem_bytes" (the kernel's own static local memory),
 * "private_mem_bytes", "preferred_work_group_size_multiple", "arg_info" (whether OpenCL reported
 * argument types; false e.g. for some binaries and SPIR-V)}. Returns the full length, 0 on failure. */
AETHERCL_API size_t aethercl_kernel_info(void* kernel, char* buffer, size_t capacity);

/* Releases the kernel token; launches already enqueued still run. */
AETHERCL_API int aethercl_kernel_destroy(void* kernel);

/* Launches kernel over an NDRange of work_dim (1..3) dimensions on stream (NULL = the default
 * stream of gpu_index, else a stream token of that device). global_size has
 * work_dim entries, fewer than 2^(address bits - 1) work-items in all (runtimes round global sizes
 * up to whole work-groups). local_size is NULL (the runtime picks) or work_dim entries, each at
 * least 1, at most the device's limit for its dimension and a divisor of the global size, whose
 * product is at most the kernel's maximum work-group size. args holds exactly the kernel's
 * argument count, and each kind must match the kernel's parameter (global or constant pointer:
 * BUFFER, value: SCALAR, local pointer: LOCAL) where OpenCL reports argument types: BUFFER values
 * are live buffer tokens of this device (the kernel may touch any byte of them: the driver cannot
 * bound-check a user kernel); SCALAR sizes equal the OpenCL type's size where it is known, and the
 * bytes are copied before the call returns; LOCAL sizes are non-zero and, with the kernel's own
 * local memory, fit the device's. Image, sampler and pipe parameters are refused as not
 * implemented. A global size with a 0 component returns 1 and launches nothing (after the
 * checks). One kernel token may be launched from many threads at once. The launch is ordered like
 * every other call on the stream and appears in traces and the kernel log under the kernel's
 * name. A kernel that faults on the device is reported by the next synchronising call where the
 * runtime reports it (GPU runtimes); whether later work runs then is the runtime's (NVIDIA's
 * context stays failed); PoCL runs kernels in the calling process, where a fault ends it. */
AETHERCL_API int aethercl_launch(int gpu_index, void* kernel, void* stream, int work_dim,
                                 const size_t* global_size, const size_t* local_size,
                                 int num_args, const aethercl_arg* args);

/* ===================================================================================== */
/* Typed memory, the kernel log, interop (ABI version 3)                                  */
/* ===================================================================================== */

/* Tags the buffer with an element type (an aethercl_dtype code), shown as "dtype" in the buffer's
 * entry of aethercl_memory_stats. It changes no byte. The training ops that take 16-bit operands
 * (see "16-bit operands of the training ops") read and write a buffer tagged AETHERCL_F16 or
 * AETHERCL_BF16 in that format and refuse other non-float32 tags; every other call ignores the
 * tag. A later call replaces it. Returns 0 for an unknown code or an invalid handle. */
AETHERCL_API int aethercl_buffer_set_dtype(int gpu_index, void* buffer, int dtype);

/* Converts count elements of src (src_dtype) into dst (dst_dtype), element i to element i, on
 * stream (NULL = the default stream, else a stream token of gpu_index). Every pair of f32, f16,
 * bf16, f64, i32, i64, i8 and u8 works (f64 only where the device has fp64). Float to float
 * rounds to nearest even, overflow gives +-inf, NaN stays NaN (quiet, sign kept); float to integer
 * truncates toward zero and saturates, NaN giving 0 (OpenCL's convert_<int>_sat_rtz); integer to
 * float rounds to nearest even; integer to integer saturates. The rounding is exact on every
 * device (integer arithmetic, unaffected by flush-to-zero). count 0 returns 1. Refused: unknown
 * dtypes, src == dst (overlap), either buffer smaller than count elements. */
AETHERCL_API int aethercl_convert(int gpu_index, void* src, int src_dtype, void* dst, int dst_dtype,
                                  size_t count, void* stream);

/* Writes the device's kernel log as a JSON array, oldest first: the most recent 4,096 kernel
 * launches of every kind (op families, conversions, aethercl_launch), each {"kernel" (the
 * __kernel function), "entry_point" (the exported function that caused it), "stream" (null for the
 * default stream, else the token in hex), "global": [...], "local": [...] or null, "queued_ns"
 * (host CLOCK_MONOTONIC nanoseconds at enqueue), "start_ns", "end_ns" (the device's profiling
 * clock, null unless the stream times: tracing is on, or a timing stream; also null while the
 * launch has not finished)}. Same buffer rules as aethercl_device_info; returns the full length.
 * AETHERCL_KERNEL_LOG=0 turns recording off (the log is then "[]"). */
AETHERCL_API size_t aethercl_kernel_log(int gpu_index, char* buffer, size_t capacity);

/* The cl_context of device gpu_index, for PyOpenCL, CLBlast or the caller's own OpenCL code; NULL
 * on failure. The driver keeps ownership (clRetainContext to keep it past shutdown_driver). Queues
 * the caller makes in it are not ordered with the driver's streams: synchronise
 * (aethercl_synchronize) before and after such work. */
AETHERCL_API void* aethercl_cl_context(int gpu_index);

/* The cl_command_queue of stream (NULL = the default stream, else a stream token of gpu_index);
 * NULL on failure. Work the caller enqueues there is ordered with the driver's work on that stream
 * exactly as issued: handing out a queue drains and stops the device's submission thread for the
 * rest of its life (docs/ARCHITECTURE.md decision 15). The driver keeps ownership; the queue stays
 * valid until shutdown_driver (aethercl_trace_start and aethercl_trace_stop give streams new
 * queues: ask again after them). */
AETHERCL_API void* aethercl_cl_queue(int gpu_index, void* stream);

/* The cl_mem behind a buffer token of gpu_index, valid until the buffer is freed; NULL on failure.
 * It may be larger than the allocation (pooled): only the allocated bytes belong to the buffer.
 * Work on it from another queue must be ordered with the driver's by synchronising. */
AETHERCL_API void* aethercl_cl_mem(int gpu_index, void* buffer);

/* ===================================================================================== */
/* Graphs: capture a stream's work once, replay it with one call (ABI version 4)          */
/* ===================================================================================== */

/* Starts capturing stream (NULL = the default stream, else a stream token of gpu_index). Until
 * aethercl_graph_capture_end, every call that would issue work on that stream (calls without a
 * stream argument from a thread whose current stream it is, calls given that stream) validates its
 * arguments exactly as it would eagerly (a refusal stays a refusal and records nothing), records
 * the work instead of running it, and returns 1. Scalars are recorded by value, buffers by handle,
 * host bytes an op stages itself (constants) by value. A call that fails part-way records nothing.
 *
 * Refused during a capture with AETHERCL_INVALID_ARGUMENT and a message naming the capture, which
 * stays valid: read_gpu_to_host_blocking and write_host_to_gpu_blocking on the capturing stream,
 * aethercl_synchronize of its device (while any of its streams captures),
 * aethercl_stream_synchronize, aethercl_event_record, aethercl_stream_wait_event,
 * aethercl_stream_destroy and aethercl_cl_queue of the capturing stream, aethercl_write_async from
 * and aethercl_read_async into pageable host memory (eagerly they copy or wait at the call, which
 * a replay cannot repeat), calls across devices (peer copies, collectives), and the simulated_* matrix product
 * (it reads back). aethercl_write_async / aethercl_read_async with memory of aethercl_host_alloc
 * are recorded by address: each replay reads or writes that host memory when it runs (its current
 * contents, as for buffers). Captures on different streams are independent;
 * nested begin on one stream is refused. Buffers may be allocated and freed during a capture.
 *
 * Memory: a buffer or aethercl_host_alloc memory a graph's work names stays allocated until the
 * graph is destroyed; freeing it (during or after the capture) invalidates the handle or pointer
 * at once as usual, and the memory is released with the graph. Scratch memory of captured ops belongs to the graph (each captured op
 * has its own, reused by every replay); replays of one graph never overlap, so they cannot race on
 * it. Memory allocated on the capturing stream during the capture (buffers, scratch) and freed
 * again during it serves the capture's later allocations of about its size (up to twice): a
 * captured training step holds about the memory of one eager step, since replays run the
 * commands in capture order. Memory allocated before the capture is never reused this way. */
AETHERCL_API int aethercl_graph_capture_begin(int gpu_index, void* stream);

/* Ends the capture of stream and returns the graph as a token, or NULL (and a message) when the
 * stream is not capturing. An empty capture gives a graph with no nodes. */
AETHERCL_API void* aethercl_graph_capture_end(int gpu_index, void* stream);

/* Enqueues the graph's recorded work on stream (NULL = the default stream of the graph's device;
 * a stream of another device is refused) in recorded order and returns, without validating or
 * allocating per op. Where the device has cl_khr_command_buffer 0.9.0 (PoCL 3.1), a graph of
 * kernel launches, copies and fills is recorded into one command buffer per stream at its first
 * launch there and each launch enqueues that (AETHERCL_GRAPH_COMMAND_BUFFER=0 turns this off);
 * otherwise, and for graphs with host transfers, the recorded commands are enqueued in order,
 * handed to the submission thread as one batch where the device has one. Each replay reads
 * the current contents of every buffer when it runs and gives bit for bit the results of the same
 * calls run eagerly (where those are deterministic). Launches of one graph are ordered after each
 * other, also on different streams (a launch on a new stream waits for the previous launch), and
 * the first launch waits for the work issued on the capture stream before the capture ended.
 * Launching into a capturing stream is refused. The kernel log does not list replayed launches. */
AETHERCL_API int aethercl_graph_launch(void* graph, void* stream);

/* Destroys the graph: waits for its last launch to complete (a launch still queued is safe), then
 * releases its recorded work and the memory kept only for it. shutdown_driver destroys every
 * graph and drops captures never ended. */
AETHERCL_API int aethercl_graph_destroy(void* graph);

/* Writes {"device": int, "nodes": int, "kernels": int, "bytes_held": int} with the buffer rules of
 * aethercl_device_info (returns the full length; writes at most capacity - 1 bytes and a NUL).
 * nodes: recorded operations (kernel launches, copies, fills, transfers); kernels: device launches
 * one replay issues (no fusion in this version: the kernel-launch nodes); bytes_held: device bytes
 * allocated for the graph alone (scratch of captured ops, buffers whose handles were freed). */
AETHERCL_API size_t aethercl_graph_info(void* graph, char* out, size_t capacity);

/* ===================================================================================== */
/* Fused attention (ABI version 4)                                                       */
/* ===================================================================================== */

/* Scaled dot-product attention in one flash-style pass: no seq_q x seq_k matrix is ever stored in
 * device memory (not even as scratch), so long sequences need only O(seq) memory.
 * Tensors of head (b, h): q and o are seq_q x head_dim, k and v seq_k x head_dim, in `layout`
 * 0 [batch, heads, seq, head_dim] or 1 [batch, seq, heads, head_dim] (contiguous, row-major).
 * dout, dq have q's shape; dk, dv k's. lse is float32 [batch, heads, seq_q] in every layout.
 * Layout 2 is self-attention on one packed projection (seq_q = seq_k, as a fused QKV linear
 * writes it): q, k and v are one buffer [batch, seq, 3, heads, head_dim] (part 0 q, 1 k, 2 v;
 * desc->q, k and v all name it), and in the backward dq, dk and dv are one buffer of that shape
 * too (each part overwritten); o and dout are [batch, seq, heads, head_dim] as in layout 1.
 *
 * Forward: o_i = sum_j softmax_j(scale q_i.k_j + mask_ij) v_j, row by row, with an online softmax
 * (running maximum and sum) over key tiles held in local memory; lse_i = log sum_j exp(scale
 * q_i.k_j + mask_ij) (the scaled, masked row's log-sum-exp) is written when lse is not NULL.
 * causal = 1 masks keys j > i + seq_k - seq_q (the last query sees every key, as PyTorch's
 * causal_lower_right bias and FlashAttention 2.1 do); a row with no visible key (causal with
 * seq_q > seq_k) gives o_i = 0 and lse_i = -inf. scale = 0 means 1 / sqrt(head_dim) (1 when
 * head_dim = 0).
 * Backward: reads q, k, v, o, lse (required: the forward's) and dout, and overwrites dq, dk and dv
 * (no accumulation). The probabilities are recomputed per tile from q, k and lse; D_i = dout_i.o_i
 * is computed first (one small kernel, float32 scratch of batch*heads*seq_q values); then one
 * kernel over key tiles writes dk and dv and one over query tiles writes dq. No atomics: the same
 * call gives the same bits on the same device, run after run.
 *
 * dtype (AETHERCL_F32, AETHERCL_F16 or AETHERCL_BF16) is the storage of q, k, v, o, dout, dq, dk
 * and dv; every value is read into float32, every sum is kept in float32 and each result is
 * rounded once to dtype (nearest even). compute takes the codes of aethercl_gemm and is checked
 * as it checks them (AETHERCL_COMPUTE_DEFAULT: the device's matmul precision). FP32, TF32 and
 * 3XTF32 multiply in float32, so each gets at least the accuracy it asks for. BF16 and FP16 with
 * head_dim <= 128 run on tensor cores where aethercl_gemm does (NVIDIA compute capability 8.0+,
 * AETHERCL_TENSOR_CORES): q, k, v and dout are rounded to that format, and so are the
 * probabilities and score gradients that enter the second products (P v, P^T dout, dS k, dS^T q);
 * maxima, sums, lse and every accumulation stay float32. Elsewhere, and for larger head_dim,
 * those modes multiply in float32 as FP32 does. Accuracy against a float64 reference on the same
 * (stored) inputs, as max|err| over the tensor divided by max|ref|: float32 storage <= 1e-5 on o
 * and <= 1e-4 on each gradient; f16 and bf16 storage add the one final rounding (at most u =
 * 2^-11 resp. 2^-8 of each value) and, in the backward, reading o in that format (tested: o within
 * 1.25u, gradients within 4u). On tensor cores, against float64 on the inputs rounded to the
 * compute format (u_c = 2^-8 BF16, 2^-11 FP16; u_s the storage's rounding, 0 for float32): o
 * within 2u_c + u_s, gradients within 4u_c + 2u_s, lse within 1e-5.
 *
 * head_dim is at most 256 (larger is refused with a message); batch * heads below 2^31.
 * Dimensions are >= 0 and zero work is no error (returns 1): with batch, heads or seq_q = 0 the
 * forward writes nothing and the backward writes only dk = dv = 0 (seq_q = 0: keys no query sees
 * get zero gradients, as with causal masking); seq_k = 0 gives o = 0, lse = -inf and dq = 0;
 * head_dim = 0 writes only lse (the log of the number of visible keys). Refused (0, message
 * naming the field): NULL desc, struct_size below this header's sizeof (larger accepted), negative
 * dimensions, layout other than 0/1/2, causal other than 0/1, layout 2 with seq_q != seq_k or
 * with q, k, v (dq, dk, dv) not one buffer, a NaN or infinite scale, an unknown dtype or
 * compute code, invalid or foreign buffer handles, buffers smaller than their tensor (lse:
 * batch*heads*seq_q floats), sizes that overflow, a buffer tagged (aethercl_buffer_set_dtype) with
 * another dtype than desc->dtype (lse: other than AETHERCL_F32), and an output that is also an
 * input or another output (o or lse the same buffer as q, k, v or each other; dq, dk, dv the same
 * as any of q, k, v, o, lse, dout or, but for layout 2's one packed buffer, each other). Inputs
 * may share buffers (q = k = v is fine).
 * Unused fields (dout, dq, dk, dv in the forward; lse may be NULL there) are ignored. */
typedef struct aethercl_attention_desc {
  size_t struct_size;
  int batch, heads, seq_q, seq_k, head_dim;
  int layout;        /* 0: [batch, heads, seq, head_dim]; 1: [batch, seq, heads, head_dim];
                        2: q, k, v packed [batch, seq, 3, heads, head_dim] (o as layout 1) */
  int causal;        /* 1: query i sees keys j <= i + seq_k - seq_q */
  float scale;       /* 0: 1 / sqrt(head_dim) */
  int dtype;         /* AETHERCL_F32, AETHERCL_F16 or AETHERCL_BF16: q, k, v, o, dout, dq, dk, dv */
  int compute;       /* compute mode of the two products (AETHERCL_COMPUTE_*) */
  void* q; void* k; void* v; void* o;
  void* lse;         /* float32 [batch, heads, seq_q]: log-sum-exp of each scaled, masked row */
  void* dout; void* dq; void* dk; void* dv;
} aethercl_attention_desc;

AETHERCL_API int aethercl_attention_forward(int gpu_index, const aethercl_attention_desc* desc,
                                            void* stream);
AETHERCL_API int aethercl_attention_backward(int gpu_index, const aethercl_attention_desc* desc,
                                             void* stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AETHERCL_DRIVER_H */
