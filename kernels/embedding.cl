// Embedding kernels: row gather (lookup) and the scatter-add backward, deterministic by default
// with an opt-in float-atomic variant. Ids are int32; an id outside [0, vocab) selects nothing.
// Indices are 64-bit. EMB_ROWS is the format of the rows (out of the lookup, d_out of the
// backward; operand_storage.cl), float32 when not set; the weights and d_w are float32.

#include "operand_storage.cl"
#ifndef EMB_ROWS
#define EMB_ROWS 0
#endif

// out[p, c] = w[idx[p], c] for a valid id, else 0; out is (positions, d), w is (vocab, d).
__kernel void embedding_lookup(__global const int* idx, __global const float* w,
                               __global OS_TYPE(EMB_ROWS)* out, ulong positions, ulong d,
                               ulong vocab) {
  const ulong total = positions * d;
  for (ulong e = get_global_id(0); e < total; e += get_global_size(0)) {
    const ulong p = e / d;
    const int id = idx[p];
    OS_STORE(EMB_ROWS, out, e,
             (id >= 0 && (ulong)id < vocab) ? w[(ulong)id * d + (e - p * d)] : 0.0f);
  }
}

// d_w[v, :] += d_out[p, :] for every p with idx[p] == v, adding in ascending p, so the result is
// bit-identical to a sequential loop and independent of the device. One work-group per vocabulary
// row (grid-stride over rows): for each chunk of lsize positions the lanes flag matches, a
// Hillis-Steele scan (any lsize) compacts the matching positions in order into `matched`, and
// each lane then owns columns lid, lid + lsize, ... of the row, so no two lanes write one element.
__kernel void embedding_backward_segmented(__global const OS_TYPE(EMB_ROWS)* d_out,
                                           __global const int* idx,
                                           __global float* d_w, ulong positions, ulong d,
                                           ulong vocab, __local uint* scan,
                                           __local uint* matched) {
  const uint lid = (uint)get_local_id(0);
  const uint lsize = (uint)get_local_size(0);
  for (ulong row = get_group_id(0); row < vocab; row += get_num_groups(0)) {
    for (ulong base = 0; base < positions; base += lsize) {
      const ulong p = base + lid;
      const uint flag = (p < positions && idx[p] == (int)row) ? 1u : 0u;
      scan[lid] = flag;
      barrier(CLK_LOCAL_MEM_FENCE);
      for (uint offset = 1; offset < lsize; offset <<= 1) {
        const uint add = lid >= offset ? scan[lid - offset] : 0u;
        barrier(CLK_LOCAL_MEM_FENCE);
        scan[lid] += add;
        barrier(CLK_LOCAL_MEM_FENCE);
      }
      if (flag) matched[scan[lid] - 1] = lid;
      const uint count = scan[lsize - 1];
      barrier(CLK_LOCAL_MEM_FENCE);
      if (count != 0) {
        for (ulong c = lid; c < d; c += lsize) {
          float acc = d_w[row * d + c];
          for (uint k = 0; k < count; ++k) {
            acc += OS_LOAD(EMB_ROWS, d_out, (base + matched[k]) * d + c);
          }
          d_w[row * d + c] = acc;
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);  // scan and matched are reused by the next chunk
    }
  }
}

// *address += value as a 32-bit compare-and-swap loop on the float's bit pattern. The first read
// is volatile so it is never a stale cached value; a lost race retries with the value seen.
inline void atomic_add_float(volatile __global float* address, float value) {
  volatile __global int* bits = (volatile __global int*)address;
  int expected = *bits;
  for (;;) {
    const int desired = as_int(as_float(expected) + value);
    const int seen = atomic_cmpxchg(bits, expected, desired);
    if (seen == expected) break;
    expected = seen;
  }
}

// Opt-in (AETHERCL_DETERMINISTIC=0): one work-item per (position, column), atomically adding
// into d_w. No update is lost, but the order of additions (and so the rounding) varies run to run.
__kernel void embedding_backward_atomic(__global const OS_TYPE(EMB_ROWS)* d_out,
                                        __global const int* idx,
                                        volatile __global float* d_w, ulong positions, ulong d,
                                        ulong vocab) {
  const ulong total = positions * d;
  for (ulong e = get_global_id(0); e < total; e += get_global_size(0)) {
    const ulong p = e / d;
    const int id = idx[p];
    if (id >= 0 && (ulong)id < vocab) {
      atomic_add_float(d_w + (ulong)id * d + (e - p * d), OS_LOAD(EMB_ROWS, d_out, e));
    }
  }
}
