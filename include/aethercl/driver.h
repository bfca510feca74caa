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
 *  - Ordering: every call observes the results of all earlier calls on the same device. Compute
 *    calls may return before the device has finished (AETHERCL_SYNC=1 finishes after every call);
 *    reads, aethercl_synchronize and shutdown_driver wait and report deferred device errors.
 *    Host memory passed to any call may be reused or freed as soon as the call returns.
 *  - Thread-safety: every function may be called from any thread; calls on one device are
 *    serialised by the driver. The last error is per thread.
 */
#ifndef AETHERCL_DRIVER_H
#define AETHERCL_DRIVER_H

#include <stddef.h>

#define AETHERCL_VERSION_MAJOR 0
#define AETHERCL_VERSION_MINOR 1
#define AETHERCL_VERSION_PATCH 0
#define AETHERCL_VERSION_STRING "0.1.0"
/* Bumped whenever exported symbols are added; matches aethercl_abi_version(). */
#define AETHERCL_ABI_VERSION 3

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
  AETHERCL_NOT_INITIALIZED = 5,  /* no device initialised, or called after shutdown_driver */
  AETHERCL_NO_DEVICE = 6,        /* no OpenCL platform/device, or gpu_index out of range */
  AETHERCL_BUILD_FAILED = 7,     /* a kernel program failed to build; the message has the log */
  AETHERCL_DEVICE_ERROR = 8,     /* an OpenCL call failed; the message names it and the code */
  AETHERCL_NOT_IMPLEMENTED = 9,  /* the entry point exists but is not available in this build */
  AETHERCL_INTERNAL = 10         /* a bug in the driver; please report the message */
};

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
 * NULL, unknown or already-freed handles, and calls after shutdown, are harmless no-ops. */
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
/* ===================================================================================== */

/* out[n] = sum over b, m of in[b,m,n]. */
AETHERCL_API int execute_reduce_sum_gpu(int gpu_index, void* in, void* out, int B, int M, int N);
/* c[b,m,n] = a[b,m,n] + bias[n]. */
AETHERCL_API int execute_broadcast_add_gpu(int gpu_index, void* a, void* b, void* c, int B, int M,
                                           int N);
/* y[b,s,e] = x[b,s,e] + pe[s,e]; pe_slice holds S*E floats. */
AETHERCL_API int execute_add_broadcast_pe_gpu(int gpu_index, void* input, void* pe_slice,
                                              void* output, int B, int S, int E);
/* o[i,j,:] = w[idx[i,j],:], a zero row for an id outside [0, v). idx is int32 (b, s). */
AETHERCL_API int execute_embedding_lookup_gpu(int gpu_index, void* idx, void* w, void* o, int b,
                                              int s, int d, int v);
/* d_w[idx[i,j],:] += d_o[i,j,:] for every valid id; accumulates, no update is lost. By default
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

/* Number of visible OpenCL devices (enumerated once; no initialisation needed); 0 when none. */
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
 * statistics name the buffer by it. NULL or "" clears it. Returns 0 for an invalid handle. */
AETHERCL_API int aethercl_set_buffer_label(int gpu_index, void* buffer_handle, const char* label);

/* Starts tracing every kernel launch and transfer on every device, with device timestamps from
 * OpenCL profiling events; aethercl_trace_stop writes them to path as Chrome-trace JSON (open in
 * chrome://tracing or Perfetto). AETHERCL_TRACE=path does the same from initialize_gpu to
 * shutdown_driver and logs a per-kernel summary. Returns 0 when a trace is already running. */
AETHERCL_API int aethercl_trace_start(const char* path);

/* Waits for all devices, writes the trace file and ends tracing; the per-kernel summary goes to the
 * log at info level. Returns 0 when no trace is running or the file cannot be written. */
AETHERCL_API int aethercl_trace_stop(void);

/* Writes the per-kernel totals of the running trace as JSON ({"active", "pending", "kernels":
 * [{"name", "calls", "total_ns", "bytes"}]}), with the buffer rules of aethercl_device_info. */
AETHERCL_API size_t aethercl_trace_summary(char* buffer, size_t capacity);

/* ===================================================================================== */
/* Your own kernels: programs, kernels, stateless launches (ABI version 3)                */
/* ===================================================================================== */

/* Element types of typed memory (aethercl_buffer_set_dtype, aethercl_convert). f16 and bf16 are
 * stored as 16-bit patterns on every device (no cl_khr_fp16 needed). */
enum aethercl_dtype {
  AETHERCL_F32 = 0,
  AETHERCL_F16 = 1,
  AETHERCL_BF16 = 2,
  AETHERCL_F64 = 3,
  AETHERCL_I32 = 4,
  AETHERCL_I64 = 5,
  AETHERCL_I8 = 6,
  AETHERCL_U8 = 7
};

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
 * stream of gpu_index; until this build has streams any other value is refused). global_size has
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
 * entry of aethercl_memory_stats. Only a tag: it changes no byte and no other call. A later call
 * replaces it. Returns 0 for an unknown code or an invalid handle. */
AETHERCL_API int aethercl_buffer_set_dtype(int gpu_index, void* buffer, int dtype);

/* Converts count elements of src (src_dtype) into dst (dst_dtype), element i to element i, on
 * stream (NULL = default). Every pair of f32, f16, bf16, f64, i32, i64, i8 and u8 works (f64 only
 * where the device has fp64). Float to float rounds to nearest even, overflow gives +-inf, NaN
 * stays NaN (quiet, sign kept); float to integer truncates toward zero and saturates, NaN giving 0
 * (OpenCL's convert_<int>_sat_rtz); integer to float rounds to nearest even; integer to integer
 * saturates. The rounding is exact on every device (integer arithmetic, unaffected by
 * flush-to-zero). count 0 returns 1. Refused: unknown dtypes, src == dst (overlap), either buffer
 * smaller than count elements. */
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
 * the caller makes in it are not ordered with the driver's work: synchronise (aethercl_synchronize)
 * before and after such work. */
AETHERCL_API void* aethercl_cl_context(int gpu_index);

/* The cl_command_queue of stream (NULL = the default stream; until this build has streams any
 * other value is refused); NULL on failure. Work the caller enqueues there is ordered with the
 * driver's work on that stream exactly as issued. The driver keeps ownership; the queue stays
 * valid until shutdown_driver (aethercl_trace_start switches the device to a new, profiling
 * queue: ask again after it). */
AETHERCL_API void* aethercl_cl_queue(int gpu_index, void* stream);

/* The cl_mem behind a buffer token of gpu_index, valid until the buffer is freed; NULL on failure.
 * It may be larger than the allocation (pooled): only the allocated bytes belong to the buffer.
 * Work on it from another queue must be ordered with the driver's by synchronising. */
AETHERCL_API void* aethercl_cl_mem(int gpu_index, void* buffer);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AETHERCL_DRIVER_H */
