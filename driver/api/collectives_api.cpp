// Entry points: communicators, collectives and peer copies.
#include "api/guard.h"
#include "multi/collectives.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API void* aethercl_comm_create(int count, const int* gpu_indices) {
  return api::guarded(__func__, static_cast<void*>(nullptr),
                      [&] { return multi::comm_create(count, gpu_indices); });
}

AETHERCL_API int aethercl_comm_destroy(void* comm) {
  return api::guarded_status(__func__, [&] { multi::comm_destroy(comm); });
}

AETHERCL_API void* aethercl_comm_alloc(void* comm, int rank, size_t size) {
  return api::guarded(__func__, static_cast<void*>(nullptr),
                      [&] { return multi::comm_alloc(comm, rank, size); });
}

AETHERCL_API int aethercl_comm_unique_id(void* id, size_t size) {
  return api::guarded_status(__func__, [&] { multi::comm_unique_id(id, size); });
}

AETHERCL_API void* aethercl_comm_create_rank(int nranks, int rank, const void* id, size_t id_size,
                                             int gpu_index) {
  return api::guarded(__func__, static_cast<void*>(nullptr), [&] {
    return multi::comm_create_rank(nranks, rank, id, id_size, gpu_index);
  });
}

AETHERCL_API int aethercl_all_reduce(void* comm, void* const* buffers, size_t count, int dtype,
                                     int op) {
  return api::guarded_status(__func__,
                             [&] { multi::all_reduce(comm, buffers, count, dtype, op); });
}

AETHERCL_API int aethercl_broadcast(void* comm, void* const* buffers, size_t count, int dtype,
                                    int root) {
  return api::guarded_status(__func__,
                             [&] { multi::broadcast(comm, buffers, count, dtype, root); });
}

AETHERCL_API int aethercl_all_gather(void* comm, void* const* send, void* const* recv,
                                     size_t count, int dtype) {
  return api::guarded_status(__func__,
                             [&] { multi::all_gather(comm, send, recv, count, dtype); });
}

AETHERCL_API int aethercl_reduce_scatter(void* comm, void* const* send, void* const* recv,
                                         size_t count, int dtype, int op) {
  return api::guarded_status(
      __func__, [&] { multi::reduce_scatter(comm, send, recv, count, dtype, op); });
}

AETHERCL_API int aethercl_copy_peer(int dst_gpu, void* dst, size_t dst_offset, int src_gpu,
                                    void* src, size_t src_offset, size_t size) {
  return api::guarded_status(__func__, [&] {
    multi::copy_peer(dst_gpu, dst, dst_offset, src_gpu, src, src_offset, size);
  });
}

}  // extern "C"
