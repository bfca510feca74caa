// Gather and scatter-add along one axis: x viewed as (outer, len_a, inner), index and y as
// (outer, len_b, inner). An index outside [0, len_a) gathers 0 and scatters nothing.

__kernel void index_gather(__global const float* x, __global const int* index, __global float* y,
                           ulong outer, ulong len_a, ulong len_b, ulong inner) {
  const ulong count = outer * len_b * inner;
  for (ulong e = get_global_id(0); e < count; e += get_global_size(0)) {
    const ulong r = e % inner, o = e / (len_b * inner);
    const int i = index[e];
    y[e] = (i >= 0 && (ulong)i < len_a) ? x[(o * len_a + (ulong)i) * inner + r] : 0.0f;
  }
}

// One work-item per (outer, inner) position walks the axis in ascending order: each element of x
// receives its contributions in that order, with no other item writing it.
__kernel void index_scatter_add(__global float* x, __global const int* index,
                                __global const float* y, ulong outer, ulong len_a, ulong len_b,
                                ulong inner) {
  for (ulong p = get_global_id(0); p < outer * inner; p += get_global_size(0)) {
    const ulong r = p % inner, o = p / inner;
    for (ulong k = 0; k < len_b; ++k) {
      const ulong at = (o * len_b + k) * inner + r;
      const int i = index[at];
      if (i >= 0 && (ulong)i < len_a) x[(o * len_a + (ulong)i) * inner + r] += y[at];
    }
  }
}
