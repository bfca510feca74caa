// Max and average 2-D pooling over (n, channels, h, w) planes, forward and backward. The backward
// gathers: each input element sums over the output windows that contain it, in ascending order
// (no atomics), so it is deterministic with overlapping windows too.

typedef struct {
  ulong h, w, kh, kw, sh, sw, ph, pw, oh, ow;
} pool_geometry;

// Window [start, start + k) in padded coordinates; input index = padded - pad.
__kernel void pool_max_forward(__global const float* x, __global float* y, __global int* indices,
                               int has_indices, ulong planes, pool_geometry g) {
  const ulong count = planes * g.oh * g.ow;
  for (ulong e = get_global_id(0); e < count; e += get_global_size(0)) {
    const ulong ox = e % g.ow, oy = (e / g.ow) % g.oh, plane = e / (g.ow * g.oh);
    __global const float* xp = x + plane * g.h * g.w;
    float best = -INFINITY;
    int best_index = -1;
    for (ulong ky = 0; ky < g.kh; ++ky) {
      const ulong py = oy * g.sh + ky;
      if (py < g.ph || py - g.ph >= g.h) continue;
      for (ulong kx = 0; kx < g.kw; ++kx) {
        const ulong px = ox * g.sw + kx;
        if (px < g.pw || px - g.pw >= g.w) continue;
        const int index = (int)((py - g.ph) * g.w + (px - g.pw));
        const float v = xp[index];
        // First maximum wins; a NaN wins over numbers and the first NaN is kept.
        if (best_index < 0 || (!isnan(best) && (isnan(v) || v > best))) {
          best = v;
          best_index = index;
        }
      }
    }
    y[e] = best;
    if (has_indices) indices[e] = best_index;
  }
}

__kernel void pool_avg_forward(__global const float* x, __global float* y, ulong planes,
                               pool_geometry g, int count_include_pad) {
  const ulong count = planes * g.oh * g.ow;
  for (ulong e = get_global_id(0); e < count; e += get_global_size(0)) {
    const ulong ox = e % g.ow, oy = (e / g.ow) % g.oh, plane = e / (g.ow * g.oh);
    __global const float* xp = x + plane * g.h * g.w;
    float sum = 0.0f;
    ulong inside = 0;
    for (ulong ky = 0; ky < g.kh; ++ky) {
      const ulong py = oy * g.sh + ky;
      if (py < g.ph || py - g.ph >= g.h) continue;
      for (ulong kx = 0; kx < g.kw; ++kx) {
        const ulong px = ox * g.sw + kx;
        if (px < g.pw || px - g.pw >= g.w) continue;
        sum += xp[(py - g.ph) * g.w + (px - g.pw)];
        ++inside;
      }
    }
    const ulong divisor = count_include_pad ? g.kh * g.kw : inside;
    y[e] = sum / (float)divisor;
  }
}

// Output windows (oy) that contain padded row py: oy * sh <= py < oy * sh + kh.
inline void window_range(ulong padded, ulong k, ulong s, ulong out, ulong* first, ulong* last) {
  *first = padded + 1 > k ? (padded + 1 - k + s - 1) / s : 0;
  *last = min(padded / s, out - 1);  // may be < first: no window
}

__kernel void pool_max_backward(__global const float* dy, __global const int* indices,
                                __global float* dx, ulong planes, pool_geometry g) {
  const ulong count = planes * g.h * g.w;
  for (ulong e = get_global_id(0); e < count; e += get_global_size(0)) {
    const ulong ix = e % g.w, iy = (e / g.w) % g.h, plane = e / (g.w * g.h);
    const int me = (int)(iy * g.w + ix);
    ulong y0, y1, x0, x1;
    window_range(iy + g.ph, g.kh, g.sh, g.oh, &y0, &y1);
    window_range(ix + g.pw, g.kw, g.sw, g.ow, &x0, &x1);
    float sum = 0.0f;
    for (ulong oy = y0; oy <= y1 && oy < g.oh; ++oy)
      for (ulong ox = x0; ox <= x1 && ox < g.ow; ++ox) {
        const ulong o = (plane * g.oh + oy) * g.ow + ox;
        if (indices[o] == me) sum += dy[o];
      }
    dx[e] = sum;
  }
}

__kernel void pool_avg_backward(__global const float* dy, __global float* dx, ulong planes,
                                pool_geometry g, int count_include_pad) {
  const ulong count = planes * g.h * g.w;
  for (ulong e = get_global_id(0); e < count; e += get_global_size(0)) {
    const ulong ix = e % g.w, iy = (e / g.w) % g.h, plane = e / (g.w * g.h);
    ulong y0, y1, x0, x1;
    window_range(iy + g.ph, g.kh, g.sh, g.oh, &y0, &y1);
    window_range(ix + g.pw, g.kw, g.sw, g.ow, &x0, &x1);
    float sum = 0.0f;
    for (ulong oy = y0; oy <= y1 && oy < g.oh; ++oy)
      for (ulong ox = x0; ox <= x1 && ox < g.ow; ++ox) {
        ulong divisor = g.kh * g.kw;
        if (!count_include_pad) {
          // Rows and columns of window (oy, ox) inside the input.
          const ulong ry0 = max(oy * g.sh, g.ph), ry1 = min(oy * g.sh + g.kh, g.ph + g.h);
          const ulong rx0 = max(ox * g.sw, g.pw), rx1 = min(ox * g.sw + g.kw, g.pw + g.w);
          divisor = (ry1 - ry0) * (rx1 - rx0);
        }
        sum += dy[(plane * g.oh + oy) * g.ow + ox] / (float)divisor;
      }
    dx[e] = sum;
  }
}
