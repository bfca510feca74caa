// Philox4x32-10 random numbers (Salmon et al., SC11): raw words, uniform and normal fills, and
// dropout. Stream position e is lane e % 4 of the block with 64-bit counter e / 4 (counter words
// 0 and 1; words 2 and 3 zero) under the 64-bit key `seed`. One work-item computes one block and
// writes the elements of [first, first + count) that fall in it, so any offset works; with an
// offset that is a multiple of 4 the whole blocks land on 16-byte boundaries of the (whole)
// buffers and are written (and dropout's x read) as one vector each.
// Contraction is off: uniform values round exactly as the float expressions in the header.
#pragma OPENCL FP_CONTRACT OFF

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u
#define TWO_POW_MINUS_24 5.9604644775390625e-8f
#define TWO_PI 6.28318530717958647692f

uint4 philox4x32_10(uint4 counter, uint2 key) {
  // The 32 x 32 -> 64-bit products as one 64-bit multiply each (hi and lo halves of mulhilo):
  // CPU compilers vectorise this where mul_hi stays scalar.
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const ulong p0 = (ulong)PHILOX_M0 * counter.x;
    const ulong p1 = (ulong)PHILOX_M1 * counter.z;
    counter = (uint4)((uint)(p1 >> 32) ^ counter.y ^ key.x, (uint)p1,
                      (uint)(p0 >> 32) ^ counter.w ^ key.y, (uint)p0);
    key.x += PHILOX_W0;
    key.y += PHILOX_W1;
  }
  return counter;
}

// The four words of block `block`.
inline uint4 philox_block(ulong block, ulong seed) {
  const uint4 counter = (uint4)((uint)block, (uint)(block >> 32), 0u, 0u);
  const uint2 key = (uint2)((uint)seed, (uint)(seed >> 32));
  return philox4x32_10(counter, key);
}

inline float uniform_of(uint word) { return (float)(word >> 8) * TWO_POW_MINUS_24; }

// Blocks touched by positions [offset, offset + count): block index b = offset / 4 + item.
#define FOR_EACH_BLOCK(b, offset, count)                                                   \
  for (ulong b = (offset) / 4 + get_global_id(0); b <= ((offset) + (count) - 1) / 4;        \
       b += get_global_size(0))

inline bool inside(ulong position, ulong offset, ulong count) {
  return position >= offset && position - offset < count;
}

// Calls STORE(element index, lane value v0..v3) for the lanes of block b inside the call: all four
// at once for interior blocks (no per-lane test, no private array, which CPU compilers vectorise;
// VECTOR(i) instead when `whole`: offset % 4 == 0, so element i = 4b - offset is a multiple of
// 4), lane by lane for the first and last block.
#define STORE_LANES(b, offset, count, whole, v0, v1, v2, v3, STORE, VECTOR)                   \
  {                                                                                          \
    const ulong first = 4 * (b);                                                             \
    if (first >= (offset) && first - (offset) + 3 < (count)) {                              \
      const ulong i = first - (offset);                                                      \
      if (whole) {                                                                           \
        VECTOR(i);                                                                           \
      } else {                                                                               \
        STORE(i, v0); STORE(i + 1, v1); STORE(i + 2, v2); STORE(i + 3, v3);                  \
      }                                                                                      \
    } else {                                                                                 \
      if (inside(first, offset, count)) STORE(first - (offset), v0);                         \
      if (inside(first + 1, offset, count)) STORE(first + 1 - (offset), v1);                 \
      if (inside(first + 2, offset, count)) STORE(first + 2 - (offset), v2);                 \
      if (inside(first + 3, offset, count)) STORE(first + 3 - (offset), v3);                 \
    }                                                                                        \
  }

// The four uniforms of a block, each exactly uniform_of(word).
inline float4 uniform4_of(uint4 words) {
  return convert_float4(words >> 8) * TWO_POW_MINUS_24;
}

#define STORE_WORD(i, v) out[i] = (v)
#define STORE_WORDS(i) *(__global uint4*)(out + (i)) = r
__kernel void rng_bits(__global uint* out, ulong count, ulong seed, ulong offset) {
  const int whole = offset % 4 == 0;
  FOR_EACH_BLOCK(b, offset, count) {
    const uint4 r = philox_block(b, seed);
    STORE_LANES(b, offset, count, whole, r.x, r.y, r.z, r.w, STORE_WORD, STORE_WORDS)
  }
}

