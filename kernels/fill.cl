// Zero fills for gradients that are sums over nothing (an empty batch, an empty broadcast).
__kernel void fill_zero(__global float* out, ulong n) {
  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) out[i] = 0.0f;
}
