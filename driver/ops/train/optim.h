// SGD / AdamW updates and global gradient-norm clipping on the device (kernels/optim.cl).
#pragma once

#include "ops/train/common.h"
#include "runtime/device_call.h"

#include <aethercl/driver.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace aethercl::ops::train {

void optimizer_step(DeviceCall& call, const aethercl_optimizer_desc& desc);

// The descriptor's version-3 size: a struct_size ending at step means no finite_gate.
constexpr std::size_t kOptimizerDescV3Size = offsetof(aethercl_optimizer_desc, finite_gate);

// One descriptor, validated (messages name its fields "<desc_name>.lr" ...), in the form the
// update kernels take: the buffers (param standing in for a state the kind does not read), the
// handles the update touches (NULL where unused), and the kernels' float arguments (SGD: lr,
// weight_decay, momentum, dampening; AdamW: decay factor, beta1, beta2, eps, step size,
// 1 / sqrt(1 - beta2^step), computed in double and rounded once). gate is the finite_gate buffer,
// or NULL without one. handles are in kStepFields' order.
constexpr int kStepFieldCount = 5;
inline constexpr const char* kStepFields[kStepFieldCount] = {"param", "grad", "state1", "state2",
                                                             "finite_gate"};
// grad and finite_gate are only read; the others the update writes.
constexpr bool step_field_read_only(int field) { return field == 1 || field == 4; }

struct PreparedStep {
  int kind = 0;
  std::uint64_t count = 0;
  cl_mem param = nullptr, grad = nullptr, state1 = nullptr, state2 = nullptr, gate = nullptr;
  const void* handles[kStepFieldCount] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  float hyper[6] = {0, 0, 0, 0, 0, 0};
  bool nesterov = false, first_step = false, has_momentum = false;
};
PreparedStep prepare_step(DeviceCall& call, const aethercl_optimizer_desc& desc,
                          const std::string& desc_name);

// The update kernels' mode word (kernels/optim.cl OPTIM_MODE_*): the kind, then SGD's flags and
// whether a gate is tested.
int update_mode(const PreparedStep& step);

// The update kernels' build (kernels/optim.cl OPTIM_PER_ITEM) and how many elements each
// work-item updates: 4 with 16-byte accesses on GPUs, 1 on CPU devices, whose compilers
// vectorise neighbouring work-items' scalar accesses.
struct UpdateKernels {
  FamilyVariant family;
  std::uint64_t per_item;
};
UpdateKernels update_kernels(const Device& device);

// aethercl_optimizer_step_multi (ops/train/optim_multi.cpp).
void optimizer_step_multi(DeviceCall& call, const aethercl_optimizer_desc* descs, int count);
void clip_grad_norm(DeviceCall& call, int num_tensors, void* const* grads,
                    const std::size_t* counts, float max_norm, void* total_norm);

// Chunking of a sum over n elements into fixed chunks (independent of the launch size, so the
// result is the same whatever the device's group count): chunk elements each, `chunks` of them.
struct Chunks {
  std::uint64_t chunk, chunks;
};
Chunks chunks_of(std::uint64_t n);

}  // namespace aethercl::ops::train