#define STORE_UNIFORM(i, v) out[i] = low + span * uniform_of(v)
#define STORE_UNIFORMS(i) *(__global float4*)(out + (i)) = low + span * uniform4_of(r)
__kernel void rng_uniform(__global float* out, ulong count, ulong seed, ulong offset, float low,
                          float high) {
  const float span = high - low;
  const int whole = offset % 4 == 0;
  FOR_EACH_BLOCK(b, offset, count) {
    const uint4 r = philox_block(b, seed);
    STORE_LANES(b, offset, count, whole, r.x, r.y, r.z, r.w, STORE_UNIFORM, STORE_UNIFORMS)
  }
}

// Box-Muller on (u1 from the first word, u2 from the second): z = r cos or r sin.
inline float2 box_muller(uint w1, uint w2) {
  const float u1 = (float)((w1 >> 8) + 1u) * TWO_POW_MINUS_24;
  const float u2 = uniform_of(w2);
  const float radius = sqrt(-2.0f * log(u1));
  float cosine;
  const float sine = sincos(TWO_PI * u2, &cosine);
  return (float2)(radius * cosine, radius * sine);
}

// Positions 4b .. 4b+3 form the Box-Muller pairs (4b, 4b+1) and (4b+2, 4b+3): lanes (0, 1) and
// (2, 3) of block b.
#define STORE_NORMAL(i, v) out[i] = mean + std * (v)
#define STORE_NORMALS(i) *(__global float4*)(out + (i)) = mean + std * (float4)(z01, z23)
__kernel void rng_normal(__global float* out, ulong count, ulong seed, ulong offset, float mean,
                         float std) {
  const int whole = offset % 4 == 0;
  FOR_EACH_BLOCK(b, offset, count) {
    const uint4 r = philox_block(b, seed);
    const float2 z01 = box_muller(r.x, r.y), z23 = box_muller(r.z, r.w);
    STORE_LANES(b, offset, count, whole, z01.x, z01.y, z23.x, z23.y, STORE_NORMAL,
                STORE_NORMALS)
  }
}

// y = keep ? x * scale : 0 with keep = uniform >= p; mask gets 1/0 when has_mask.
#define STORE_DROPOUT(i, v)                                                                   \
  {                                                                                          \
    const int keep = uniform_of(v) >= p;                                                     \
    y[i] = keep ? x[i] * scale : 0.0f;                                                       \
    if (has_mask) mask[i] = (uchar)keep;                                                     \
  }
#define STORE_DROPOUTS(i)                                                                     \
  {                                                                                          \
    const int4 keep = uniform4_of(r) >= p;                                                   \
    const float4 kept = *(__global const float4*)(x + (i)) * scale;                          \
    *(__global float4*)(y + (i)) = select((float4)(0.0f), kept, keep);                       \
    if (has_mask) *(__global uchar4*)(mask + (i)) = convert_uchar4(keep & 1);                \
  }
__kernel void rng_dropout(__global const float* x, __global float* y, __global uchar* mask,
                          int has_mask, ulong count, float p, float scale, ulong seed,
                          ulong offset) {
  const int whole = offset % 4 == 0;
  FOR_EACH_BLOCK(b, offset, count) {
    const uint4 r = philox_block(b, seed);
    STORE_LANES(b, offset, count, whole, r.x, r.y, r.z, r.w, STORE_DROPOUT, STORE_DROPOUTS)
  }
}

// Item j handles elements 4j .. 4j + 3 (whole buffers: 16-byte dy/dx and 4-byte mask vectors),
// element by element past the last whole group of four.
__kernel void rng_dropout_backward(__global const float* dy, __global const uchar* mask,
                                   __global float* dx, ulong count, float scale) {
  for (ulong j = get_global_id(0); 4 * j < count; j += get_global_size(0)) {
    const ulong i = 4 * j;
    if (i + 4 <= count) {
      const int4 keep = convert_int4(*(__global const uchar4*)(mask + i)) != 0;
      const float4 kept = *(__global const float4*)(dy + i) * scale;
      *(__global float4*)(dx + i) = select((float4)(0.0f), kept, keep);
    } else {
      for (ulong e = i; e < count; ++e) dx[e] = mask[e] ? dy[e] * scale : 0.0f;
    }
  }
}
