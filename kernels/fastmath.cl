// Branch-free float32 exp, tanh and erf (acl_exp, acl_tanh, acl_erf, and the float4 and float16
// forms acl_exp4, acl_exp16, ...) for SIMD on CPUs; the runtime prepends this file to every other
// family's source.
// With AETHERCL_FAST_MATH=1 (set per device class by the program cache) ACL_EXP/ACL_TANH/ACL_ERF
// (and ACL_EXPV/ACL_ERFV) name these; otherwise they name the built-ins. Max error over all finite
// float inputs (measured exhaustively by tools/bench/fastmath_ulp, strided by the unit test): see
// docs/PERFORMANCE.md. Both sides of each range split are computed and one is picked with
// select(): no branches.
//
// PoCL does not vectorise a grid-stride loop across work-items, so the CPU kernel forms work on
// ACL_LANES floats at a time in their own vector code (acl_floatv, ACL_VLOAD/ACL_VSTORE): float16
// is one AVX-512 register or two AVX ones, and measured faster than float8 (docs/PERFORMANCE.md).
#ifndef AETHERCL_FASTMATH_CL
#define AETHERCL_FASTMATH_CL

// The functions are written once as a macro over the float type: F is float or floatN, I the int
// type of the same width, AS_F/CVT_I its bit cast and conversion, SUF the name suffix ("" or N).
#define ACL_DEFINE_MATH(F, I, AS_F, CVT_I, SUF)                                                 \
  /* 2^k as a float for k in [-126, 127], built from the exponent bits. */                      \
  F acl_pow2i##SUF(I k) { return AS_F((k + 127) << 23); }                                 \
                                                                                                  \
  /* exp(x): x = n ln2 + r, |r| <= ln2/2 (two-part ln2), exp(r) = 1 + r + r^2 s(r) with s a     \
     degree-5 minimax fit, scaled by 2^n in two steps so subnormal results round once. */       \
  F acl_exp##SUF(F x) {                                                                   \
    F xc = fmin(fmax(x, (F)(-104.0f)), (F)(89.0f));                                              \
    F n = rint(xc * 1.44269504088896341f);                                                       \
    F r = fma(n, (F)(-0.693145751953125f), xc);                                                  \
    r = fma(n, (F)(-1.42860682030941723212e-6f), r);                                             \
    F s = (F)(1.979035758611779e-4f);                                                            \
    s = fma(s, r, (F)(1.3944649563300366e-3f));                                                  \
    s = fma(s, r, (F)(8.333497003664014e-3f));                                                   \
    s = fma(s, r, (F)(4.166629507860299e-2f));                                                   \
    s = fma(s, r, (F)(1.666666586940819e-1f));                                                   \
    s = fma(s, r, (F)(5.000000067647529e-1f));                                                   \
    F p = fma(r * r, s, r) + 1.0f;                                                               \
    I k = CVT_I(n);                                                                              \
    I k1 = k >> 1;                                                                               \
    F y = p * acl_pow2i##SUF(k1) * acl_pow2i##SUF(k - k1);                                       \
    return isnan(x) ? x : y;                                                                     \
  }                                                                                              \
                                                                                                  \
  /* tanh(x): |x| < 0.625 uses x + x^3 q(x^2) (degree-5 minimax q); above, 1 - 2/(exp(2|x|)+1), \
     whose cancellation is harmless there (tanh >= 0.55); exp overflowing gives exactly 1. */  \
  F acl_tanh##SUF(F x) {                                                                  \
    F a = fabs(x);                                                                               \
    F t = x * x;                                                                                 \
    F q = (F)(2.1429614616105632e-3f);                                                           \
    q = fma(q, t, (F)(-8.177398115572242e-3f));                                                  \
    q = fma(q, t, (F)(2.1700703322120853e-2f));                                                  \
    q = fma(q, t, (F)(-5.394676311629393e-2f));                                                  \
    q = fma(q, t, (F)(1.3333206009217868e-1f));                                                  \
    q = fma(q, t, (F)(-3.333333080277002e-1f));                                                  \
    F small = fma(a * t, q, a);                                                                  \
    F large = 1.0f - 2.0f / (acl_exp##SUF(2.0f * a) + 1.0f);                                     \
    F y = a < 0.625f ? small : large;                                                            \
    return isnan(x) ? x : copysign(y, x);                                                        \
  }                                                                                              \
                                                                                                  \
  /* erf(x): |x| < 0.875 uses x p(x^2) (degree-6 minimax p); above, 1 - exp(q(|x| - 2.3975))    \
     with q a degree-10 fit of log(erfc) on [0.875, 3.92]; |x| is clamped at 3.92, where erf     \
     rounds to 1. */                                                                             \
  F acl_erf##SUF(F x) {                                                                   \
    F a = fabs(x);                                                                               \
    F t = x * x;                                                                                 \
    F p = (F)(8.67551153262841e-5f);                                                             \
    p = fma(p, t, (F)(-8.211134114178217e-4f));                                                  \
    p = fma(p, t, (F)(5.206750355408865e-3f));                                                   \
    p = fma(p, t, (F)(-2.6861586066762644e-2f));                                                 \
    p = fma(p, t, (F)(1.1283733033548363e-1f));                                                  \
    p = fma(p, t, (F)(-3.761263606874915e-1f));                                                  \
    p = fma(p, t, (F)(1.1283791668702046f));                                                     \
    F small = a * p;                                                                             \
    F u = fmin(a, (F)(3.92f)) - 2.3975f;                                                         \
    F q = (F)(-7.073335606122555e-8f);                                                           \
    q = fma(q, u, (F)(-3.24169446841438e-9f));                                                   \
    q = fma(q, u, (F)(2.034130069272777e-6f));                                                   \
    q = fma(q, u, (F)(-1.4594585209137811e-5f));                                                 \
    q = fma(q, u, (F)(8.654079003944659e-5f));                                                   \
    q = fma(q, u, (F)(-4.7088172747200563e-4f));                                                 \
    q = fma(q, u, (F)(2.3939485005446404e-3f));                                                  \
    q = fma(q, u, (F)(-1.1791998857634642e-2f));                                                 \
    q = fma(q, u, (F)(-9.404137315001921e-1f));                                                  \
    q = fma(q, u, (F)(-5.159534316848852f));                                                     \
    q = fma(q, u, (F)(-7.268070341485427f));                                                     \
    F large = 1.0f - acl_exp##SUF(q);                                                            \
    F y = a < 0.875f ? small : large;                                                            \
    return isnan(x) ? x : copysign(y, x);                                                        \
  }

