// Embedding ops: validate ids (int32, b*s), weights (v*d) and rows (b*s*d), then launch
// kernels/embedding.cl. The backward is deterministic unless AETHERCL_DETERMINISTIC=0 selects the
// float-atomic kernel (docs/ARCHITECTURE.md decision 8: no update is lost on either path).
#include "ops/embedding.h"

#include "ops/aliasing.h"
#include "ops/train/common.h"
#include "ops/train/operand_storage.h"
#include "runtime/family_launch.h"
#include "support/env.h"

#include <algorithm>
#include <cstdint>

namespace aethercl::ops {
namespace {

constexpr const char* kFamily = "embedding";

struct Shape {
  std::uint64_t positions;  // b * s ids
  std::uint64_t rows_out;   // b * s * d floats
  std::uint64_t weights;    // v * d floats
};

Shape shape_of(int b, int s, int d, int v) {
  std::uint64_t positions = element_count({{"b", b}, {"s", s}});
  std::uint64_t rows_out = element_count({{"b", b}, {"s", s}, {"d", d}});
  std::uint64_t weights = element_count({{"v", v}, {"d", d}});
  return Shape{positions, rows_out, weights};
}

// The kernel of the family built for the rows' format (the plain float32 build when float32).
Kernel& rows_kernel(DeviceCall& call, train::Storage rows, const char* name) {
  const std::string options = train::storage_options({{"EMB_ROWS", rows}});
  if (options.empty()) return family_kernel(call, kFamily, name);
  return call.device().programs().kernel(kFamily, name, options);
}

constexpr const char* kMaster = "a float32 master (the weights and d_w stay float32)";

}  // namespace

void embedding_lookup(DeviceCall& call, void* idx, void* w, void* out, int b, int s, int d,
                      int v) {
  Shape shape = shape_of(b, s, d, v);
  cl_mem idx_mem = call.buffer(idx, "idx", byte_count(shape.positions, sizeof(cl_int))).mem;
  cl_mem w_mem = train::float32_operand(call, w, "w", shape.weights, kMaster, false)->mem;
  const train::Operand out_op = train::operand(call, out, "o", shape.rows_out);
  cl_mem out_mem = out_op.view.mem;
  require_distinct(idx, "idx", out, "o");
  require_distinct(w, "w", out, "o");
  if (shape.rows_out == 0) return;  // v == 0 is fine: every id is invalid, every row zero

  Kernel& kernel = rows_kernel(call, out_op.storage, "embedding_lookup");
  call.launch(kernel, linear_geometry(call.device(), kernel, shape.rows_out), idx_mem, w_mem,
         out_mem, static_cast<cl_ulong>(shape.positions), static_cast<cl_ulong>(d),
         static_cast<cl_ulong>(v));
}

void embedding_backward(DeviceCall& call, void* d_out, void* idx, void* d_w, int b, int s, int d,
                        int v) {
  Shape shape = shape_of(b, s, d, v);
  const train::Operand d_out_op = train::operand(call, d_out, "d_o", shape.rows_out);
  cl_mem d_out_mem = d_out_op.view.mem;
  cl_mem idx_mem = call.buffer(idx, "idx", byte_count(shape.positions, sizeof(cl_int))).mem;
  cl_mem d_w_mem = train::float32_operand(call, d_w, "d_w", shape.weights, kMaster, false)->mem;
  require_distinct(d_out, "d_o", d_w, "d_w");
  require_distinct(idx, "idx", d_w, "d_w");
  if (shape.rows_out == 0 || shape.weights == 0) return;  // nothing to add

  Device& device = call.device();
  const auto positions = static_cast<cl_ulong>(shape.positions);
  const auto width = static_cast<cl_ulong>(d);
  const auto vocab = static_cast<cl_ulong>(v);
  if (!env::flag(env::kDeterministic, true)) {
    Kernel& kernel = rows_kernel(call, d_out_op.storage, "embedding_backward_atomic");
    call.launch(kernel, linear_geometry(device, kernel, shape.rows_out), d_out_mem, idx_mem,
           d_w_mem, positions, width, vocab);
    return;
  }
  Kernel& kernel = rows_kernel(call, d_out_op.storage, "embedding_backward_segmented");
  std::size_t local = work_group_limit(device, kernel, 256);
  call.launch(kernel, capped_groups(device, vocab, local), d_out_mem, idx_mem, d_w_mem,
         positions, width, vocab, LocalBytes{local * sizeof(cl_uint)},
         LocalBytes{local * sizeof(cl_uint)});
}

}  // namespace aethercl::ops
