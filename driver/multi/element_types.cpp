// dtype/op validation for the collectives.
#include "multi/element_types.h"

#include "support/error.h"

namespace aethercl::multi {
namespace {

const char* const kDtypeNames[] = {"f32", "f16", "bf16", "f64", "i32", "i64", "i8", "u8"};

}  // namespace

std::uint64_t collective_element_size(int dtype) {
  switch (dtype) {
    case AETHERCL_F32: return 4;
    case AETHERCL_F16:
    case AETHERCL_BF16: return 2;
    default: break;
  }
  if (dtype >= 0 && dtype <= AETHERCL_U8) {
    fail(Status::kNotImplemented,
         "dtype {} ({}) is not supported by collectives (f32, f16 and bf16 are)", dtype,
         kDtypeNames[dtype]);
  }
  fail(Status::kInvalidArgument, "dtype {} is not a dtype code (AETHERCL_F32 = 0 ... AETHERCL_U8 = 7)",
       dtype);
}

const char* reduce_kernel_name(int dtype) {
  switch (dtype) {
    case AETHERCL_F16: return "collectives_reduce_f16";
    case AETHERCL_BF16: return "collectives_reduce_bf16";
    default: return "collectives_reduce_f32";
  }
}

void check_reduce_op(int op) {
  if (op < AETHERCL_SUM || op > AETHERCL_MIN) {
    fail(Status::kInvalidArgument,
         "op {} is not a reduction (AETHERCL_SUM = 0, MEAN = 1, MAX = 2, MIN = 3)", op);
  }
}

}  // namespace aethercl::multi