ACL_DEFINE_MATH(float, int, as_float, convert_int, )
ACL_DEFINE_MATH(float4, int4, as_float4, convert_int4, 4)
ACL_DEFINE_MATH(float16, int16, as_float16, convert_int16, 16)

#define ACL_LANES 16
typedef float16 acl_floatv;
#define ACL_VLOAD vload16
#define ACL_VSTORE vstore16

// Horizontal sum and max of a lane vector, halving in a fixed order (results do not depend on
// the compiler's reassociation).
float acl_lanes_sum(acl_floatv v) {
  float8 h8 = v.lo + v.hi;
  float4 h4 = h8.lo + h8.hi;
  return (h4.x + h4.y) + (h4.z + h4.w);
}

float acl_lanes_max(acl_floatv v) {
  float8 h8 = fmax(v.lo, v.hi);
  float4 h4 = fmax(h8.lo, h8.hi);
  return fmax(fmax(h4.x, h4.y), fmax(h4.z, h4.w));
}

#if AETHERCL_FAST_MATH
#define ACL_EXP acl_exp
#define ACL_TANH acl_tanh
#define ACL_ERF acl_erf
#define ACL_EXPV acl_exp16
#define ACL_ERFV acl_erf16
#define ACL_EXP4 acl_exp4
#define ACL_ERF4 acl_erf4
#else
#define ACL_EXP exp
#define ACL_TANH tanh
#define ACL_ERF erf
#define ACL_EXPV exp
#define ACL_ERFV erf
#define ACL_EXP4 exp
#define ACL_ERF4 erf
#endif

#ifdef AETHERCL_FASTMATH_PROBES
// Test probes: out[i] = f(as_float(first + i * stride)) for i < n (n a multiple of 16), through the
// float16 lane forms the kernels use (bit patterns wrap around modulo 2^32).
#define ACL_PROBE(name, fn)                                                                    \
  __kernel void name(uint first, uint stride, __global float* out, uint n) {                   \
    for (uint j = get_global_id(0); j < n / 16; j += get_global_size(0)) {                     \
      uint16 lane = (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15) + j * 16;   \
      vstore16(fn(as_float16(first + lane * stride)), j, out);                                 \
    }                                                                                          \
  }
ACL_PROBE(fastmath_exp_probe, acl_exp16)
ACL_PROBE(fastmath_tanh_probe, acl_tanh16)
ACL_PROBE(fastmath_erf_probe, acl_erf16)
#endif

#endif  // AETHERCL_FASTMATH_CL
