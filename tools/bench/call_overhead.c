/* Per-call cost of a tiny entry point from C: execute_add_on_gpu on 1 element, loaded with dlopen
 * so the same program measures driver.so and driver_null.so. Calls are timed in bursts of 256
 * with a synchronising read between bursts (not timed), so the figure is the cost the caller pays
 * per call rather than the device's kernel throughput; "sustained" times back-to-back calls
 * including the final drain. Prints the median and p90 in µs.
 * Usage: bench_call_overhead LIBRARY [CALLS] */
#include <aethercl/driver.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int (*init_fn)(int);
typedef void* (*alloc_fn)(int, size_t);
typedef int (*write_fn)(int, void*, size_t, size_t, const void*);
typedef int (*read_fn)(int, void*, size_t, size_t, void*);
typedef int (*add_fn)(int, void*, void*, void*, int);
typedef void (*free_fn)(int, void*);
typedef void (*shutdown_fn)(void);

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int compare(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s LIBRARY [CALLS]\n", argv[0]);
    return 2;
  }
  int calls = argc > 2 ? atoi(argv[2]) : 20000;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  init_fn init = (init_fn)dlsym(lib, "initialize_gpu");
  alloc_fn alloc = (alloc_fn)dlsym(lib, "allocate_gpu_memory");
  write_fn write = (write_fn)dlsym(lib, "write_host_to_gpu_blocking");
  read_fn read = (read_fn)dlsym(lib, "read_gpu_to_host_blocking");
  add_fn add = (add_fn)dlsym(lib, "execute_add_on_gpu");
  free_fn release = (free_fn)dlsym(lib, "free_gpu_memory");
  shutdown_fn shutdown = (shutdown_fn)dlsym(lib, "shutdown_driver");
  if (!init || !alloc || !write || !read || !add || !release || !shutdown || init(0) != 1) {
    fprintf(stderr, "cannot initialise the driver in %s\n", argv[1]);
    return 1;
  }
  float one = 1.0f, out = 0.0f;
  void* a = alloc(0, 4);
  void* c = alloc(0, 4);
  write(0, a, 0, 4, &one);
  for (int i = 0; i < 1000; ++i) add(0, a, a, c, 1); /* warm-up: kernel build, pool, caches */
  read(0, c, 0, 4, &out);
  double* samples = malloc(sizeof(double) * (size_t)calls);
  for (int i = 0; i < calls; ++i) {
    if (i % 256 == 0) read(0, c, 0, 4, &out);
    double start = now_us();
    add(0, a, a, c, 1);
    samples[i] = now_us() - start;
  }
  double start_all = now_us();
  for (int i = 0; i < calls; ++i) add(0, a, a, c, 1);
  read(0, c, 0, 4, &out); /* includes the drain of everything enqueued */
  double wall = now_us() - start_all;
  qsort(samples, (size_t)calls, sizeof(double), compare);
  printf("{\"calls\": %d, \"median_us\": %.3f, \"p90_us\": %.3f, \"sustained_per_call_us\": %.3f}\n",
         calls, samples[calls / 2], samples[calls * 9 / 10], wall / calls);
  release(0, a);
  release(0, c);
  shutdown();
  free(samples);
  return 0;
}
