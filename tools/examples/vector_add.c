/* The runtime from C alone: build a kernel from source, make buffers, launch, wait, read back,
 * then show the kernel's description and the kernel log. Exits 0 when the result is right.
 *
 *   build/examples/vector_add [gpu_index]      (ctest runs it as example_vector_add) */
#include <aethercl/driver.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* kSource =
    "__kernel void vecadd(__global const float* a, __global const float* b,\n"
    "                     __global float* c, float alpha, uint n) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i < n) c[i] = alpha * a[i] + b[i];\n"
    "}\n";

static int fail(const char* what) {
  fprintf(stderr, "%s failed: %s\n", what, aethercl_last_error());
  return 1;
}

int main(int argc, char** argv) {
  int gpu = argc > 1 ? atoi(argv[1]) : 0;
  enum { N = 1000, LOCAL = 50 };
  float a[N], b[N], c[N];
  for (int i = 0; i < N; ++i) {
    a[i] = (float)i;
    b[i] = 0.5f * (float)i;
    c[i] = -1.0f;
  }
  if (!initialize_gpu(gpu)) return fail("initialize_gpu");

  void* program = aethercl_program_create(gpu, kSource, "-cl-fast-relaxed-math");
  if (!program) return fail("aethercl_program_create");
  void* kernel = aethercl_kernel_create(program, "vecadd");
  if (!kernel) return fail("aethercl_kernel_create");
  aethercl_program_destroy(program); /* the kernel keeps what it needs */

  void* da = allocate_gpu_memory(gpu, sizeof a);
  void* db = allocate_gpu_memory(gpu, sizeof b);
  void* dc = allocate_gpu_memory(gpu, sizeof c);
  if (!da || !db || !dc) return fail("allocate_gpu_memory");
  aethercl_buffer_set_dtype(gpu, dc, AETHERCL_F32);
  aethercl_set_buffer_label(gpu, dc, "result");
  if (!write_host_to_gpu_blocking(gpu, da, 0, sizeof a, a) ||
      !write_host_to_gpu_blocking(gpu, db, 0, sizeof b, b))
    return fail("write_host_to_gpu_blocking");

  float alpha = 2.0f;
  unsigned int n = N;
  aethercl_arg args[5] = {
      {AETHERCL_ARG_BUFFER, 0, da}, {AETHERCL_ARG_BUFFER, 0, db}, {AETHERCL_ARG_BUFFER, 0, dc},
      {AETHERCL_ARG_SCALAR, sizeof alpha, &alpha}, {AETHERCL_ARG_SCALAR, sizeof n, &n}};
  size_t global = N, local = LOCAL;
  if (!aethercl_launch(gpu, kernel, NULL, 1, &global, &local, 5, args))
    return fail("aethercl_launch");
  if (!aethercl_synchronize(gpu)) return fail("aethercl_synchronize");
  if (!read_gpu_to_host_blocking(gpu, dc, 0, sizeof c, c)) return fail("read_gpu_to_host_blocking");

  int wrong = 0;
  for (int i = 0; i < N; ++i) wrong += c[i] != alpha * a[i] + b[i];
  printf("vecadd over %d elements: %s\n", N, wrong ? "WRONG" : "correct");

  /* A scalar of the wrong size is refused, with a message naming the argument. */
  double wide = 2.0;
  args[3].size = sizeof wide;
  args[3].value = &wide;
  if (aethercl_launch(gpu, kernel, NULL, 1, &global, &local, 5, args) != 0) {
    fprintf(stderr, "a double for a float parameter was accepted\n");
    wrong = 1;
  } else {
    printf("refused as expected: %s\n", aethercl_last_error());
  }

  char info[2048];
  aethercl_kernel_info(kernel, info, sizeof info);
  printf("kernel: %s\n", info);
  size_t log_size = aethercl_kernel_log(gpu, NULL, 0);
  char* log = malloc(log_size + 1);
  if (log) {
    aethercl_kernel_log(gpu, log, log_size + 1);
    const char* last = strrchr(log, '{');
    printf("last kernel-log entry: %s\n", last ? last : log);
    free(log);
  }
  aethercl_kernel_destroy(kernel);
  free_gpu_memory(gpu, da);
  free_gpu_memory(gpu, db);
  free_gpu_memory(gpu, dc);
  shutdown_driver();
  return wrong ? 1 : 0;
}
