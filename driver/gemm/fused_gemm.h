// aethercl_gemm_fused: aethercl_gemm's validation plus that of its epilogue descriptor, then one
// engine product whose kernels apply the epilogue in their store (gemm/gemm.h GemmEpilogue).
#pragma once

#include "runtime/device_call.h"

#include <aethercl/driver.h>

namespace aethercl::gemm {

// Validates desc as aethercl_gemm does, then the epilogue (NULL: none, the plain product; the
// header's aethercl_gemm_fused rules, messages naming epilogue->field), and enqueues the product.
void fused_gemm(DeviceCall& call, const aethercl_gemm_desc* desc,
                const aethercl_gemm_epilogue* epilogue);

}  // namespace aethercl::gemm
