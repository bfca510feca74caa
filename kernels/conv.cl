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

// Index arithmetic type: the host builds the family with CONV_INDEX32 when every index of the
// call fits 32 bits (64-bit division costs several times more on GPUs and CPUs alike).
#if CONV_INDEX32
typedef uint idx_t;
#else
typedef ulong idx_t;
#endif

// Each work-item fills one output row (ow columns) of one (cols row, image) pair: the index
// decomposition happens once per item, the inner loop writes contiguous columns.
__kernel void conv_im2col(__global const float* x, __global float* cols, ulong n0_arg,
                          ulong nc_arg, conv_geometry g) {
  const idx_t oh = (idx_t)g.oh, ow = (idx_t)g.ow, kw = (idx_t)g.kw, khw = (idx_t)(g.kh * g.kw);
  const idx_t h = (idx_t)g.h, w = (idx_t)g.w, ph = (idx_t)g.ph, pw = (idx_t)g.pw;
  const idx_t sh = (idx_t)g.sh, sw = (idx_t)g.sw, dh = (idx_t)g.dh, dw = (idx_t)g.dw;
  const idx_t c = (idx_t)g.c, n0 = (idx_t)n0_arg, nc = (idx_t)nc_arg;
  const idx_t width = nc * oh * ow;
  const idx_t items = c * khw * nc * oh;
  for (idx_t item = get_global_id(0); item < items; item += get_global_size(0)) {
    const idx_t oy = item % oh, n = (item / oh) % nc, row = item / (oh * nc);
    const idx_t ch = row / khw, k = row % khw;
    const idx_t ky = k / kw, kx = k % kw;
    __global float* out = cols + row * width + (n * oh + oy) * ow;
    // Input row, offset by the padding so it stays unsigned.
    const idx_t iy = oy * sh + ky * dh;
    if (iy < ph || iy - ph >= h) {
      for (idx_t ox = 0; ox < ow; ++ox) out[ox] = 0.0f;
      continue;
    }
    __global const float* in = x + ((n0 + n) * c + ch) * h * w + (iy - ph) * w;
    for (idx_t ox = 0; ox < ow; ++ox) {
      const idx_t ix = ox * sw + kx * dw;
      out[ox] = (ix >= pw && ix - pw < w) ? in[ix - pw] : 0.0f;
    }
  }
}

// dx for the chunk: each work-item owns one input row (w elements) of one (image, channel). It
// zeroes the row, then adds the column entries that read it, kernel positions (ky, kx) in
// ascending order, so every element is the same fixed-order float sum (deterministic, no
// atomics, no division in the inner loop).
__kernel void conv_col2im(__global const float* cols, __global float* dx, ulong n0_arg,
                          ulong nc_arg, conv_geometry g) {
  const idx_t oh = (idx_t)g.oh, ow = (idx_t)g.ow, kh = (idx_t)g.kh, kw = (idx_t)g.kw;
  const idx_t h = (idx_t)g.h, w = (idx_t)g.w, ph = (idx_t)g.ph, pw = (idx_t)g.pw;
  const idx_t sh = (idx_t)g.sh, sw = (idx_t)g.sw, dh = (idx_t)g.dh, dw = (idx_t)g.dw;
  const idx_t c = (idx_t)g.c, n0 = (idx_t)n0_arg, nc = (idx_t)nc_arg;
  const idx_t width = nc * oh * ow;
  const idx_t items = nc * c * h;
  for (idx_t item = get_global_id(0); item < items; item += get_global_size(0)) {
    const idx_t iy = item % h, ch = (item / h) % c, n = item / (h * c);
    __global float* out = dx + ((n0 + n) * c + ch) * h * w + iy * w;
    for (idx_t ix = 0; ix < w; ++ix) out[ix] = 0.0f;
    const idx_t ty = iy + ph;  // = oy * sh + ky * dh for the windows that read this row
    for (idx_t ky = 0; ky < kh && ky * dh <= ty; ++ky) {
      const idx_t sy = ty - ky * dh;
      if (sy % sh != 0 || sy / sh >= oh) continue;
      const idx_t oy = sy / sh;
      for (idx_t kx = 0; kx < kw; ++kx) {
        __global const float* src = cols + ((ch * kh + ky) * kw + kx) * width + (n * oh + oy) * ow;
        for (idx_t ox = 0; ox < ow; ++ox) {
          const idx_t px = ox * sw + kx * dw;  // padded input column
          if (px >= pw && px - pw < w) out[px - pw] += src[ox];
        }
      }
    }
  }
}

