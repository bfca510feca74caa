// Reductions and broadcasts (docs/ABI.md section 4.8): reduce_sum, broadcast_add, add_broadcast_pe.
#pragma once

#include "runtime/device_call.h"

#include <cstdint>
#include <string>

namespace aethercl::ops {

void reduce_sum(DeviceCall& call, void* in, void* out, int b, int m, int n);
// out[n] = scale * the sum over r < rows of in[r * cols + n] for n < cols (rows, cols > 0), in
// column tiles with compensated sums in a fixed order per shape and device. formats: build
// options naming in's and out's storage (RED_IN, RED_OUT of kernels/reduce.cl), "" for float32.
void column_sums(DeviceCall& call, cl_mem in, cl_mem out, std::uint64_t rows, std::uint64_t cols,
                 float scale, const std::string& formats);
void broadcast_add(DeviceCall& call, void* a, void* bias, void* c, int b, int m, int n);
void add_broadcast_pe(DeviceCall& call, void* x, void* pe, void* y, int b, int s, int e);

}  // namespace aethercl::ops
