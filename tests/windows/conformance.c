/* Conformance run of the C ABI as a Windows client sees driver.dll (the same source is built
 * natively against libaethercl.so): every seed entry point on small deterministic inputs, the
 * simulated_* host-memory API, refusals with messages, the manifest's symbols found by name in
 * the DLL. Prints "result <function> <checksum> <checksum>" per output, which
 * tests/windows/compare.py compares between the Wine run and the native run, and checks the
 * results it can compute on the host itself. Exit status: the number of failed checks (0 = pass).
 *
 * Usage: conformance [library-to-probe]   (probes the named library's exports by name) */
#include <aethercl/driver.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
#define PROBE_DEFAULT "simulated_driver.dll"
#else
#include <dlfcn.h>
#define PROBE_DEFAULT "simulated_driver.so"
#endif

#include "manifest_names.h" /* generated: static const char* const kManifestNames[] */

#define CAP 1024 /* floats in every buffer: more than any shape below needs */

static int failures = 0;
static int checks = 0;

static void check(int ok, const char* what) {
  ++checks;
  if (!ok) {
    ++failures;
    printf("FAIL %s (last error: %s)\n", what, aethercl_last_error());
  }
}

static void* buffer_of(const float* values, int count) {
  static float zeros[CAP];
  void* handle = allocate_gpu_memory(0, CAP * sizeof(float));
  check(handle != NULL, "allocate_gpu_memory");
  if (!handle) return NULL;
  check(write_host_to_gpu_blocking(0, handle, 0, CAP * sizeof(float), zeros) == 1, "zero fill");
  if (values && count > 0) {
    check(write_host_to_gpu_blocking(0, handle, 0, (size_t)count * sizeof(float), values) == 1,
          "write_host_to_gpu_blocking");
  }
  return handle;
}

static void read_all(void* handle, float* out) {
  check(read_gpu_to_host_blocking(0, handle, 0, CAP * sizeof(float), out) == 1,
        "read_gpu_to_host_blocking");
}

/* Prints two checksums of the buffer's whole capacity (unwritten parts stay zero). */
static void result(const char* function, void* handle) {
  float out[CAP];
  double absolute = 0.0, weighted = 0.0;
  read_all(handle, out);
  for (int i = 0; i < CAP; ++i) {
    absolute += fabs((double)out[i]);
    weighted += (double)out[i] * (double)(i % 7 + 1);
  }
  printf("result %s %.9e %.9e\n", function, absolute, weighted);
}

static void fill(float* values, int count, float scale, float shift) {
  for (int i = 0; i < count; ++i) values[i] = scale * (float)((i * 37 + 11) % 23 - 11) / 11.0f + shift;
}

/* A refused call returns its failure value and leaves a message that starts with its name. */
static void refused(int returned_failure, const char* function) {
  char what[160];
  snprintf(what, sizeof what, "%s refused with a message naming it", function);
  check(returned_failure && strncmp(aethercl_last_error(), function, strlen(function)) == 0 &&
            aethercl_last_error()[strlen(function)] == ':' && aethercl_last_error_code() != 0,
        what);
}

static void probe_exports(const char* path) {
  int missing = 0;
#ifdef _WIN32
  HMODULE module = LoadLibraryA(path);
#else
  void* module = dlopen(path, RTLD_NOW);
#endif
  check(module != NULL, "the client name loads");
  if (!module) return;
  for (size_t i = 0; i < sizeof kManifestNames / sizeof kManifestNames[0]; ++i) {
#ifdef _WIN32
    int found = GetProcAddress(module, kManifestNames[i]) != NULL;
#else
    int found = dlsym(module, kManifestNames[i]) != NULL;
#endif
    if (!found) {
      printf("FAIL export %s missing from %s\n", kManifestNames[i], path);
      ++missing;
    }
  }
  check(missing == 0, "every manifest symbol is exported by name");
  printf("exports %d of %d manifest symbols found in %s\n",
         (int)(sizeof kManifestNames / sizeof kManifestNames[0]) - missing,
         (int)(sizeof kManifestNames / sizeof kManifestNames[0]), path);
}

