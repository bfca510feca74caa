// Element-type conversion (aethercl_convert) among f32, f16, bf16, f64, i32, i64, i8 and u8.
// Every value is unpacked into sign, class and a 64-bit significand with its exponent, and packed
// into the target with integer arithmetic only: round to nearest even, overflow to +-inf, NaN kept
// (quiet, sign kept), float to integer truncated toward zero and saturated (NaN -> 0). Integer
// arithmetic makes the result exact on every device: no cl_khr_fp16, no fp64 unit, and no
// flush-to-zero of subnormals are involved. dtype codes are those of aethercl_dtype.

#define DT_F32 0
#define DT_F16 1
#define DT_BF16 2
#define DT_F64 3
#define DT_I32 4
#define DT_I64 5
#define DT_I8 6
#define DT_U8 7

#define CLS_ZERO 0
#define CLS_FINITE 1
#define CLS_INF 2
#define CLS_NAN 3

// value = (-1)^sign * mant * 2^(exp - 63) for CLS_FINITE, with bit 63 of mant set.
typedef struct {
  uint cls;
  uint sign;
  int exp;
  ulong mant;
} unpacked;

// A float of exp_bits exponent and man_bits mantissa bits (IEEE layout) in the low bits of bits.
unpacked unpack_float(ulong bits, int exp_bits, int man_bits) {
  unpacked u;
  int bias = (1 << (exp_bits - 1)) - 1;
  ulong man_mask = (1ul << man_bits) - 1;
  ulong exp_field = (bits >> man_bits) & ((1ul << exp_bits) - 1);
  ulong fraction = bits & man_mask;
  u.sign = (uint)((bits >> (exp_bits + man_bits)) & 1ul);
  u.exp = 0;
  u.mant = 0;
  if (exp_field == (1ul << exp_bits) - 1) {
    u.cls = fraction == 0 ? CLS_INF : CLS_NAN;
  } else if (exp_field == 0) {
    if (fraction == 0) {
      u.cls = CLS_ZERO;
    } else {  // subnormal: fraction * 2^(1 - bias - man_bits)
      int lz = (int)clz(fraction);
      u.cls = CLS_FINITE;
      u.mant = fraction << lz;
      u.exp = 1 - bias - man_bits + (63 - lz);
    }
  } else {
    u.cls = CLS_FINITE;
    u.mant = ((1ul << man_bits) | fraction) << (63 - man_bits);
    u.exp = (int)exp_field - bias;
  }
  return u;
}

unpacked unpack_int(long value) {
  unpacked u;
  u.sign = value < 0 ? 1u : 0u;
  // magnitude without overflow for the most negative value
  ulong magnitude = value < 0 ? (ulong)(-(value + 1)) + 1ul : (ulong)value;
  u.exp = 0;
  u.mant = 0;
  if (magnitude == 0) {
    u.cls = CLS_ZERO;
  } else {
    int lz = (int)clz(magnitude);
    u.cls = CLS_FINITE;
    u.mant = magnitude << lz;
    u.exp = 63 - lz;
  }
  return u;
}

// q = mant >> shift rounded to nearest even (shift 1..127; beyond 64 everything is below half).
ulong shift_round_even(ulong mant, int shift) {
  if (shift >= 65) return 0ul;
  if (shift == 64) return mant > (1ul << 63) ? 1ul : 0ul;  // half is 2^63; a tie rounds to 0
  ulong q = mant >> shift;
  ulong rem = mant & ((1ul << shift) - 1);
  ulong halfway = 1ul << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1ul))) q += 1ul;
  return q;
}

ulong pack_float(unpacked u, int exp_bits, int man_bits) {
  int bias = (1 << (exp_bits - 1)) - 1;
  ulong sign = (ulong)u.sign << (exp_bits + man_bits);
  ulong inf = ((1ul << exp_bits) - 1) << man_bits;
  if (u.cls == CLS_ZERO) return sign;
  if (u.cls == CLS_INF) return sign | inf;
  if (u.cls == CLS_NAN) return sign | inf | (1ul << (man_bits - 1));
  int biased = u.exp + bias;
  if (biased >= 1) {
    ulong q = shift_round_even(u.mant, 63 - man_bits);
    if (q == (1ul << (man_bits + 1))) {  // rounding carried into a new binade
      q >>= 1;
      biased += 1;
    }
    if (biased >= (1 << exp_bits) - 1) return sign | inf;
    return sign | ((ulong)biased << man_bits) | (q & ((1ul << man_bits) - 1));
  }
  // subnormal (or zero): units of 2^(1 - bias - man_bits); a carry to 1 << man_bits is the
  // smallest normal, whose encoding is the same bits
  return sign | shift_round_even(u.mant, 63 - man_bits + 1 - biased);
}

