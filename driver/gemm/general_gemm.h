// aethercl_gemm: validation of a client's aethercl_gemm_desc and its mapping onto the engine.
#pragma once

#include "runtime/device_call.h"

#include <aethercl/driver.h>

namespace aethercl::gemm {

// Validates every field of desc (the header's aethercl_gemm rules; messages name the field as
// desc->field) and enqueues the product. Zero work returns after validation.
void general_gemm(DeviceCall& call, const aethercl_gemm_desc* desc);

}  // namespace aethercl::gemm
