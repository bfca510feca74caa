/* Interop: CLBlast's SGEMM on the driver's own buffers. The driver allocates and fills A, B and
 * C; CLBlast computes C = A B on the driver's queue (aethercl_cl_queue) with the cl_mem objects
 * behind the tokens (aethercl_cl_mem); the driver reads C back, ordered after CLBlast's kernels
 * because both use the same in-order queue. Exits 0 when C matches a host product.
 *
 *   build/examples/clblast_sgemm [gpu_index] [m n k]   (ctest runs it as example_clblast_sgemm) */
#include <aethercl/driver.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <clblast_c.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(const char* what) {
  fprintf(stderr, "%s failed: %s\n", what, aethercl_last_error());
  return 1;
}

int main(int argc, char** argv) {
  int gpu = argc > 1 ? atoi(argv[1]) : 0;
  size_t m = argc > 4 ? (size_t)atol(argv[2]) : 67;
  size_t n = argc > 4 ? (size_t)atol(argv[3]) : 45;
  size_t k = argc > 4 ? (size_t)atol(argv[4]) : 29;
  float* a = malloc(m * k * sizeof(float));
  float* b = malloc(k * n * sizeof(float));
  float* c = malloc(m * n * sizeof(float));
  if (!a || !b || !c) return 1;
  srand(7);
  for (size_t i = 0; i < m * k; ++i) a[i] = (float)rand() / RAND_MAX - 0.5f;
  for (size_t i = 0; i < k * n; ++i) b[i] = (float)rand() / RAND_MAX - 0.5f;
  for (size_t i = 0; i < m * n; ++i) c[i] = NAN;

  if (!initialize_gpu(gpu)) return fail("initialize_gpu");
  void* da = allocate_gpu_memory(gpu, m * k * sizeof(float));
  void* db = allocate_gpu_memory(gpu, k * n * sizeof(float));
  void* dc = allocate_gpu_memory(gpu, m * n * sizeof(float));
  if (!da || !db || !dc) return fail("allocate_gpu_memory");
  if (!write_host_to_gpu_blocking(gpu, da, 0, m * k * sizeof(float), a) ||
      !write_host_to_gpu_blocking(gpu, db, 0, k * n * sizeof(float), b) ||
      !write_host_to_gpu_blocking(gpu, dc, 0, m * n * sizeof(float), c))
    return fail("write_host_to_gpu_blocking");

  cl_command_queue queue = (cl_command_queue)aethercl_cl_queue(gpu, NULL);
  cl_mem mem_a = (cl_mem)aethercl_cl_mem(gpu, da);
  cl_mem mem_b = (cl_mem)aethercl_cl_mem(gpu, db);
  cl_mem mem_c = (cl_mem)aethercl_cl_mem(gpu, dc);
  if (!queue || !mem_a || !mem_b || !mem_c) return fail("aethercl_cl_queue / aethercl_cl_mem");

  CLBlastStatusCode status =
      CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, m, n, k, 1.0f,
                   mem_a, 0, k, mem_b, 0, n, 0.0f, mem_c, 0, n, &queue, NULL);
  if (status != CLBlastSuccess) {
    fprintf(stderr, "CLBlastSgemm failed: status %d\n", (int)status);
    return 1;
  }
  /* The driver's read waits for everything on the queue, CLBlast's kernels included. */
  if (!read_gpu_to_host_blocking(gpu, dc, 0, m * n * sizeof(float), c))
    return fail("read_gpu_to_host_blocking");

  double worst = 0.0;
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) {
      double want = 0.0;
      for (size_t p = 0; p < k; ++p) want += (double)a[i * k + p] * b[p * n + j];
      double error = fabs(want - c[i * n + j]);
      if (!(error <= worst)) worst = error; /* NaN propagates into worst */
    }
  }
  /* float32 products of k terms in [-0.5, 0.5]: well below 1e-4 absolute for small k. */
  int ok = worst < 1e-4 * (double)k;
  printf("CLBlast SGEMM %zux%zux%zu on AetherCL buffers: max |error| %.3g vs float64 (%s)\n", m, n,
         k, worst, ok ? "correct" : "WRONG");
  free_gpu_memory(gpu, da);
  free_gpu_memory(gpu, db);
  free_gpu_memory(gpu, dc);
  shutdown_driver();
  free(a);
  free(b);
  free(c);
  return ok ? 0 : 1;
}