int main(int argc, char** argv) {
  enum { B = 2, M = 3, N = 4, K = 5 };
  float a[CAP], b[CAP], c[CAP], out[CAP];
  fill(a, CAP, 1.5f, 0.1f);
  fill(b, CAP, -0.75f, 0.2f);
  fill(c, CAP, 0.5f, -0.05f);

  printf("AetherCL %s, ABI %d\n", aethercl_version(), aethercl_abi_version());
  check(strcmp(aethercl_version(), AETHERCL_VERSION_STRING) == 0, "library version = header");
  check(aethercl_abi_version() == AETHERCL_ABI_VERSION, "ABI version = header");
  probe_exports(argc > 1 ? argv[1] : PROBE_DEFAULT);

  /* Refusals before initialisation, then the device. */
  refused(allocate_gpu_memory(0, 16) == NULL, "allocate_gpu_memory");
  check(aethercl_device_count() >= 1, "a device is visible");
  refused(initialize_gpu(aethercl_device_count()) == 0, "initialize_gpu");
  check(initialize_gpu(0) == 1, "initialize_gpu");
  check(simulated_get_compute_unit_count(0) >= 1, "simulated_get_compute_unit_count");

  void* A = buffer_of(a, CAP);
  void* Bf = buffer_of(b, CAP);
  void* C = buffer_of(c, CAP);
  void* O1 = buffer_of(NULL, 0);
  void* O2 = buffer_of(NULL, 0);

  /* Elementwise, checked on the host too. */
  check(execute_add_on_gpu(0, A, Bf, O1, 100) == 1, "execute_add_on_gpu");
  read_all(O1, out);
  int exact = 1;
  for (int i = 0; i < 100; ++i) exact &= out[i] == a[i] + b[i];
  check(exact, "execute_add_on_gpu equals the host sum");
  result("execute_add_on_gpu", O1);
  check(execute_mul_on_gpu(0, A, Bf, O1, 100) == 1, "execute_mul_on_gpu");
  result("execute_mul_on_gpu", O1);
  check(execute_mul_backward_on_gpu(0, C, A, Bf, O1, O2, 100) == 1, "execute_mul_backward_on_gpu");
  result("execute_mul_backward_on_gpu.dA", O1);
  result("execute_mul_backward_on_gpu.dB", O2);
  check(execute_gelu_on_gpu(0, A, O1, 100) == 1, "execute_gelu_on_gpu");
  result("execute_gelu_on_gpu", O1);
  check(execute_gelu_backward_on_gpu(0, A, C, O1, 100) == 1, "execute_gelu_backward_on_gpu");
  result("execute_gelu_backward_on_gpu", O1);
  check(execute_clone_on_gpu(0, A, O1, 64 * sizeof(float)) == 1, "execute_clone_on_gpu");
  result("execute_clone_on_gpu", O1);

  /* Matrix products: plain (broadcast weight), checked on the host; batched; backward passes. */
  check(execute_matmul_on_gpu(0, A, Bf, O1, B, M, N, K) == 1, "execute_matmul_on_gpu");
  read_all(O1, out);
  double worst = 0.0;
  for (int bi = 0; bi < B; ++bi)
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double sum = 0.0;
        for (int k = 0; k < K; ++k) sum += (double)a[(bi * M + m) * K + k] * b[k * N + n];
        double error = fabs(sum - out[(bi * M + m) * N + n]);
        if (error > worst) worst = error;
      }
  check(worst < 1e-4, "execute_matmul_on_gpu equals the host product");
  result("execute_matmul_on_gpu", O1);
  check(execute_matmul_backward_on_gpu(0, A, Bf, C, O1, O2, B, M, N, K) == 1,
        "execute_matmul_backward_on_gpu");
  result("execute_matmul_backward_on_gpu.dA", O1);
  result("execute_matmul_backward_on_gpu.dB", O2);
  check(execute_matmul_batched_on_gpu(0, A, Bf, O1, B, M, N, K) == 1, "execute_matmul_batched_on_gpu");
  result("execute_matmul_batched_on_gpu", O1);
  check(execute_matmul_batched_backward_on_gpu(0, A, Bf, C, O1, O2, B, M, N, K) == 1,
        "execute_matmul_batched_backward_on_gpu");
  result("execute_matmul_batched_backward_on_gpu.dA", O1);
  result("execute_matmul_batched_backward_on_gpu.dB", O2);

  /* Row-wise families. */
  check(execute_layernorm_on_gpu(0, A, O1, 6, 13, 1e-5f) == 1, "execute_layernorm_on_gpu");
  result("execute_layernorm_on_gpu", O1);
  check(execute_layernorm_backward_on_gpu(0, C, A, O1, 6, 13, 1e-5f) == 1,
        "execute_layernorm_backward_on_gpu");
  result("execute_layernorm_backward_on_gpu", O1);
  check(execute_softmax_on_gpu(0, A, O2, 6, 13) == 1, "execute_softmax_on_gpu");
  result("execute_softmax_on_gpu", O2);
  check(execute_softmax_backward_on_gpu(0, C, O2, O1, 6, 13) == 1, "execute_softmax_backward_on_gpu");
  result("execute_softmax_backward_on_gpu", O1);
  check(execute_log_softmax_stable_gpu(0, A, O2, B, M, 11) == 1, "execute_log_softmax_stable_gpu");
  result("execute_log_softmax_stable_gpu", O2);
  float targets_f[B * M];
  int targets[B * M];
  for (int i = 0; i < B * M; ++i) targets[i] = (i * 5) % 11;
  memcpy(targets_f, targets, sizeof targets);
  void* T = buffer_of(targets_f, B * M);
  check(execute_cross_entropy_loss_grad_gpu(0, O2, T, O1, C, B, M, 11) == 1,
        "execute_cross_entropy_loss_grad_gpu");
  result("execute_cross_entropy_loss_grad_gpu.grad", O1);
  result("execute_cross_entropy_loss_grad_gpu.loss", C);

  /* Layout. */
  check(execute_transpose_on_gpu(0, A, O1, 7, 9) == 1, "execute_transpose_on_gpu");
  read_all(O1, out);
  exact = 1;
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 9; ++j) exact &= out[j * 7 + i] == a[i * 9 + j];
  check(exact, "execute_transpose_on_gpu equals the host transpose");
  result("execute_transpose_on_gpu", O1);
  check(execute_transpose_backward_on_gpu(0, A, O1, 7, 9) == 1, "execute_transpose_backward_on_gpu");
  result("execute_transpose_backward_on_gpu", O1);
  check(execute_transpose_batched_gpu(0, A, O1, 3, 5, 6) == 1, "execute_transpose_batched_gpu");
  result("execute_transpose_batched_gpu", O1);
  check(execute_transpose_12_batched_gpu(0, A, O1, 2, 3, 4, 5) == 1, "execute_transpose_12_batched_gpu");
  result("execute_transpose_12_batched_gpu", O1);
  check(execute_reduce_sum_gpu(0, A, O1, B, M, N) == 1, "execute_reduce_sum_gpu");
  result("execute_reduce_sum_gpu", O1);
  check(execute_broadcast_add_gpu(0, A, Bf, O1, B, M, N) == 1, "execute_broadcast_add_gpu");
  result("execute_broadcast_add_gpu", O1);
  check(execute_add_broadcast_pe_gpu(0, A, Bf, O1, B, M, N) == 1, "execute_add_broadcast_pe_gpu");
  result("execute_add_broadcast_pe_gpu", O1);

  /* Embedding (int32 ids written as raw bytes). */
  int ids[B * M];
  float ids_f[B * M];
  for (int i = 0; i < B * M; ++i) ids[i] = (i * 3) % 7;
  memcpy(ids_f, ids, sizeof ids);
  void* I = buffer_of(ids_f, B * M);
  check(execute_embedding_lookup_gpu(0, I, A, O1, B, M, 8, 7) == 1, "execute_embedding_lookup_gpu");
  result("execute_embedding_lookup_gpu", O1);
  void* DW = buffer_of(NULL, 0);
  check(execute_embedding_backward_gpu(0, Bf, I, DW, B, M, 8, 7) == 1, "execute_embedding_backward_gpu");
  result("execute_embedding_backward_gpu", DW);

  /* Optimizer: param, grad, m, v updated in place. */
  void* P = buffer_of(a, CAP);
  void* MV = buffer_of(NULL, 0);
  void* VV = buffer_of(NULL, 0);
  check(execute_adam_update_on_gpu(0, P, Bf, MV, VV, 200, 1, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f) == 1,
        "execute_adam_update_on_gpu");
  result("execute_adam_update_on_gpu.param", P);
  result("execute_adam_update_on_gpu.v", VV);

  /* Refusals with messages (the library keeps working after each). */
  refused(execute_add_on_gpu(0, NULL, Bf, O1, 4) == 0, "execute_add_on_gpu");
  refused(execute_add_on_gpu(0, A, Bf, O1, -1) == 0, "execute_add_on_gpu");
  refused(execute_matmul_on_gpu(0, A, Bf, O1, 1, 1000, 1000, 1000) == 0, "execute_matmul_on_gpu");
  refused(read_gpu_to_host_blocking(0, A, CAP * sizeof(float), 4, out) == 0,
          "read_gpu_to_host_blocking");
  refused(allocate_gpu_memory(0, 0) == NULL, "allocate_gpu_memory");
  refused(aethercl_set_buffer_label(0, (void*)(size_t)0x7777, "x") == 0, "aethercl_set_buffer_label");
  check(strcmp(aethercl_status_name(AETHERCL_OUT_OF_RANGE), "AETHERCL_OUT_OF_RANGE") == 0,
        "aethercl_status_name");

  /* Introspection and the version-3 pool controls. */
  char json[4096];
  check(aethercl_device_info(0, json, sizeof json) > 0 && strstr(json, "\"name\"") != NULL,
        "aethercl_device_info");
  check(aethercl_memory_stats(0, json, sizeof json) > 0 && strstr(json, "live_buffers") != NULL,
        "aethercl_memory_stats");
  check(aethercl_synchronize(0) == 1, "aethercl_synchronize");
  check(aethercl_empty_cache(0) == 1, "aethercl_empty_cache");
  check(aethercl_reset_peak_memory_stats(0) == 1, "aethercl_reset_peak_memory_stats");

  /* The simulated_* host-memory API: blocks, copies, a float64 product checked on the host. */
  double ma[6] = {1, 2, 3, 4, 5, 6}, mb[6] = {7, 8, 9, 10, 11, 12}, mc[4] = {0};
  unsigned long long sa = simulated_kernel_allocate(0, sizeof ma);
  unsigned long long sb = simulated_kernel_allocate(0, sizeof mb);
  check(sa != 0 && sb != 0, "simulated_kernel_allocate");
  simulated_kernel_write(0, sa, sizeof ma, ma);
  simulated_kernel_write(0, sb, sizeof mb, mb);
  int shape_a[2] = {2, 3}, shape_b[2] = {3, 2};
  unsigned long long sc = simulated_matrix_multiply(0, sa, sb, sizeof ma, sizeof mb, shape_a, shape_b);
  check(sc != 0, "simulated_matrix_multiply");
  simulated_kernel_read(0, sc, sizeof mc, mc);
  check(mc[0] == 58 && mc[1] == 64 && mc[2] == 139 && mc[3] == 154,
        "simulated_matrix_multiply equals the host product");
  double back[6] = {0};
  simulated_kernel_read(0, sa, sizeof back, back);
  check(memcmp(back, ma, sizeof ma) == 0, "simulated_kernel_read returns what was written");
  simulated_kernel_read(0, sa + 8, 8, back);
  check(strncmp(aethercl_last_error(), "simulated_kernel_read:", 22) == 0,
        "simulated_kernel_read refuses an address inside a block");
  simulated_kernel_free(0, sa, 0);
  simulated_kernel_free(0, sb, 0);
  simulated_kernel_free(0, sc, 0);

  void* all[] = {A, Bf, C, O1, O2, T, I, DW, P, MV, VV};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) free_gpu_memory(0, all[i]);
  shutdown_driver();
  refused(execute_add_on_gpu(0, A, Bf, O1, 4) == 0, "execute_add_on_gpu");

  printf("conformance: %d passed, %d failed\n", checks - failures, failures);
  return failures;
}
