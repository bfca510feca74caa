// Host-memory ("simulated") op family (docs/ABI.md section 4.10): registered host blocks and the
// float64 matrix product that goes through the device.
#pragma once

#include "runtime/device_call.h"

#include <cstddef>
#include <cstdint>

namespace aethercl::ops {

// Host blocks (no device involved; gpu_index is ignored by the entry points).
std::uint64_t sim_allocate(std::size_t size);
void sim_free(std::uint64_t address);
void sim_write(std::uint64_t address, std::size_t size, const void* source);
// Copies out; the block stays valid (the original freed it here, docs/ABI.md section 10.4 item 1).
void sim_read(std::uint64_t address, std::size_t size, void* destination);

// C = A @ B in float64, returned as the address of a new registered block of rows_a*cols_b*8
// bytes. Validates shapes, sizes and addresses first; on a device without fp64 (or with
// AETHERCL_SIM_HOST_MATMUL=1) the product is computed on the host, with a warning.
std::uint64_t sim_matrix_multiply(DeviceCall& call, std::uint64_t address_a,
                                  std::uint64_t address_b, std::size_t size_a, std::size_t size_b,
                                  const int* shape_a, const int* shape_b);

// The host reference: C(m,n) = A(m,k) @ B(k,n), each element summed with k ascending and one
// rounding per product and per addition (the device kernel's order).
void sim_matmul_host(const double* a, const double* b, double* c, std::uint64_t m,
                     std::uint64_t n, std::uint64_t k);

}  // namespace aethercl::ops
