// Many devices: communicators, collectives and peer copies (the aethercl_comm_* /
// aethercl_all_reduce ... entry points). Every function validates all of its arguments before
// it enqueues anything and throws Error on refusal.
#pragma once

#include <cstddef>

namespace aethercl::multi {

void* comm_create(int count, const int* gpu_indices);
void comm_destroy(void* comm);
void* comm_alloc(void* comm, int rank, std::size_t size);
void comm_unique_id(void* id, std::size_t size);
void* comm_create_rank(int nranks, int rank, const void* id, std::size_t id_size, int gpu_index);
void all_reduce(void* comm, void* const* buffers, std::size_t count, int dtype, int op);
void broadcast(void* comm, void* const* buffers, std::size_t count, int dtype, int root);
void all_gather(void* comm, void* const* send, void* const* recv, std::size_t count, int dtype);
void reduce_scatter(void* comm, void* const* send, void* const* recv, std::size_t count,
                    int dtype, int op);
void copy_peer(int dst_gpu, void* dst, std::size_t dst_offset, int src_gpu, void* src,
               std::size_t src_offset, std::size_t size);

}  // namespace aethercl::multi