// GPU forms of im2col and col2im (the host picks them off CPU devices): one work-item per element,
// neighbouring items on neighbouring addresses, so every load and store of a warp is coalesced.
// The row forms above write one contiguous row per item, which is what CPUs want. col2im sums the
// same terms in the same (ky, kx) order as its row form: the results are bit-identical.
__kernel void conv_im2col_elements(__global const float* x, __global float* cols, ulong n0_arg,
                                   ulong nc_arg, conv_geometry g) {
  const idx_t oh = (idx_t)g.oh, ow = (idx_t)g.ow, kw = (idx_t)g.kw, khw = (idx_t)(g.kh * g.kw);
  const idx_t h = (idx_t)g.h, w = (idx_t)g.w, ph = (idx_t)g.ph, pw = (idx_t)g.pw;
  const idx_t sh = (idx_t)g.sh, sw = (idx_t)g.sw, dh = (idx_t)g.dh, dw = (idx_t)g.dw;
  const idx_t c = (idx_t)g.c, n0 = (idx_t)n0_arg, nc = (idx_t)nc_arg;
  const idx_t width = nc * oh * ow, total = c * khw * width;
  for (idx_t e = get_global_id(0); e < total; e += get_global_size(0)) {
    const idx_t column = e % width, row = e / width;
    const idx_t ox = column % ow, oy = (column / ow) % oh, n = column / (ow * oh);
    const idx_t ch = row / khw, k = row % khw;
    const idx_t iy = oy * sh + (k / kw) * dh, ix = ox * sw + (k % kw) * dw;  // padded
    cols[e] = (iy >= ph && iy - ph < h && ix >= pw && ix - pw < w)
                  ? x[((n0 + n) * c + ch) * h * w + (iy - ph) * w + (ix - pw)]
                  : 0.0f;
  }
}

__kernel void conv_col2im_elements(__global const float* cols, __global float* dx, ulong n0_arg,
                                   ulong nc_arg, conv_geometry g) {
  const idx_t oh = (idx_t)g.oh, ow = (idx_t)g.ow, kh = (idx_t)g.kh, kw = (idx_t)g.kw;
  const idx_t h = (idx_t)g.h, w = (idx_t)g.w, ph = (idx_t)g.ph, pw = (idx_t)g.pw;
  const idx_t sh = (idx_t)g.sh, sw = (idx_t)g.sw, dh = (idx_t)g.dh, dw = (idx_t)g.dw;
  const idx_t c = (idx_t)g.c, n0 = (idx_t)n0_arg, nc = (idx_t)nc_arg;
  const idx_t width = nc * oh * ow, total = nc * c * h * w;
  for (idx_t e = get_global_id(0); e < total; e += get_global_size(0)) {
    const idx_t ix = e % w, iy = (e / w) % h, ch = (e / (w * h)) % c, n = e / (w * h * c);
    const idx_t ty = iy + ph, tx = ix + pw;
    float sum = 0.0f;
    for (idx_t ky = 0; ky < kh && ky * dh <= ty; ++ky) {
      const idx_t sy = ty - ky * dh;
      if (sy % sh != 0 || sy / sh >= oh) continue;
      const idx_t oy = sy / sh;
      for (idx_t kx = 0; kx < kw && kx * dw <= tx; ++kx) {
        const idx_t sx = tx - kx * dw;
        if (sx % sw != 0 || sx / sw >= ow) continue;
        sum += cols[((ch * kh + ky) * kw + kx) * width + (n * oh + oy) * ow + sx / sw];
      }
    }
    dx[(n0 * c) * h * w + e] = sum;
  }
}

// GPU forms of the layout moves: one element per item.
__kernel void conv_matrix_to_nchw_elements(__global const float* mat, __global const float* bias,
                                           int has_bias, __global float* y, ulong n0_arg,
                                           ulong nc_arg, ulong channels_arg, ulong positions_arg) {
  const idx_t n0 = (idx_t)n0_arg, nc = (idx_t)nc_arg, channels = (idx_t)channels_arg;
  const idx_t positions = (idx_t)positions_arg, total = nc * channels * positions;
  for (idx_t e = get_global_id(0); e < total; e += get_global_size(0)) {
    const idx_t p = e % positions, co = (e / positions) % channels, n = e / (positions * channels);
    y[n0 * channels * positions + e] =
        mat[(co * nc + n) * positions + p] + (has_bias ? bias[co] : 0.0f);
  }
}

