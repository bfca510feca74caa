// dtype tags and aethercl_convert (kernels/convert.cl: one kernel for every pair of types).
#include "ops/typed_memory.h"

#include "runtime/family_launch.h"

#include <aethercl/driver.h>

namespace aethercl::ops {
namespace {

struct DtypeEntry {
  const char* name;
  std::size_t size;
};

constexpr DtypeEntry kDtypes[] = {
    {"f32", 4}, {"f16", 2}, {"bf16", 2}, {"f64", 8}, {"i32", 4}, {"i64", 8}, {"i8", 1}, {"u8", 1},
};
static_assert(AETHERCL_F32 == 0 && AETHERCL_U8 == 7, "kDtypes is indexed by aethercl_dtype");

void require_dtype(int dtype, const char* argument) {
  if (dtype_name(dtype) == nullptr) {
    fail(Status::kInvalidArgument,
         "{} = {} is not a dtype code (AETHERCL_F32 0, F16 1, BF16 2, F64 3, I32 4, I64 5, I8 6, "
         "U8 7)",
         argument, dtype);
  }
}

}  // namespace

const char* dtype_name(int dtype) noexcept {
  return dtype >= 0 && dtype < static_cast<int>(std::size(kDtypes)) ? kDtypes[dtype].name : nullptr;
}

const char* dtype_constant_name(int dtype) noexcept {
  switch (dtype) {
    case AETHERCL_F32: return "AETHERCL_F32";
    case AETHERCL_F16: return "AETHERCL_F16";
    case AETHERCL_BF16: return "AETHERCL_BF16";
    case AETHERCL_F64: return "AETHERCL_F64";
    case AETHERCL_I32: return "AETHERCL_I32";
    case AETHERCL_I64: return "AETHERCL_I64";
    case AETHERCL_I8: return "AETHERCL_I8";
    case AETHERCL_U8: return "AETHERCL_U8";
  }
  return "an unknown dtype";
}

std::size_t dtype_size(int dtype) noexcept {
  return dtype_name(dtype) != nullptr ? kDtypes[dtype].size : 0;
}

void set_dtype(DeviceCall& call, void* buffer, int dtype) {
  call.buffer(buffer, "buffer", 0);
  require_dtype(dtype, "dtype");
  call.runtime().buffers().set_dtype(buffer, dtype);
}

void convert(DeviceCall& call, void* src, int src_dtype, void* dst, int dst_dtype,
             std::size_t count, void* stream) {
  require_dtype(src_dtype, "src_dtype");
  require_dtype(dst_dtype, "dst_dtype");
  Device& device = call.device();
  for (int dtype : {src_dtype, dst_dtype}) {
    if (dtype == AETHERCL_F64 && !device.info().fp64) {
      fail(Status::kNotImplemented, "f64 needs a device with double precision; {} has none",
           device.info().name);
    }
  }
  call.use_stream(stream, "stream");  // before the buffers, which note the stream they serve
  cl_mem from = call.buffer(src, "src", byte_count(count, dtype_size(src_dtype))).mem;
  cl_mem to = call.buffer(dst, "dst", byte_count(count, dtype_size(dst_dtype))).mem;
  if (src == dst) {
    fail(Status::kInvalidArgument,
         "src and dst are the same buffer: a conversion may not overlap its input");
  }
  if (count == 0) return;
  if ((src_dtype == AETHERCL_F32 && dst_dtype == AETHERCL_BF16) ||
      (src_dtype == AETHERCL_BF16 && dst_dtype == AETHERCL_F32)) {
    Kernel& pair = family_kernel(call, "convert", src_dtype == AETHERCL_F32
                                                      ? "convert_f32_to_bf16"
                                                      : "convert_bf16_to_f32");
    call.launch(pair, linear_geometry(device, pair, (count + 3) / 4), from, to,
                static_cast<cl_ulong>(count));
    return;
  }
  Kernel& kernel = family_kernel(call, "convert", "convert_elements");
  call.launch(kernel, linear_geometry(device, kernel, count), from, static_cast<cl_int>(src_dtype),
              to, static_cast<cl_int>(dst_dtype), static_cast<cl_ulong>(count));
}

}  // namespace aethercl::ops
