// dtype and reduction-op codes of the collectives: validation, sizes and kernel names.
#pragma once

#include <cstdint>

namespace aethercl::multi {

// Bytes per element of a dtype collectives support (f32, f16, bf16). Throws kNotImplemented for
// the other dtype codes and kInvalidArgument for a value that is no dtype code.
std::uint64_t collective_element_size(int dtype);
// "collectives_reduce_f32" ...; dtype already validated.
const char* reduce_kernel_name(int dtype);
// Throws kInvalidArgument for anything but SUM, MEAN, MAX, MIN.
void check_reduce_op(int op);

}  // namespace aethercl::multi
