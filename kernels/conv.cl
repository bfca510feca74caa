// Convolution helpers around the GEMM engine: im2col / col2im for a chunk of images, the
// layout moves between NCHW tensors and the GEMM's channel-major (C, images x positions)
// matrices, accumulation, and per-channel sums (the bias gradient).
//
// Geometry arguments: c (input channels), h, w, kh, kw, stride, pad, dilation (y then x), oh, ow.
// cols has c * kh * kw rows (channel, kernel row, kernel column) and nc * oh * ow columns (image
// of the chunk, output row, output column); the chunk starts at image n0.

#if AETHERCL_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
#else
typedef float acc_t;
#endif

typedef struct {
  ulong c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
} conv_geometry;

__kernel void conv_im2col(__global const float* x, __global float* cols, ulong n0, ulong nc,
                     conv_geometry g) {
  const ulong positions = g.oh * g.ow, width = nc * positions;
  const ulong count = g.c * g.kh * g.kw * width;
  for (ulong e = get_global_id(0); e < count; e += get_global_size(0)) {
    const ulong column = e % width, row = e / width;
    const ulong n = column / positions, p = column % positions;
    const ulong oy = p / g.ow, ox = p % g.ow;
    const ulong ch = row / (g.kh * g.kw), k = row % (g.kh * g.kw);
    const ulong ky = k / g.kw, kx = k % g.kw;
    // Input coordinates, offset by the padding so they stay unsigned.
    const ulong iy = oy * g.sh + ky * g.dh, ix = ox * g.sw + kx * g.dw;
    float value = 0.0f;
    if (iy >= g.ph && iy - g.ph < g.h && ix >= g.pw && ix - g.pw < g.w) {
      value = x[((n0 + n) * g.c + ch) * g.h * g.w + (iy - g.ph) * g.w + (ix - g.pw)];
    }
    cols[e] = value;
  }
}

// dx for the chunk: each input element sums the column entries that read it, kernel positions
// in ascending order (deterministic, no atomics).
__kernel void conv_col2im(__global const float* cols, __global float* dx, ulong n0, ulong nc,
                     conv_geometry g) {
  const ulong positions = g.oh * g.ow, width = nc * positions;
  const ulong count = nc * g.c * g.h * g.w;
  for (ulong e = get_global_id(0); e < count; e += get_global_size(0)) {
    const ulong ix = e % g.w, iy = (e / g.w) % g.h;
    const ulong ch = (e / (g.w * g.h)) % g.c, n = e / (g.w * g.h * g.c);
    acc_t sum = 0;
    for (ulong ky = 0; ky < g.kh; ++ky) {
      const ulong ty = iy + g.ph;  // = oy * sh + ky * dh
      if (ty < ky * g.dh) break;
      const ulong sy = ty - ky * g.dh;
      if (sy % g.sh != 0 || sy / g.sh >= g.oh) continue;
      const ulong oy = sy / g.sh;
      for (ulong kx = 0; kx < g.kw; ++kx) {
        const ulong tx = ix + g.pw;
        if (tx < kx * g.dw) break;
        const ulong sx = tx - kx * g.dw;
        if (sx % g.sw != 0 || sx / g.sw >= g.ow) continue;
        const ulong ox = sx / g.sw;
        const ulong row = (ch * g.kh + ky) * g.kw + kx;
        sum += (acc_t)cols[row * width + n * positions + oy * g.ow + ox];
      }
    }
    dx[n0 * g.c * g.h * g.w + e] = (float)sum;
  }
}

// y[n0 + n, co, p] = mat[co, n * positions + p] (+ bias[co]).
__kernel void conv_matrix_to_nchw(__global const float* mat, __global const float* bias,
                             int has_bias, __global float* y, ulong n0, ulong nc,
                             ulong channels, ulong positions) {
  const ulong count = nc * channels * positions;
  for (ulong e = get_global_id(0); e < count; e += get_global_size(0)) {
    const ulong p = e % positions, co = (e / positions) % channels, n = e / (positions * channels);
    float value = mat[co * nc * positions + n * positions + p];
    if (has_bias) value += bias[co];
    y[n0 * channels * positions + e] = value;
  }
}

// mat[co, n * positions + p] = t[n0 + n, co, p].
__kernel void conv_nchw_to_matrix(__global const float* t, __global float* mat, ulong n0, ulong nc,
                             ulong channels, ulong positions) {
  const ulong count = nc * channels * positions;
  for (ulong e = get_global_id(0); e < count; e += get_global_size(0)) {
    const ulong p = e % positions, co = (e / positions) % channels, n = e / (positions * channels);
    mat[co * nc * positions + n * positions + p] = t[n0 * channels * positions + e];
  }
}

__kernel void conv_accumulate(__global float* dst, __global const float* src, ulong n) {
  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) dst[i] += src[i];
}

acc_t group_sum(__local acc_t* scratch, acc_t value) {
  const uint lid = get_local_id(0);
  scratch[lid] = value;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint step = get_local_size(0) >> 1; step > 0; step >>= 1) {
    if (lid < step) scratch[lid] += scratch[lid + step];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const acc_t total = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return total;
}

// out[c] = sum over n, p of t[n, c, p] (one work-group per channel).
__kernel void conv_channel_sum(__global const float* t, __global float* out, ulong n, ulong channels,
                          ulong positions, __local acc_t* scratch) {
  const ulong m = n * positions;
  for (ulong c = get_group_id(0); c < channels; c += get_num_groups(0)) {
    acc_t partial = 0;
    for (ulong k = get_local_id(0); k < m; k += get_local_size(0))
      partial += (acc_t)t[((k / positions) * channels + c) * positions + k % positions];
    const acc_t total = group_sum(scratch, partial);
    if (get_local_id(0) == 0) out[c] = (float)total;
  }
}
