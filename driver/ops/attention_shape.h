// Fused attention: the checked shape of a descriptor and its buffers (validation only).
#pragma once

#include "runtime/device_call.h"

#include <aethercl/driver.h>

#include <cstdint>

namespace aethercl::ops {

// The largest head_dim the kernels support (private rows and local tiles are sized for it).
inline constexpr int kAttentionMaxHeadDim = 256;

struct AttentionShape {
  std::uint64_t batch, heads, seq_q, seq_k, head_dim;
  std::uint64_t q_count, k_count, rows;  // elements of q (and o), of k (and v); batch*heads*seq_q
  std::uint64_t qkv_count;               // elements of q's buffer: 3 q_count packed, else q_count
  std::uint64_t element_bytes;           // of dtype
  int layout, causal, dtype;            // layout 2: q, k, v (and dq, dk, dv) packed in one buffer
  int compute;                           // AETHERCL_COMPUTE_* as given (DEFAULT unresolved)
  float scale;                           // the effective scale (0 resolved)
};

// Reads *desc (struct_size rule) into `copy` and checks every scalar field; throws
// kInvalidArgument naming the field.
AttentionShape attention_shape(const aethercl_attention_desc* desc, aethercl_attention_desc& copy);

// Resolves a required (or, with optional = true, possibly NULL) tensor of `count` elements of the
// shape's dtype (float32 when is_lse), refusing a dtype tag other than that.
std::optional<BufferView> attention_buffer(DeviceCall& call, const AttentionShape& s,
                                           const void* handle, const char* name,
                                           std::uint64_t count, bool is_lse, bool optional);

}  // namespace aethercl::ops
