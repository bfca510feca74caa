// Branch-free float32 exp, tanh and erf (acl_exp, acl_tanh, acl_erf) that a CPU vectoriser turns
// into SIMD; the runtime prepends this file to every other family's source. With
// AETHERCL_FAST_MATH=1 (set per device class by the program cache) ACL_EXP/ACL_TANH/ACL_ERF name
// these; otherwise they name the built-ins. Max error over all finite float inputs (measured
// exhaustively by tools/bench/fastmath_ulp, strided by the unit test): see docs/PERFORMANCE.md.
// Both sides of each range split are computed and one is picked with select(): no branches.
#ifndef AETHERCL_FASTMATH_CL
#define AETHERCL_FASTMATH_CL

// 2^k as a float for k in [-126, 127], built from the exponent bits.
inline float acl_pow2i(int k) { return as_float((k + 127) << 23); }

// exp(x): x = n ln2 + r, |r| <= ln2/2 (two-part ln2), exp(r) = 1 + r + r^2 s(r) with s a degree-5
// minimax fit, then scaled by 2^n in two steps so results down to the subnormals round once.
inline float acl_exp(float x) {
  float xc = fmin(fmax(x, -104.0f), 89.0f);
  float n = rint(xc * 1.44269504088896341f);
  float r = fma(n, -0.693145751953125f, xc);
  r = fma(n, -1.42860682030941723212e-6f, r);
  float s = 1.979035758611779e-4f;
  s = fma(s, r, 1.3944649563300366e-3f);
  s = fma(s, r, 8.333497003664014e-3f);
  s = fma(s, r, 4.166629507860299e-2f);
  s = fma(s, r, 1.666666586940819e-1f);
  s = fma(s, r, 5.000000067647529e-1f);
  float p = fma(r * r, s, r) + 1.0f;
  int k = convert_int(n);
  int k1 = k >> 1;
  float y = p * acl_pow2i(k1) * acl_pow2i(k - k1);
  return isnan(x) ? x : y;
}

// tanh(x): |x| < 0.625 uses x + x^3 q(x^2) (degree-5 minimax q); above, 1 - 2 / (exp(2|x|) + 1),
// whose cancellation is harmless there (tanh >= 0.55); exp overflowing to inf gives exactly 1.
inline float acl_tanh(float x) {
  float a = fabs(x);
  float t = x * x;
  float q = 2.1429614616105632e-3f;
  q = fma(q, t, -8.177398115572242e-3f);
  q = fma(q, t, 2.1700703322120853e-2f);
  q = fma(q, t, -5.394676311629393e-2f);
  q = fma(q, t, 1.3333206009217868e-1f);
  q = fma(q, t, -3.333333080277002e-1f);
  float small = fma(a * t, q, a);
  float large = 1.0f - 2.0f / (acl_exp(2.0f * a) + 1.0f);
  float y = a < 0.625f ? small : large;
  return isnan(x) ? x : copysign(y, x);
}

// erf(x): |x| < 0.875 uses x p(x^2) (degree-6 minimax p); above, 1 - exp(q(|x| - 2.3975)) with q
// a degree-10 fit of log(erfc) on [0.875, 3.92]; |x| is clamped at 3.92, where erf rounds to 1.
inline float acl_erf(float x) {
  float a = fabs(x);
  float t = x * x;
  float p = 8.67551153262841e-5f;
  p = fma(p, t, -8.211134114178217e-4f);
  p = fma(p, t, 5.206750355408865e-3f);
  p = fma(p, t, -2.6861586066762644e-2f);
  p = fma(p, t, 1.1283733033548363e-1f);
  p = fma(p, t, -3.761263606874915e-1f);
  p = fma(p, t, 1.1283791668702046f);
  float small = a * p;
  float u = fmin(a, 3.92f) - 2.3975f;
  float q = -7.073335606122555e-8f;
  q = fma(q, u, -3.24169446841438e-9f);
  q = fma(q, u, 2.034130069272777e-6f);
  q = fma(q, u, -1.4594585209137811e-5f);
  q = fma(q, u, 8.654079003944659e-5f);
  q = fma(q, u, -4.7088172747200563e-4f);
  q = fma(q, u, 2.3939485005446404e-3f);
  q = fma(q, u, -1.1791998857634642e-2f);
  q = fma(q, u, -9.404137315001921e-1f);
  q = fma(q, u, -5.159534316848852f);
  q = fma(q, u, -7.268070341485427f);
  float large = 1.0f - acl_exp(q);
  float y = a < 0.875f ? small : large;
  return isnan(x) ? x : copysign(y, x);
}

#if AETHERCL_FAST_MATH
#define ACL_EXP acl_exp
#define ACL_TANH acl_tanh
#define ACL_ERF acl_erf
#else
#define ACL_EXP exp
#define ACL_TANH tanh
#define ACL_ERF erf
#endif

#ifdef AETHERCL_FASTMATH_PROBES
// Test probes: out[i] = f(as_float(first + i)) over a range of bit patterns, for the ulp sweep.
#define ACL_PROBE(name, fn)                                                              \
  __kernel void name(uint first, uint stride, __global float* out, uint n) {             \
    for (uint i = get_global_id(0); i < n; i += get_global_size(0))                      \
      out[i] = fn(as_float(first + i * stride));                                         \
  }
ACL_PROBE(fastmath_exp_probe, acl_exp)
ACL_PROBE(fastmath_tanh_probe, acl_tanh)
ACL_PROBE(fastmath_erf_probe, acl_erf)
ACL_PROBE(builtin_exp_probe, exp)
ACL_PROBE(builtin_tanh_probe, tanh)
ACL_PROBE(builtin_erf_probe, erf)
#endif

#endif  // AETHERCL_FASTMATH_CL
