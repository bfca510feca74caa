/* The data-parallel gradient exchange of aethercl.distributed, from C: every MPI rank drives one
 * device (its local rank, modulo the visible devices), computes a "gradient" there, and the ranks
 * average it through host memory with MPI_Allreduce(MPI_IN_PLACE) before writing it back. The
 * AetherCL library does not link MPI; this program links both.
 *
 *   mpicc mpi_allreduce.c -I include -L build -l:driver.so -o mpi_allreduce
 *   mpirun -n 2 ./mpi_allreduce [elements]
 *
 * Rank r's gradient is g[i] = (r + 1) * (i % 7) (computed on the device as a + a ... from a
 * written vector); after the exchange every rank must hold mean_r(r + 1) * (i % 7). Exits 0 when
 * every rank's check passes. */
#include <aethercl/driver.h>
#include <mpi.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(int rank, const char* what) {
  fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, aethercl_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1, local_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_free(&local);

  int count = argc > 1 ? atoi(argv[1]) : 100003;
  int devices = aethercl_device_count();
  if (devices < 1) return fail(rank, "aethercl_device_count");
  int gpu = local_rank % devices;
  if (initialize_gpu(gpu) != 1) return fail(rank, "initialize_gpu");

  size_t bytes = (size_t)count * sizeof(float);
  float* host = malloc(bytes);
  for (int i = 0; i < count; ++i) host[i] = 0.5f * (float)(rank + 1) * (float)(i % 7);
  void* half = allocate_gpu_memory(gpu, bytes);
  void* grad = allocate_gpu_memory(gpu, bytes);
  if (!half || !grad) return fail(rank, "allocate_gpu_memory");
  if (write_host_to_gpu_blocking(gpu, half, 0, bytes, host) != 1) return fail(rank, "write");
  if (execute_add_on_gpu(gpu, half, half, grad, count) != 1) return fail(rank, "add");

  /* The exchange: device -> host, MPI in place, scale, host -> device. */
  if (read_gpu_to_host_blocking(gpu, grad, 0, bytes, host) != 1) return fail(rank, "read");
  MPI_Allreduce(MPI_IN_PLACE, host, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  for (int i = 0; i < count; ++i) host[i] /= (float)size;
  if (write_host_to_gpu_blocking(gpu, grad, 0, bytes, host) != 1) return fail(rank, "write");

  if (read_gpu_to_host_blocking(gpu, grad, 0, bytes, host) != 1) return fail(rank, "read");
  float mean_scale = (float)(size + 1) / 2.0f;   /* mean of 1 .. size */
  int bad = 0;
  for (int i = 0; i < count; ++i) {
    float want = mean_scale * (float)(i % 7);
    if (fabsf(host[i] - want) > 1e-5f * (1.0f + fabsf(want))) ++bad;
  }
  int total_bad = 0;
  MPI_Allreduce(&bad, &total_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("%d ranks, %d elements each: %s\n", size, count,
           total_bad == 0 ? "gradients averaged correctly on every rank" : "WRONG results");
  }
  free_gpu_memory(gpu, half);
  free_gpu_memory(gpu, grad);
  free(host);
  shutdown_driver();
  MPI_Finalize();
  return total_bad == 0 ? 0 : 1;
}
