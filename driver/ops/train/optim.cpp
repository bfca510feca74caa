// Optimisers: validate the descriptor for its kind, compute the bias corrections on the host in
// double, launch one elementwise update. Clipping: partial sums per tensor chunk, one ordered
// final sum, then in-place scaling by a coefficient that never leaves the device.
#include "ops/train/optim.h"

#include "ops/aliasing.h"
#include "ops/train/common.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

namespace aethercl::ops::train {
namespace {

constexpr const char* kFamily = "optim";
constexpr int kMaxTensors = 65536;
constexpr std::uint64_t kMinChunk = 4096;
constexpr std::uint64_t kMaxChunks = 1024;

cl_int flag(bool value) { return value ? 1 : 0; }

void sgd(DeviceCall& call, const aethercl_optimizer_desc& d) {
  require_at_least("desc.lr", d.lr, 0.0f);
  require_at_least("desc.weight_decay", d.weight_decay, 0.0f);
  require_at_least("desc.momentum", d.momentum, 0.0f);
  require_at_least("desc.dampening", d.dampening, 0.0f);
  if (d.nesterov != 0 && d.nesterov != 1) {
    fail(Status::kInvalidArgument, "desc.nesterov = {} must be 0 or 1", d.nesterov);
  }
  if (d.nesterov && (!(d.momentum > 0.0f) || d.dampening != 0.0f)) {
    fail(Status::kInvalidArgument, "Nesterov momentum needs desc.momentum > 0 and desc.dampening "
         "= 0 (got {} and {})", d.momentum, d.dampening);
  }
  const std::uint64_t bytes = bytes_of(d.count, 4);
  cl_mem p = call.buffer(d.param, "desc.param", bytes).mem;
  cl_mem g = call.buffer(d.grad, "desc.grad", bytes).mem;
  const bool has_momentum = d.momentum > 0.0f;
  auto buf = has_momentum ? std::optional(call.buffer(d.state1, "desc.state1", bytes))
                          : std::optional<BufferView>();
  require_distinct(d.param, "desc.param", d.grad, "desc.grad");
  if (has_momentum) {
    require_distinct(d.state1, "desc.state1", d.param, "desc.param");
    require_distinct(d.state1, "desc.state1", d.grad, "desc.grad");
  }
  if (d.count == 0) return;
  launch_linear(call, kFamily, "optim_sgd", d.count, p, g, buf ? buf->mem : p,
                ul(d.count), d.lr, d.weight_decay, d.momentum, d.dampening, flag(d.nesterov),
                flag(d.step == 1), flag(has_momentum));
}

void adamw(DeviceCall& call, const aethercl_optimizer_desc& d) {
  require_at_least("desc.lr", d.lr, 0.0f);
  require_at_least("desc.weight_decay", d.weight_decay, 0.0f);
  require_in_half_open("desc.beta1", d.beta1, 0.0f, 1.0f);
  require_in_half_open("desc.beta2", d.beta2, 0.0f, 1.0f);
  require_at_least("desc.eps", d.eps, 0.0f);
  const std::uint64_t bytes = bytes_of(d.count, 4);
  cl_mem p = call.buffer(d.param, "desc.param", bytes).mem;
  cl_mem g = call.buffer(d.grad, "desc.grad", bytes).mem;
  cl_mem m = call.buffer(d.state1, "desc.state1", bytes).mem;
  cl_mem v = call.buffer(d.state2, "desc.state2", bytes).mem;
  const void* all[] = {d.param, d.grad, d.state1, d.state2};
  const char* names[] = {"desc.param", "desc.grad", "desc.state1", "desc.state2"};
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 4; ++j) require_distinct(all[i], names[i], all[j], names[j]);
  }
  if (d.count == 0) return;
  const double bc1 = 1.0 - std::pow(static_cast<double>(d.beta1), d.step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(d.beta2), d.step);
  const float decay = static_cast<float>(1.0 - static_cast<double>(d.lr) * d.weight_decay);
  const float step_size = static_cast<float>(d.lr / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  launch_linear(call, kFamily, "optim_adamw", d.count, p, g, m, v, ul(d.count), decay,
                d.beta1, d.beta2, d.eps, step_size, inv_sqrt_bc2);
}

}  // namespace

