// Philox4x32-10 random numbers (Salmon et al., SC11): raw words, uniform and normal fills, and
// dropout. Stream position e is lane e % 4 of the block with 64-bit counter e / 4 (counter words
// 0 and 1; words 2 and 3 zero) under the 64-bit key `seed`. One work-item computes one block and
// writes the elements of [first, first + count) that fall in it, so any offset works.
// Contraction is off: uniform values round exactly as the float expressions in the header.
#pragma OPENCL FP_CONTRACT OFF

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u
#define TWO_POW_MINUS_24 5.9604644775390625e-8f
#define TWO_PI 6.28318530717958647692f

uint4 philox4x32_10(uint4 counter, uint2 key) {
  for (int round = 0; round < 10; ++round) {
    const uint hi0 = mul_hi(PHILOX_M0, counter.x);
    const uint lo0 = PHILOX_M0 * counter.x;
    const uint hi1 = mul_hi(PHILOX_M1, counter.z);
    const uint lo1 = PHILOX_M1 * counter.z;
    counter = (uint4)(hi1 ^ counter.y ^ key.x, lo1, hi0 ^ counter.w ^ key.y, lo0);
    key.x += PHILOX_W0;
    key.y += PHILOX_W1;
  }
  return counter;
}

// The four words of block `block` as an array.
void philox_block(ulong block, ulong seed, uint words[4]) {
  const uint4 counter = (uint4)((uint)block, (uint)(block >> 32), 0u, 0u);
  const uint2 key = (uint2)((uint)seed, (uint)(seed >> 32));
  const uint4 r = philox4x32_10(counter, key);
  words[0] = r.x;
  words[1] = r.y;
  words[2] = r.z;
  words[3] = r.w;
}

inline float uniform_of(uint word) { return (float)(word >> 8) * TWO_POW_MINUS_24; }

// Blocks touched by positions [offset, offset + count): block index b = offset / 4 + item.
#define FOR_EACH_BLOCK(b, offset, count)                                                   \
  for (ulong b = (offset) / 4 + get_global_id(0); b <= ((offset) + (count) - 1) / 4;        \
       b += get_global_size(0))

// The element index of lane `lane` of block b, or false when that position is outside the call.
inline bool element_of(ulong b, uint lane, ulong offset, ulong count, ulong* index) {
  const ulong position = 4 * b + lane;
  if (position < offset || position - offset >= count) return false;
  *index = position - offset;
  return true;
}

__kernel void rng_bits(__global uint* out, ulong count, ulong seed, ulong offset) {
  FOR_EACH_BLOCK(b, offset, count) {
    uint words[4];
    philox_block(b, seed, words);
    for (uint lane = 0; lane < 4; ++lane) {
      ulong i;
      if (element_of(b, lane, offset, count, &i)) out[i] = words[lane];
    }
  }
}

__kernel void rng_uniform(__global float* out, ulong count, ulong seed, ulong offset, float low,
                          float high) {
  const float span = high - low;
  FOR_EACH_BLOCK(b, offset, count) {
    uint words[4];
    philox_block(b, seed, words);
    for (uint lane = 0; lane < 4; ++lane) {
      ulong i;
      if (element_of(b, lane, offset, count, &i)) out[i] = low + span * uniform_of(words[lane]);
    }
  }
}

// Positions 4b .. 4b+3 form the Box-Muller pairs (4b, 4b+1) and (4b+2, 4b+3): lanes (0, 1) and
// (2, 3) of block b.
__kernel void rng_normal(__global float* out, ulong count, ulong seed, ulong offset, float mean,
                         float std) {
  FOR_EACH_BLOCK(b, offset, count) {
    uint words[4];
    philox_block(b, seed, words);
    float z[4];
    for (int pair = 0; pair < 2; ++pair) {
      const float u1 = (float)((words[2 * pair] >> 8) + 1u) * TWO_POW_MINUS_24;
      const float u2 = uniform_of(words[2 * pair + 1]);
      const float radius = sqrt(-2.0f * log(u1));
      const float angle = TWO_PI * u2;
      z[2 * pair] = radius * cos(angle);
      z[2 * pair + 1] = radius * sin(angle);
    }
    for (uint lane = 0; lane < 4; ++lane) {
      ulong i;
      if (element_of(b, lane, offset, count, &i)) out[i] = mean + std * z[lane];
    }
  }
}

// y = keep ? x * scale : 0 with keep = uniform >= p; mask gets 1/0 when has_mask.
__kernel void rng_dropout(__global const float* x, __global float* y, __global uchar* mask,
                              int has_mask, ulong count, float p, float scale, ulong seed,
                              ulong offset) {
  FOR_EACH_BLOCK(b, offset, count) {
    uint words[4];
    philox_block(b, seed, words);
    for (uint lane = 0; lane < 4; ++lane) {
      ulong i;
      if (!element_of(b, lane, offset, count, &i)) continue;
      const int keep = uniform_of(words[lane]) >= p;
      const float value = x[i];
      y[i] = keep ? value * scale : 0.0f;
      if (has_mask) mask[i] = (uchar)keep;
    }
  }
}

__kernel void rng_dropout_backward(__global const float* dy, __global const uchar* mask,
                               __global float* dx, ulong count, float scale) {
  for (ulong i = get_global_id(0); i < count; i += get_global_size(0)) {
    dx[i] = mask[i] ? dy[i] * scale : 0.0f;
  }
}