__kernel void conv_nchw_to_matrix_elements(__global const float* t, __global float* mat,
                                           ulong n0_arg, ulong nc_arg, ulong channels_arg,
                                           ulong positions_arg) {
  const idx_t n0 = (idx_t)n0_arg, nc = (idx_t)nc_arg, channels = (idx_t)channels_arg;
  const idx_t positions = (idx_t)positions_arg, total = nc * channels * positions;
  for (idx_t e = get_global_id(0); e < total; e += get_global_size(0)) {
    const idx_t p = e % positions, n = (e / positions) % nc, co = e / (positions * nc);
    mat[e] = t[((n0 + n) * channels + co) * positions + p];
  }
}

// y[n0 + n, co, :] = mat[co, n * positions : (n + 1) * positions] (+ bias[co]); one work-item per
// (image, channel) row.
__kernel void conv_matrix_to_nchw(__global const float* mat, __global const float* bias,
                                  int has_bias, __global float* y, ulong n0_arg, ulong nc_arg,
                                  ulong channels_arg, ulong positions_arg) {
  const idx_t n0 = (idx_t)n0_arg, nc = (idx_t)nc_arg, channels = (idx_t)channels_arg;
  const idx_t positions = (idx_t)positions_arg;
  for (idx_t item = get_global_id(0); item < nc * channels; item += get_global_size(0)) {
    const idx_t co = item % channels, n = item / channels;
    const float b = has_bias ? bias[co] : 0.0f;
    __global const float* src = mat + (co * nc + n) * positions;
    __global float* dst = y + ((n0 + n) * channels + co) * positions;
    for (idx_t p = 0; p < positions; ++p) dst[p] = src[p] + b;
  }
}