Chunks chunks_of(std::uint64_t n) {
  const std::uint64_t chunk = std::max(kMinChunk, (n + kMaxChunks - 1) / kMaxChunks);
  return Chunks{chunk, (n + chunk - 1) / chunk};
}

void optimizer_step(DeviceCall& call, const aethercl_optimizer_desc& d) {
  if (d.kind != AETHERCL_OPTIMIZER_SGD && d.kind != AETHERCL_OPTIMIZER_ADAMW) {
    fail(Status::kInvalidArgument, "desc.kind = {} is not an aethercl_optimizer_kind", d.kind);
  }
  if (d.step < 1) fail(Status::kInvalidArgument, "desc.step = {} must be at least 1", d.step);
  if (d.kind == AETHERCL_OPTIMIZER_SGD) sgd(call, d);
  else adamw(call, d);
}

void clip_grad_norm(DeviceCall& call, int num_tensors, void* const* grads,
                    const std::size_t* counts, float max_norm, void* total_norm) {
  if (num_tensors < 0 || num_tensors > kMaxTensors) {
    fail(Status::kInvalidArgument, "num_tensors = {} must lie in [0, {}]", num_tensors,
         kMaxTensors);
  }
  if (!(max_norm >= 0.0f)) {
    fail(Status::kInvalidArgument, "max_norm = {} must be >= 0", max_norm);
  }
  if (num_tensors > 0 && grads == nullptr) fail(Status::kInvalidArgument, "grads is NULL");
  if (num_tensors > 0 && counts == nullptr) fail(Status::kInvalidArgument, "counts is NULL");
  std::vector<cl_mem> mems(static_cast<std::size_t>(num_tensors));
  std::set<const void*> seen;
  for (int t = 0; t < num_tensors; ++t) {
    const std::string name = fmt::format("grads[{}]", t);
    mems[t] = call.buffer(grads[t], name.c_str(), bytes_of(counts[t], 4)).mem;
    if (!seen.insert(grads[t]).second) {
      fail(Status::kInvalidArgument, "{} ({}) appears twice in grads", name, grads[t]);
    }
  }
  auto total_view = call.optional_buffer(total_norm, "total_norm", sizeof(float));
  if (total_norm != nullptr && seen.count(total_norm)) {
    fail(Status::kInvalidArgument, "total_norm ({}) is also one of grads", total_norm);
  }
  Device& device = call.device();
  std::vector<Chunks> chunking(static_cast<std::size_t>(num_tensors));
  std::uint64_t slots = 0;
  for (int t = 0; t < num_tensors; ++t) {
    chunking[t] = chunks_of(counts[t]);
    slots += chunking[t].chunks;
  }
  Scratch partials(device, bytes_of(std::max<std::uint64_t>(slots, 1), acc_bytes(device)));
  Scratch coefficient(device, sizeof(float));
  std::uint64_t first = 0;
  for (int t = 0; t < num_tensors; ++t) {
    if (chunking[t].chunks == 0) continue;
    launch_slices(call, kFamily, "optim_sum_squares_chunks", chunking[t].chunks, chunking[t].chunk,
                  acc_bytes(device), mems[t], ul(counts[t]), ul(chunking[t].chunk),
                  ul(chunking[t].chunks), partials.mem(), ul(first));
    first += chunking[t].chunks;
  }
  launch_single(call, kFamily, "optim_clip_coefficient", partials.mem(), ul(slots), max_norm,
                coefficient.mem(), total_view ? total_view->mem : coefficient.mem(),
                flag(bool(total_view)));
  if (std::isinf(max_norm)) return;  // measuring only
  for (int t = 0; t < num_tensors; ++t) {
    if (counts[t] == 0) continue;
    launch_linear(call, kFamily, "optim_scale_by_coefficient", counts[t], mems[t], ul(counts[t]),
                  coefficient.mem());
  }
}

}  // namespace aethercl::ops::train
