// Loss ops: log-softmax and cross-entropy over rows = B*S of V classes, one work-group per row
// (kernels/rowwise.cl). Enqueued like every op; the stream order of docs/ABI.md section 3.7 makes
// them visible to the next read.
#include "ops/loss.h"

#include "ops/aliasing.h"
#include "runtime/family_launch.h"

namespace aethercl::ops {

void log_softmax(DeviceCall& call, void* logits, void* log_probs, int B, int S, int V) {
  std::uint64_t count = element_count({{"B", B}, {"S", S}, {"V", V}});
  std::uint64_t bytes = byte_count(count, sizeof(float));
  cl_mem in_mem = call.buffer(logits, "input_logits", bytes).mem;
  cl_mem out_mem = call.buffer(log_probs, "output_log_probs", bytes).mem;
  if (count == 0) return;
  cl_ulong rows = static_cast<cl_ulong>(B) * static_cast<cl_ulong>(S);
  cl_ulong cols = static_cast<cl_ulong>(V);
  if (row_lanes_forms(call.device())) {
    launch_rows(call, "rowwise_log_softmax_lanes", rows, cols, 0, in_mem, out_mem, rows, cols);
    return;
  }
  launch_rows(call, "rowwise_log_softmax", rows, cols, sizeof(float), in_mem, out_mem,
              rows, cols);
}

void cross_entropy(DeviceCall& call, void* log_probs, void* targets, void* grad, void* loss, int B,
                   int S, int V) {
  std::uint64_t count = element_count({{"B", B}, {"S", S}, {"V", V}});
  // With no element to touch (any dimension 0) the per-row buffers need no bytes either.
  std::uint64_t rows = count == 0 ? 0 : element_count({{"B", B}, {"S", S}});
  std::uint64_t bytes = byte_count(count, sizeof(float));
  std::uint64_t row_bytes = byte_count(rows, sizeof(float));  // float loss, int32 targets
  cl_mem lp_mem = call.buffer(log_probs, "log_probs", bytes).mem;
  cl_mem target_mem = call.buffer(targets, "target_indices", row_bytes).mem;
  cl_mem grad_mem = call.buffer(grad, "grad_input", bytes).mem;
  cl_mem loss_mem = call.buffer(loss, "loss_per_sample", row_bytes).mem;
  // The loss reads log_probs[target] after other items wrote their gradients, and each row's
  // target is read by every item: no output may share a buffer with anything.
  const NamedBuffer lp_arg{log_probs, "log_probs"};
  const NamedBuffer target_arg{targets, "target_indices"};
  require_not_aliased({grad, "grad_input"}, {lp_arg, target_arg});
  require_not_aliased({loss, "loss_per_sample"}, {lp_arg, target_arg, {grad, "grad_input"}});
  if (count == 0) return;
  cl_ulong cols = static_cast<cl_ulong>(V);
  launch_rows(call, "rowwise_cross_entropy", rows, cols, 0, lp_mem, target_mem, grad_mem,
              loss_mem, cl_ulong{rows}, cols);
}

}  // namespace aethercl::ops
