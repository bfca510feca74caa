/* A downstream program of the installed library: version agreement, then one add round trip on
 * device 0 (or, with no device, a refusal that names the problem). Exit 0 only when all holds. */
#include <aethercl/driver.h>

#include <stdio.h>
#include <string.h>

static int fail(const char* what) {
  fprintf(stderr, "consumer: %s (%s)\n", what, aethercl_last_error());
  return 1;
}

int main(void) {
  if (strcmp(aethercl_version(), AETHERCL_VERSION_STRING) != 0) return fail("version differs");
  if (aethercl_abi_version() != AETHERCL_ABI_VERSION) return fail("ABI version differs");
  if (aethercl_device_count() < 1) return fail("no device");
  if (!initialize_gpu(0)) return fail("initialize_gpu");
  float a[5] = {1, 2, 3, 4, 5}, b[5] = {10, 20, 30, 40, 50}, c[5] = {0};
  void* buffers[3];
  for (int i = 0; i < 3; ++i) {
    buffers[i] = allocate_gpu_memory(0, sizeof a);
    if (!buffers[i]) return fail("allocate_gpu_memory");
  }
  if (!write_host_to_gpu_blocking(0, buffers[0], 0, sizeof a, a) ||
      !write_host_to_gpu_blocking(0, buffers[1], 0, sizeof b, b) ||
      !execute_add_on_gpu(0, buffers[0], buffers[1], buffers[2], 5) ||
      !read_gpu_to_host_blocking(0, buffers[2], 0, sizeof c, c)) {
    return fail("add round trip");
  }
  for (int i = 0; i < 5; ++i) {
    if (c[i] != a[i] + b[i]) return fail("wrong sum");
  }
  if (allocate_gpu_memory(0, 0) != NULL || strstr(aethercl_last_error(), "allocate_gpu_memory") == NULL) {
    return fail("a zero-byte allocation was not refused by name");
  }
  for (int i = 0; i < 3; ++i) free_gpu_memory(0, buffers[i]);
  shutdown_driver();
  printf("consumer: AetherCL %s, ABI %d, add round trip ok\n", aethercl_version(),
         aethercl_abi_version());
  return 0;
}
