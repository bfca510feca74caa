// Fused attention: descriptor checks (scalars, sizes, dtype tags of the buffers).
#include "ops/attention_shape.h"

#include "gemm/compute_mode.h"
#include "ops/train/common.h"
#include "ops/typed_memory.h"

#include <cmath>

namespace aethercl::ops {
namespace {

std::uint64_t element_bytes_of(int dtype) {
  switch (dtype) {
    case AETHERCL_F32: return 4;
    case AETHERCL_F16: return 2;
    case AETHERCL_BF16: return 2;
  }
  fail(Status::kInvalidArgument, "desc.dtype = {} is not AETHERCL_F32 (0), AETHERCL_F16 (1) or "
       "AETHERCL_BF16 (2)", dtype);
}

void require_flag(const char* name, int value) {
  if (value != 0 && value != 1) {
    fail(Status::kInvalidArgument, "{} = {} must be 0 or 1", name, value);
  }
}

}  // namespace

AttentionShape attention_shape(const aethercl_attention_desc* desc,
                               aethercl_attention_desc& copy) {
  copy = train::read_desc(desc);
  const aethercl_attention_desc& d = copy;
  AttentionShape s{};
  s.batch = train::dim("desc.batch", d.batch);
  s.heads = train::dim("desc.heads", d.heads);
  s.seq_q = train::dim("desc.seq_q", d.seq_q);
  s.seq_k = train::dim("desc.seq_k", d.seq_k);
  s.head_dim = train::dim("desc.head_dim", d.head_dim);
  if (d.head_dim > kAttentionMaxHeadDim) {
    fail(Status::kInvalidArgument, "desc.head_dim = {} exceeds the supported maximum {}",
         d.head_dim, kAttentionMaxHeadDim);
  }
  if (d.layout < 0 || d.layout > 2) {
    fail(Status::kInvalidArgument, "desc.layout = {} must be 0, 1 or 2", d.layout);
  }
  if (d.layout == 2 && d.seq_q != d.seq_k) {
    fail(Status::kInvalidArgument, "desc.layout = 2 (q, k, v packed) needs desc.seq_q = desc.seq_k "
         "(got {} and {})", d.seq_q, d.seq_k);
  }
  require_flag("desc.causal", d.causal);
  s.layout = d.layout;
  s.causal = d.causal;
  s.element_bytes = element_bytes_of(d.dtype);
  s.dtype = d.dtype;
  gemm::compute_mode_from_code(d.compute, "desc.compute");
  s.compute = d.compute;
  if (!std::isfinite(d.scale)) {
    fail(Status::kInvalidArgument, "desc.scale = {} must be finite (0 selects 1/sqrt(head_dim))",
         d.scale);
  }
  s.scale = d.scale != 0.0f ? d.scale
            : d.head_dim > 0 ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.head_dim)))
                             : 1.0f;
  s.q_count = train::product("desc.q", {s.batch, s.heads, s.seq_q, s.head_dim});
  s.k_count = train::product("desc.k", {s.batch, s.heads, s.seq_k, s.head_dim});
  s.rows = train::product("desc.lse", {s.batch, s.heads, s.seq_q});
  s.qkv_count = d.layout == 2 ? train::product("desc.q", {3, s.q_count}) : s.q_count;
  // The kernels index rows and groups with 32-bit counters.
  if (s.batch * s.heads >= (1ull << 31)) {
    fail(Status::kInvalidArgument, "desc.batch x desc.heads = {} exceeds 2^31 - 1",
         s.batch * s.heads);
  }
  return s;
}

std::optional<BufferView> attention_buffer(DeviceCall& call, const AttentionShape& s,
                                           const void* handle, const char* name,
                                           std::uint64_t count, bool is_lse, bool optional) {
  const std::uint64_t bytes = train::bytes_of(count, is_lse ? 4 : s.element_bytes);
  std::optional<BufferView> view;
  if (optional) view = call.optional_buffer(handle, name, bytes);
  else view = call.buffer(handle, name, bytes);
  if (!view) return view;
  const int wanted = is_lse ? AETHERCL_F32 : s.dtype;
  if (auto record = call.runtime().buffers().find(handle)) {
    if (record->dtype >= 0 && record->dtype != wanted) {
      fail(Status::kInvalidArgument, "{} is tagged {} ({}) but the attention reads it as {} ({})",
           name, dtype_constant_name(record->dtype), record->dtype, dtype_constant_name(wanted), wanted);
    }
  }
  return view;
}

}  // namespace aethercl::ops
