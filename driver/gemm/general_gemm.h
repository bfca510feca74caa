// aethercl_gemm: validation of a client's aethercl_gemm_desc and its mapping onto the engine.
#pragma once

#include "gemm/gemm.h"
#include "runtime/device_call.h"

#include <aethercl/driver.h>

namespace aethercl::gemm {

// The bytes [first, end) of a buffer an operand touches (first == end: none).
struct ByteSpan {
  const void* handle = nullptr;
  std::uint64_t first = 0;
  std::uint64_t end = 0;
  bool touched() const { return end > first; }
};

// A descriptor that passed validation: the engine's problem (compute mode resolved), whether
// there is any work (m, n and batch > 0), and the bytes each operand spans.
struct ValidatedGemm {
  GemmProblem problem;
  bool work = false;
  ByteSpan a, b, c;
};

// Validates every field of desc (the header's aethercl_gemm rules; messages name the field as
// desc->field) and resolves the buffers, enqueuing nothing.
ValidatedGemm validate_gemm(DeviceCall& call, const aethercl_gemm_desc* desc);

// Validates every field of desc (the header's aethercl_gemm rules; messages name the field as
// desc->field) and enqueues the product. Zero work returns after validation.
void general_gemm(DeviceCall& call, const aethercl_gemm_desc* desc);

}  // namespace aethercl::gemm