// mat[co, n * positions + p] = t[n0 + n, co, p]; one work-item per (image, channel) row.
__kernel void conv_nchw_to_matrix(__global const float* t, __global float* mat, ulong n0_arg,
                                  ulong nc_arg, ulong channels_arg, ulong positions_arg) {
  const idx_t n0 = (idx_t)n0_arg, nc = (idx_t)nc_arg, channels = (idx_t)channels_arg;
  const idx_t positions = (idx_t)positions_arg;
  for (idx_t item = get_global_id(0); item < nc * channels; item += get_global_size(0)) {
    const idx_t co = item % channels, n = item / channels;
    __global const float* src = t + ((n0 + n) * channels + co) * positions;
    __global float* dst = mat + (co * nc + n) * positions;
    for (idx_t p = 0; p < positions; ++p) dst[p] = src[p];
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

// Depthwise convolution (groups = c_in = c_out) computed directly: as GEMMs it would be c_in
// products of one row each. Sums run over (ky, kx) or (image, oy, ox) in ascending order.
#define DW_GEOMETRY                                                                          \
  const idx_t oh = (idx_t)g.oh, ow = (idx_t)g.ow, kh = (idx_t)g.kh, kw = (idx_t)g.kw;         \
  const idx_t h = (idx_t)g.h, w = (idx_t)g.w, ph = (idx_t)g.ph, pw = (idx_t)g.pw;             \
  const idx_t sh = (idx_t)g.sh, sw = (idx_t)g.sw, dh = (idx_t)g.dh, dw = (idx_t)g.dw;         \
  const idx_t c = (idx_t)g.c, n = (idx_t)n_arg

__kernel void conv_depthwise_forward(__global const float* x, __global const float* weight,
                                     __global const float* bias, int has_bias,
                                     __global float* y, ulong n_arg, conv_geometry g) {
  DW_GEOMETRY;
  for (idx_t e = get_global_id(0); e < n * c * oh * ow; e += get_global_size(0)) {
    const idx_t ox = e % ow, oy = (e / ow) % oh, ch = (e / (ow * oh)) % c, img = e / (ow * oh * c);
    __global const float* xp = x + (img * c + ch) * h * w;
    __global const float* wp = weight + ch * kh * kw;
    acc_t sum = has_bias ? (acc_t)bias[ch] : (acc_t)0;
    for (idx_t ky = 0; ky < kh; ++ky) {
      const idx_t py = oy * sh + ky * dh;
      if (py < ph || py - ph >= h) continue;
      for (idx_t kx = 0; kx < kw; ++kx) {
        const idx_t px = ox * sw + kx * dw;
        if (px < pw || px - pw >= w) continue;
        sum += (acc_t)xp[(py - ph) * w + (px - pw)] * (acc_t)wp[ky * kw + kx];
      }
    }
    y[e] = (float)sum;
  }
}

__kernel void conv_depthwise_backward_data(__global const float* dy, __global const float* weight,
                                           __global float* dx, ulong n_arg, conv_geometry g) {
  DW_GEOMETRY;
  for (idx_t e = get_global_id(0); e < n * c * h * w; e += get_global_size(0)) {
    const idx_t ix = e % w, iy = (e / w) % h, ch = (e / (w * h)) % c, img = e / (w * h * c);
    __global const float* dyp = dy + (img * c + ch) * oh * ow;
    __global const float* wp = weight + ch * kh * kw;
    acc_t sum = 0;
    for (idx_t ky = 0; ky < kh && ky * dh <= iy + ph; ++ky) {
      const idx_t sy = iy + ph - ky * dh;
      if (sy % sh != 0 || sy / sh >= oh) continue;
      for (idx_t kx = 0; kx < kw && kx * dw <= ix + pw; ++kx) {
        const idx_t sx = ix + pw - kx * dw;
        if (sx % sw != 0 || sx / sw >= ow) continue;
        sum += (acc_t)dyp[(sy / sh) * ow + sx / sw] * (acc_t)wp[ky * kw + kx];
      }
    }
    dx[e] = (float)sum;
  }
}

// dweight[ch, ky, kx] summed over images [first, last) and every output position, in ascending
// order (both depthwise weight-gradient kernels).
acc_t depthwise_weight_sum(__global const float* x, __global const float* dy, conv_geometry g,
                           idx_t ch, idx_t ky, idx_t kx, idx_t first, idx_t last) {
  const idx_t oh = (idx_t)g.oh, ow = (idx_t)g.ow, h = (idx_t)g.h, w = (idx_t)g.w;
  const idx_t ph = (idx_t)g.ph, pw = (idx_t)g.pw, sh = (idx_t)g.sh, sw = (idx_t)g.sw;
  const idx_t dh = (idx_t)g.dh, dw = (idx_t)g.dw, c = (idx_t)g.c;
  acc_t sum = 0;
  for (idx_t img = first; img < last; ++img) {
    __global const float* xp = x + (img * c + ch) * h * w;
    __global const float* dyp = dy + (img * c + ch) * oh * ow;
    for (idx_t oy = 0; oy < oh; ++oy) {
      const idx_t py = oy * sh + ky * dh;
      if (py < ph || py - ph >= h) continue;
      for (idx_t ox = 0; ox < ow; ++ox) {
        const idx_t px = ox * sw + kx * dw;
        if (px < pw || px - pw >= w) continue;
        sum += (acc_t)dyp[oy * ow + ox] * (acc_t)xp[(py - ph) * w + (px - pw)];
      }
    }
  }
  return sum;
}

// The weight gradient in two passes where one item per weight leaves a GPU idle: partial sums
// over `chunk` images per (weight, chunk), then their sum in chunk order (a fixed order: the
// result depends only on the shape and the chunking, which depends only on the device).
__kernel void conv_depthwise_weight_partials(__global const float* x, __global const float* dy,
                                             __global acc_t* partials, ulong n_arg, ulong chunk,
                                             conv_geometry g) {
  const idx_t kh = (idx_t)g.kh, kw = (idx_t)g.kw, c = (idx_t)g.c, n = (idx_t)n_arg;
  const idx_t weights = c * kh * kw, chunks = (n + (idx_t)chunk - 1) / (idx_t)chunk;
  for (idx_t e = get_global_id(0); e < weights * chunks; e += get_global_size(0)) {
    const idx_t wi = e % weights, part = e / weights;
    const idx_t kx = wi % kw, ky = (wi / kw) % kh, ch = wi / (kw * kh);
    const idx_t first = part * (idx_t)chunk;
    partials[e] = depthwise_weight_sum(x, dy, g, ch, ky, kx, first, min(n, first + (idx_t)chunk));
  }
}

__kernel void conv_depthwise_weight_fold(__global const acc_t* partials, __global float* dweight,
                                         ulong weights, ulong chunks) {
  for (ulong wi = get_global_id(0); wi < weights; wi += get_global_size(0)) {
    acc_t sum = 0;
    for (ulong part = 0; part < chunks; ++part) sum += partials[part * weights + wi];
    dweight[wi] = (float)sum;
  }
}

__kernel void conv_depthwise_backward_weight(__global const float* x, __global const float* dy,
                                             __global float* dweight, ulong n_arg,
                                             conv_geometry g) {
  const idx_t kh = (idx_t)g.kh, kw = (idx_t)g.kw, c = (idx_t)g.c, n = (idx_t)n_arg;
  for (idx_t e = get_global_id(0); e < c * kh * kw; e += get_global_size(0)) {
    const idx_t kx = e % kw, ky = (e / kw) % kh, ch = e / (kw * kh);
    dweight[e] = (float)depthwise_weight_sum(x, dy, g, ch, ky, kx, 0, n);
  }
}
