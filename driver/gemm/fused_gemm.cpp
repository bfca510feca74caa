// aethercl_gemm_fused: the epilogue descriptor checked (kind, bias and pre buffers sized, no
// overlap with what the product writes or reads), then the product with its epilogue.
#include "gemm/fused_gemm.h"

#include "gemm/gemm.h"
#include "gemm/general_gemm.h"
#include "support/checked.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <optional>

namespace aethercl::gemm {
namespace {

const char* kind_name(int kind) {
  switch (kind) {
    case AETHERCL_EPILOGUE_BIAS: return "BIAS";
    case AETHERCL_EPILOGUE_BIAS_RELU: return "BIAS_RELU";
    case AETHERCL_EPILOGUE_BIAS_GELU: return "BIAS_GELU";
    case AETHERCL_EPILOGUE_BIAS_GELU_TANH: return "BIAS_GELU_TANH";
    case AETHERCL_EPILOGUE_RELU: return "RELU";
    case AETHERCL_EPILOGUE_GELU: return "GELU";
    case AETHERCL_EPILOGUE_DGELU: return "DGELU";
    default: return "?";
  }
}

GemmStorage bias_storage(int dtype) {
  switch (dtype) {
    case AETHERCL_F32: return GemmStorage::kF32;
    case AETHERCL_F16: return GemmStorage::kF16;
    case AETHERCL_BF16: return GemmStorage::kBF16;
    default:
      fail(Status::kInvalidArgument, "epilogue->dtype_bias = {}: the bias is AETHERCL_F32, "
           "AETHERCL_F16 or AETHERCL_BF16", dtype);
  }
}

// Bytes [offset, offset + count) elements of `bytes` each, overflow-checked.
ByteSpan span_of(const char* name, const void* handle, std::uint64_t offset, std::uint64_t count,
                 std::uint64_t bytes) {
  auto end = checked_add(offset, count);
  auto end_bytes = end ? checked_mul(*end, bytes) : std::nullopt;
  if (!end_bytes) {
    fail(Status::kInvalidArgument, "epilogue->{}: offset {} + {} elements overflows 64 bits",
         name, offset, count);
  }
  return {handle, offset * bytes, *end_bytes};
}

void require_apart(const ByteSpan& written, const char* written_name, const ByteSpan& other,
                   const char* other_name) {
  if (written.handle != other.handle || !written.touched() || !other.touched()) return;
  if (written.first < other.end && other.first < written.end) {
    fail(Status::kInvalidArgument, "{} overlaps {} in the same buffer ({} bytes [{}, {}), {} "
         "bytes [{}, {})): the fused product cannot run in place", written_name, other_name,
         written_name, written.first, written.end, other_name, other.first, other.end);
  }
}

// The bytes of C's layout (ldc, stride_c over the batch, C's storage) from element `offset` of
// `handle`: what pre and the residual (epilogue->`name`) span; with no work, only the offset.
ByteSpan c_layout_span(const GemmProblem& p, bool work, const void* handle, std::uint64_t offset,
                       const char* name) {
  std::optional<std::uint64_t> end = offset;
  if (work) {
    const std::uint64_t ldc = leading_dimension(p.c, p.n);
    end = checked_mul(p.m - 1, ldc);
    auto strides = checked_mul(p.batch - 1, p.c.batch_stride);
    if (end && strides) end = checked_add(*end, *strides);
    if (end) end = checked_add(*end, p.n);
    if (end) end = checked_add(*end, offset);
    if (!end) {
      fail(Status::kInvalidArgument, "epilogue->{}: offset {} + C's extent overflows 64 bits",
           name, offset);
    }
  }
  const std::uint64_t c_bytes = storage_bytes(p.c.storage);
  auto end_bytes = checked_mul(*end, c_bytes);
  if (!end_bytes) {
    fail(Status::kInvalidArgument, "epilogue->{} spans more bytes than 64 bits hold", name);
  }
  return {handle, offset * c_bytes, *end_bytes};
}

}  // namespace

void fused_gemm(DeviceCall& call, const aethercl_gemm_desc* desc,
                const aethercl_gemm_epilogue* epilogue) {
  ValidatedGemm v = validate_gemm(call, desc);
  if (epilogue == nullptr) {
    if (v.work) enqueue_gemm(call, v.problem);
    return;
  }
  std::size_t struct_size = 0;
  std::memcpy(&struct_size, epilogue, sizeof(struct_size));
  // The first version-4 descriptor ended at offset_pre (no residual): still accepted.
  constexpr std::size_t kFirstSize = offsetof(aethercl_gemm_epilogue, residual);
  if (struct_size < kFirstSize) {
    fail(Status::kInvalidArgument, "epilogue->struct_size = {} is smaller than the version-4 "
         "descriptor ({} bytes): set it to sizeof(aethercl_gemm_epilogue)", struct_size,
         sizeof(aethercl_gemm_epilogue));
  }
  aethercl_gemm_epilogue e{};
  std::memcpy(&e, epilogue, std::min(struct_size, sizeof e));
  if (e.kind < AETHERCL_EPILOGUE_BIAS || e.kind > AETHERCL_EPILOGUE_DGELU) {
    fail(Status::kInvalidArgument, "epilogue->kind = {} is not an epilogue (1 BIAS, 2 BIAS_RELU, "
         "3 BIAS_GELU, 4 BIAS_GELU_TANH, 5 RELU, 6 GELU, 7 DGELU)", e.kind);
  }
  if (e.kind == AETHERCL_EPILOGUE_DGELU && e.pre == nullptr) {
    fail(Status::kInvalidArgument, "epilogue->pre is NULL: kind 7 (DGELU) reads the forward's "
         "pre-activation there");
  }
  GemmProblem& p = v.problem;
  const bool has_bias = e.kind <= AETHERCL_EPILOGUE_BIAS_GELU_TANH;
  GemmEpilogue fused;
  fused.kind = e.kind;
  ByteSpan bias_span;
  if (has_bias) {
    if (e.bias == nullptr) {
      fail(Status::kInvalidArgument, "epilogue->bias is NULL: kind {} ({}) adds a bias of n "
           "elements", e.kind, kind_name(e.kind));
    }
    fused.bias_storage = bias_storage(e.dtype_bias);
    // The bias is read only where there is an output (zero work reads nothing but the offset).
    bias_span = span_of("bias", e.bias, e.offset_bias, v.work ? p.n : 0,
                        storage_bytes(fused.bias_storage));
    fused.bias = call.buffer(e.bias, "epilogue->bias", bias_span.end);
    fused.bias_offset = e.offset_bias;
  } else if (e.bias != nullptr) {
    fail(Status::kInvalidArgument, "epilogue->bias is set but kind {} ({}) adds no bias: pass "
         "NULL, or a BIAS kind", e.kind, kind_name(e.kind));
  }
  ByteSpan pre_span;
  if (e.pre != nullptr) {
    pre_span = c_layout_span(p, v.work, e.pre, e.offset_pre, "pre");
    fused.pre = call.buffer(e.pre, "epilogue->pre", pre_span.end);
    fused.pre_offset = e.offset_pre;
    require_apart(pre_span, "epilogue->pre", v.a, "desc->a");
    require_apart(pre_span, "epilogue->pre", v.b, "desc->b");
    require_apart(pre_span, "epilogue->pre", v.c, "desc->c");
    require_apart(pre_span, "epilogue->pre", bias_span, "epilogue->bias");
  }
  require_apart(v.c, "desc->c", bias_span, "epilogue->bias");
  if (e.residual != nullptr) {
    const ByteSpan residual_span = c_layout_span(p, v.work, e.residual, e.offset_residual,
                                                 "residual");
    fused.residual = call.buffer(e.residual, "epilogue->residual", residual_span.end);
    fused.residual_offset = e.offset_residual;
    require_apart(residual_span, "epilogue->residual", v.c, "desc->c");
    require_apart(residual_span, "epilogue->residual", pre_span, "epilogue->pre");
  }
  if (!v.work) return;
  p.epilogue = fused;
  enqueue_gemm(call, p);
}

}  // namespace aethercl::gemm
