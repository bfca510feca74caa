// Storage formats of float operands (included with #include "operand_storage.cl"): a kernel names
// each operand's format with a build option (0 float32, 1 IEEE half, 2 bfloat16; the host passes
// none for float32, so a float32 build is the plain float code), reads values into float with
// OS_LOAD and writes a float result with OS_STORE, rounded once to nearest even (half overflow
// gives +-inf; NaN stays NaN; numeric_formats.cl's rules). 16-bit values are held as ushort
// patterns, so no cl_khr_fp16 is needed.
#ifndef AETHERCL_OPERAND_STORAGE
#define AETHERCL_OPERAND_STORAGE

#include "numeric_formats.cl"

#define OS_CAT_(a, b) a##b
#define OS_CAT(a, b) OS_CAT_(a, b)

// The element type of an operand stored in format S (a macro that expands to 0, 1 or 2).
#define OS_TYPE(S) OS_CAT(os_type_, S)
typedef float os_type_0;
typedef ushort os_type_1;
typedef ushort os_type_2;

// Element i of p (format S) as float; OS_STORE writes value to element i.
#define OS_LOAD(S, p, i) OS_CAT(os_load_, S)((p), (i))
#define OS_STORE(S, p, i, value) OS_CAT(os_store_, S)((p), (i), (value))

inline float os_load_0(__global const float* p, ulong i) { return p[i]; }
inline float os_load_1(__global const ushort* p, ulong i) {
  return vload_half(i, (__global const half*)p);
}
inline float os_load_2(__global const ushort* p, ulong i) { return nf_from_bf16(p[i]); }

inline void os_store_0(__global float* p, ulong i, float value) { p[i] = value; }
inline void os_store_1(__global ushort* p, ulong i, float value) {
  vstore_half_rte(value, i, (__global half*)p);
}
inline void os_store_2(__global ushort* p, ulong i, float value) { p[i] = nf_to_bf16(value); }

// Elements 4q .. 4q + 3 of p (format S) as a float4; OS_STORE4 writes value there. Elementwise
// kernels move four elements per work-item with these (16-bit operands read 8 bytes at once).
#define OS_LOAD4(S, p, q) OS_CAT(os_load4_, S)((p), (q))
#define OS_STORE4(S, p, q, value) OS_CAT(os_store4_, S)((p), (q), (value))

inline float4 os_load4_0(__global const float* p, ulong q) { return vload4(q, p); }
inline float4 os_load4_1(__global const ushort* p, ulong q) {
  return vload_half4(q, (__global const half*)p);
}
inline float4 os_load4_2(__global const ushort* p, ulong q) { return nf_from_bf164(vload4(q, p)); }

inline void os_store4_0(__global float* p, ulong q, float4 value) { vstore4(value, q, p); }
inline void os_store4_1(__global ushort* p, ulong q, float4 value) {
  vstore_half4_rte(value, q, (__global half*)p);
}
inline void os_store4_2(__global ushort* p, ulong q, float4 value) {
  vstore4(nf_to_bf164(value), q, p);
}

#endif  // AETHERCL_OPERAND_STORAGE
