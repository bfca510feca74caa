// Fused attention: validation (ops/attention_shape), then the tensor-core kernels where they take
// the call (ops/attention_mma), else the portable kernels of kernels/attention.cl.
// Tiles: the private rows and local tile rows hold ATT_D floats (head_dim rounded up to 32, 64,
// 128 or 256); a local tile holds ATT_BK rows, as many (up to 64) as two tiles of the largest
// kernel fit in the device's local memory (at most 48 KiB used). A work-group of up to 64 items
// (kAttentionGroup) covers as many query rows (forward, dq) or key rows (dk, dv).
#include "ops/attention.h"

#include "ops/aliasing.h"
#include "ops/attention_mma.h"
#include "ops/attention_shape.h"
#include "ops/train/common.h"
#include "runtime/family_launch.h"
#include "runtime/scratch.h"

#include <algorithm>
#include <string>

namespace aethercl::ops {
namespace {

constexpr const char* kFamily = "attention";
constexpr std::size_t kAttentionGroup = 64;
constexpr std::uint64_t kLocalBudget = 48 * 1024;

std::uint64_t head_dim_bucket(std::uint64_t head_dim) {
  for (std::uint64_t bucket : {32, 64, 128}) {
    if (head_dim <= bucket) return bucket;
  }
  return kAttentionMaxHeadDim;
}

// The program options for a head dimension on this device.
std::string program_options(const Device& device, std::uint64_t head_dim) {
  const std::uint64_t d = head_dim_bucket(head_dim);
  // Local memory of the largest kernel (attention_dkdv): two tiles of rows plus two floats a row.
  const std::uint64_t budget = std::min(device.info().local_mem_bytes, kLocalBudget);
  const std::uint64_t reserve = 1024;  // what runtimes keep for themselves and kernel arguments
  std::uint64_t rows = budget > reserve ? (budget - reserve) / (8 * d + 8) : 0;
  rows = std::min<std::uint64_t>(rows, 64);
  if (rows >= 8) rows -= rows % 8;
  if (rows == 0) {
    fail(Status::kNotImplemented, "head_dim {} needs {} bytes of local memory; the device has {}",
         head_dim, 8 * d + 8 + reserve, device.info().local_mem_bytes);
  }
  std::string options = "-DATT_D=" + std::to_string(d) + " -DATT_BK=" + std::to_string(rows);
  // GPUs keep the rows in registers only when the d loops are unrolled.
  if (!cpu_kernel_forms(device)) options += " -DATT_UNROLL=1";
  return options;
}

struct Tiled {
  Kernel* kernel;
  std::size_t local;
  cl_uint tiles;
  LaunchGeometry geometry;
};

// One work-group per (batch*head, tile of `seq` rows).
Tiled tiled(DeviceCall& call, const std::string& options, const char* name,
            const AttentionShape& s, std::uint64_t seq) {
  Device& device = call.device();
  Kernel& kernel = family_kernel(call, kFamily, name, options);
  const std::size_t local = work_group_limit(device, kernel, kAttentionGroup);
  const std::uint64_t tiles = (seq + local - 1) / local;
  const std::uint64_t groups = s.batch * s.heads * tiles;
  if (tiles > 0xffffffffull || groups > (1ull << 40)) {
    fail(Status::kInvalidArgument, "the attention grid of {} work-groups is too large", groups);
  }
  return {&kernel, local, static_cast<cl_uint>(tiles),
          LaunchGeometry::linear(static_cast<std::size_t>(groups * local), local)};
}

cl_uint u32(std::uint64_t value) { return static_cast<cl_uint>(value); }

// Layout 2 passes one buffer for q, k and v (and one for dq, dk and dv): the other two name it.
void require_packed(const NamedBuffer& first, std::initializer_list<NamedBuffer> others) {
  for (const NamedBuffer& other : others) {
    if (other.handle != first.handle) {
      fail(Status::kInvalidArgument, "{} must be {} with desc.layout = 2 (packed in one buffer)",
           other.name, first.name);
    }
  }
}

// q, k and v: three buffers, or with layout 2 one buffer of all three.
struct Inputs {
  cl_mem q, k, v;
};

Inputs attention_inputs(DeviceCall& call, const AttentionShape& s,
                        const aethercl_attention_desc& d) {
  if (s.layout == 2) require_packed({d.q, "desc.q"}, {{d.k, "desc.k"}, {d.v, "desc.v"}});
  cl_mem q = attention_buffer(call, s, d.q, "desc.q", s.qkv_count, false, false)->mem;
  if (s.layout == 2) return {q, q, q};
  return {q, attention_buffer(call, s, d.k, "desc.k", s.k_count, false, false)->mem,
          attention_buffer(call, s, d.v, "desc.v", s.k_count, false, false)->mem};
}

}  // namespace

void attention_forward(DeviceCall& call, const aethercl_attention_desc* desc) {
  aethercl_attention_desc d;
  const AttentionShape s = attention_shape(desc, d);
  const auto [q, k, v] = attention_inputs(call, s, d);
  cl_mem o = attention_buffer(call, s, d.o, "desc.o", s.q_count, false, false)->mem;
  auto lse = attention_buffer(call, s, d.lse, "desc.lse", s.rows, true, true);
  require_not_aliased({d.o, "desc.o"}, {{d.q, "desc.q"}, {d.k, "desc.k"}, {d.v, "desc.v"}});
  require_not_aliased({d.lse, "desc.lse"},
                      {{d.q, "desc.q"}, {d.k, "desc.k"}, {d.v, "desc.v"}, {d.o, "desc.o"}});
  if (s.rows == 0 || (s.head_dim == 0 && !lse)) return;
  if (const auto mma = attention_mma_options(call, s)) {
    attention_mma_forward(call, s, *mma, q, k, v, o, lse ? lse->mem : o, lse.has_value());
    return;
  }
  const std::string options = program_options(call.device(), s.head_dim);
  const Tiled t = tiled(call, options, "attention_forward", s, s.seq_q);
  call.launch(*t.kernel, t.geometry, q, k, v, o, lse ? lse->mem : o, cl_int{lse ? 1 : 0},
              u32(s.heads), u32(s.seq_q), u32(s.seq_k), u32(s.head_dim), cl_int{s.layout},
              cl_int{s.causal}, s.scale, cl_int{s.dtype}, t.tiles);
}

void attention_backward(DeviceCall& call, const aethercl_attention_desc* desc) {
  aethercl_attention_desc d;
  const AttentionShape s = attention_shape(desc, d);
  const auto [q, k, v] = attention_inputs(call, s, d);
  cl_mem o = attention_buffer(call, s, d.o, "desc.o", s.q_count, false, false)->mem;
  cl_mem lse = attention_buffer(call, s, d.lse, "desc.lse", s.rows, true, false)->mem;
  cl_mem dout = attention_buffer(call, s, d.dout, "desc.dout", s.q_count, false, false)->mem;
  if (s.layout == 2) require_packed({d.dq, "desc.dq"}, {{d.dk, "desc.dk"}, {d.dv, "desc.dv"}});
  cl_mem dq = attention_buffer(call, s, d.dq, "desc.dq", s.qkv_count, false, false)->mem;
  cl_mem dk = dq, dv = dq;
  if (s.layout != 2) {
    dk = attention_buffer(call, s, d.dk, "desc.dk", s.k_count, false, false)->mem;
    dv = attention_buffer(call, s, d.dv, "desc.dv", s.k_count, false, false)->mem;
  }
  for (NamedBuffer out : {NamedBuffer{d.dq, "desc.dq"}, {d.dk, "desc.dk"}, {d.dv, "desc.dv"}}) {
    require_not_aliased(out, {{d.q, "desc.q"}, {d.k, "desc.k"}, {d.v, "desc.v"},
                              {d.o, "desc.o"}, {d.lse, "desc.lse"}, {d.dout, "desc.dout"}});
  }
  if (s.layout != 2) {  // packed gradients share one buffer, each part written by one kernel
    require_distinct(d.dq, "desc.dq", d.dk, "desc.dk");
    require_distinct(d.dq, "desc.dq", d.dv, "desc.dv");
    require_distinct(d.dk, "desc.dk", d.dv, "desc.dv");
  }
  if (s.q_count == 0 && s.k_count == 0) return;  // no gradient element to write
  const std::string options = program_options(call.device(), s.head_dim);
  Device& device = call.device();
  // D_i = dout_i . o_i first (float32 scratch; one extra float keeps it non-empty).
  Scratch delta(call, train::bytes_of(s.rows + 1, sizeof(float)),
                "the attention backward's row dot products");
  if (s.rows > 0) {
    // Up to 8 items per row (the kernel's partial sums hold 256 items: linear groups' most).
    Kernel& row_dot = family_kernel(call, kFamily, "attention_row_dot", options);
    LaunchGeometry geometry = linear_geometry(device, row_dot, s.rows * 8);
    cl_uint lanes = 8;
    while (geometry.local[0] % lanes != 0) lanes /= 2;
    call.launch(row_dot, geometry, o, dout, delta.mem(), cl_ulong{s.rows}, u32(s.heads),
                u32(s.seq_q), u32(s.head_dim), cl_int{s.layout}, cl_int{s.dtype}, lanes);
  }
  if (const auto mma = attention_mma_options(call, s)) {
    attention_mma_backward(call, s, *mma, q, k, v, lse, delta.mem(), dout, dq, dk, dv);
    return;
  }
  if (s.k_count > 0) {  // keys no query sees (seq_q = 0, causal) get dk = dv = 0
    const Tiled t = tiled(call, options, "attention_dkdv", s, s.seq_k);
    call.launch(*t.kernel, t.geometry, q, k, v, lse, delta.mem(), dout, dk, dv, u32(s.heads),
                u32(s.seq_q), u32(s.seq_k), u32(s.head_dim), cl_int{s.layout}, cl_int{s.causal},
                s.scale, cl_int{s.dtype}, t.tiles);
  }
  if (s.q_count > 0) {
    const Tiled t = tiled(call, options, "attention_dq", s, s.seq_q);
    call.launch(*t.kernel, t.geometry, q, k, v, lse, delta.mem(), dout, dq, u32(s.heads),
                u32(s.seq_q), u32(s.seq_k), u32(s.head_dim), cl_int{s.layout}, cl_int{s.causal},
                s.scale, cl_int{s.dtype}, t.tiles);
  }
}

}  // namespace aethercl::ops