// Truncation toward zero, saturating to [lowest, highest]; NaN -> 0.
long pack_int(unpacked u, long lowest, long highest) {
  if (u.cls == CLS_ZERO || u.cls == CLS_NAN) return 0;
  if (u.cls == CLS_INF) return u.sign ? lowest : highest;
  if (u.exp < 0) return 0;
  if (u.exp >= 63) return u.sign ? lowest : highest;
  ulong magnitude = u.mant >> (63 - u.exp);
  if (u.sign) {
    ulong limit = (ulong)(-(lowest + 1)) + 1ul;  // |lowest|, 0 for unsigned targets
    return magnitude >= limit ? lowest : -(long)magnitude;
  }
  return magnitude >= (ulong)highest ? highest : (long)magnitude;
}

unpacked load(__global const uchar* src, int dtype, ulong i) {
  switch (dtype) {
    case DT_F32: return unpack_float(((__global const uint*)src)[i], 8, 23);
    case DT_F16: return unpack_float(((__global const ushort*)src)[i], 5, 10);
    case DT_BF16: return unpack_float(((__global const ushort*)src)[i], 8, 7);
    case DT_F64: return unpack_float(((__global const ulong*)src)[i], 11, 52);
    case DT_I32: return unpack_int(((__global const int*)src)[i]);
    case DT_I64: return unpack_int(((__global const long*)src)[i]);
    case DT_I8: return unpack_int(((__global const char*)src)[i]);
    default: return unpack_int(((__global const uchar*)src)[i]);
  }
}

void store(__global uchar* dst, int dtype, ulong i, unpacked u) {
  switch (dtype) {
    case DT_F32: ((__global uint*)dst)[i] = (uint)pack_float(u, 8, 23); break;
    case DT_F16: ((__global ushort*)dst)[i] = (ushort)pack_float(u, 5, 10); break;
    case DT_BF16: ((__global ushort*)dst)[i] = (ushort)pack_float(u, 8, 7); break;
    case DT_F64: ((__global ulong*)dst)[i] = pack_float(u, 11, 52); break;
    case DT_I32: ((__global int*)dst)[i] = (int)pack_int(u, INT_MIN, INT_MAX); break;
    case DT_I64: ((__global long*)dst)[i] = pack_int(u, LONG_MIN, LONG_MAX); break;
    case DT_I8: ((__global char*)dst)[i] = (char)pack_int(u, -128, 127); break;
    default: ((__global uchar*)dst)[i] = (uchar)pack_int(u, 0, 255); break;
  }
}

__kernel void convert_elements(__global const uchar* src, int src_dtype, __global uchar* dst,
                             int dst_dtype, ulong n) {
  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
    store(dst, dst_dtype, i, load(src, src_dtype, i));
  }
}

// float32 <-> bfloat16, the conversions mixed-precision training makes every step, four elements
// per work-item with bit operations: the same bits as convert_elements (round to nearest even,
// overflow to +-inf, NaN as the quiet NaN of its sign).
inline int4 is_nan_bits(uint4 u) { return (u & 0x7fffffffu) > 0x7f800000u; }

inline ushort4 bf16_from_f32_bits(uint4 u) {
  const uint4 rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return convert_ushort4(select(rounded, ((u >> 16) & 0x8000u) | 0x7fc0u, is_nan_bits(u)));
}

inline uint4 f32_bits_from_bf16(ushort4 bits) {
  const uint4 u = convert_uint4(bits) << 16;
  return select(u, (u & 0x80000000u) | 0x7fc00000u, is_nan_bits(u));
}

__kernel void convert_f32_to_bf16(__global const uint* src, __global ushort* dst, ulong n) {
  const ulong quads = n / 4;
  for (ulong q = get_global_id(0); q < quads; q += get_global_size(0)) {
    vstore4(bf16_from_f32_bits(vload4(q, src)), q, dst);
  }
  for (ulong i = quads * 4 + get_global_id(0); i < n; i += get_global_size(0)) {
    dst[i] = bf16_from_f32_bits((uint4)(src[i])).x;
  }
}

__kernel void convert_bf16_to_f32(__global const ushort* src, __global uint* dst, ulong n) {
  const ulong quads = n / 4;
  for (ulong q = get_global_id(0); q < quads; q += get_global_size(0)) {
    vstore4(f32_bits_from_bf16(vload4(q, src)), q, dst);
  }
  for (ulong i = quads * 4 + get_global_id(0); i < n; i += get_global_size(0)) {
    dst[i] = f32_bits_from_bf16((ushort4)(src[i])).x;
  }
}
