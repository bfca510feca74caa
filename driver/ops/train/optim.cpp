// Optimisers: validate the descriptor for its kind, compute the bias corrections on the host in
// double, launch one elementwise update. Clipping: partial sums per tensor chunk, one ordered
// final sum, then in-place scaling by a coefficient that never leaves the device.
#include "ops/train/optim.h"

#include "ops/aliasing.h"
#include "ops/train/common.h"
#include "ops/train/operand_storage.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace aethercl::ops::train {
namespace {

constexpr const char* kFamily = "optim";
constexpr int kMaxTensors = 65536;
constexpr std::uint64_t kMinChunk = 4096;
constexpr std::uint64_t kMaxChunks = 1024;

cl_int flag(bool value) { return value ? 1 : 0; }

// "desc.lr" / "descs[3].lr": every message names the descriptor it is about.
struct Namer {
  const std::string& base;
  std::string operator()(const char* field) const { return base + "." + field; }
};

// Bytes of the descriptor's count floats, the overflow named after its count field.
std::uint64_t count_bytes(const aethercl_optimizer_desc& d, const Namer& name) {
  if (d.count > UINT64_MAX / 4) {
    fail(Status::kInvalidArgument, "{} = {} floats overflow 64 bits as bytes", name("count"),
         d.count);
  }
  return static_cast<std::uint64_t>(d.count) * 4;
}

// param and the states the update writes differ from each other and from grad and the gate;
// grad may be the gate (both only read).
void check_distinct(const PreparedStep& s, const Namer& name) {
  for (int i = 0; i < kStepFieldCount; ++i) {
    for (int j = i + 1; j < kStepFieldCount; ++j) {
      if (step_field_read_only(i) && step_field_read_only(j)) continue;
      require_distinct(s.handles[i], name(kStepFields[i]).c_str(), s.handles[j],
                       name(kStepFields[j]).c_str());
    }
  }
}

void prepare_gate(DeviceCall& call, const aethercl_optimizer_desc& d, const Namer& name,
                  PreparedStep& s) {
  const auto gate = float32_operand(call, d.finite_gate, name("finite_gate").c_str(), 1,
                                    "a float32 value the update tests", true);
  if (!gate) return;
  s.gate = gate->mem;
  s.handles[4] = d.finite_gate;
}

void prepare_sgd(DeviceCall& call, const aethercl_optimizer_desc& d, const Namer& name,
                 PreparedStep& s) {
  require_at_least(name("lr").c_str(), d.lr, 0.0f);
  require_at_least(name("weight_decay").c_str(), d.weight_decay, 0.0f);
  require_at_least(name("momentum").c_str(), d.momentum, 0.0f);
  require_at_least(name("dampening").c_str(), d.dampening, 0.0f);
  if (d.nesterov != 0 && d.nesterov != 1) {
    fail(Status::kInvalidArgument, "{} = {} must be 0 or 1", name("nesterov"), d.nesterov);
  }
  if (d.nesterov && (!(d.momentum > 0.0f) || d.dampening != 0.0f)) {
    fail(Status::kInvalidArgument, "Nesterov momentum needs {} > 0 and {} = 0 (got {} and {})",
         name("momentum"), name("dampening"), d.momentum, d.dampening);
  }
  const std::uint64_t bytes = count_bytes(d, name);
  s.param = call.buffer(d.param, name("param").c_str(), bytes).mem;
  s.grad = call.buffer(d.grad, name("grad").c_str(), bytes).mem;
  s.has_momentum = d.momentum > 0.0f;
  s.state1 = s.state2 = s.param;  // placeholders the kernel never reads without momentum
  if (s.has_momentum) s.state1 = call.buffer(d.state1, name("state1").c_str(), bytes).mem;
  s.handles[0] = d.param;
  s.handles[1] = d.grad;
  s.handles[2] = s.has_momentum ? d.state1 : nullptr;
  prepare_gate(call, d, name, s);
  check_distinct(s, name);
  s.nesterov = d.nesterov != 0;
  s.first_step = d.step == 1;
  s.hyper[0] = d.lr;
  s.hyper[1] = d.weight_decay;
  s.hyper[2] = d.momentum;
  s.hyper[3] = d.dampening;
}

void prepare_adamw(DeviceCall& call, const aethercl_optimizer_desc& d, const Namer& name,
                   PreparedStep& s) {
  require_at_least(name("lr").c_str(), d.lr, 0.0f);
  require_at_least(name("weight_decay").c_str(), d.weight_decay, 0.0f);
  require_in_half_open(name("beta1").c_str(), d.beta1, 0.0f, 1.0f);
  require_in_half_open(name("beta2").c_str(), d.beta2, 0.0f, 1.0f);
  require_at_least(name("eps").c_str(), d.eps, 0.0f);
  const std::uint64_t bytes = count_bytes(d, name);
  s.param = call.buffer(d.param, name("param").c_str(), bytes).mem;
  s.grad = call.buffer(d.grad, name("grad").c_str(), bytes).mem;
  s.state1 = call.buffer(d.state1, name("state1").c_str(), bytes).mem;
  s.state2 = call.buffer(d.state2, name("state2").c_str(), bytes).mem;
  s.handles[0] = d.param;
  s.handles[1] = d.grad;
  s.handles[2] = d.state1;
  s.handles[3] = d.state2;
  prepare_gate(call, d, name, s);
  check_distinct(s, name);
  const double bc1 = 1.0 - std::pow(static_cast<double>(d.beta1), d.step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(d.beta2), d.step);
  s.hyper[0] = static_cast<float>(1.0 - static_cast<double>(d.lr) * d.weight_decay);  // decay
  s.hyper[1] = d.beta1;
  s.hyper[2] = d.beta2;
  s.hyper[3] = d.eps;
  s.hyper[4] = static_cast<float>(d.lr / bc1);                // step size
  s.hyper[5] = static_cast<float>(1.0 / std::sqrt(bc2));      // 1 / sqrt(bias correction 2)
}

}  // namespace

Chunks chunks_of(std::uint64_t n) {
  const std::uint64_t chunk = std::max(kMinChunk, (n + kMaxChunks - 1) / kMaxChunks);
  return Chunks{chunk, (n + chunk - 1) / chunk};
}

PreparedStep prepare_step(DeviceCall& call, const aethercl_optimizer_desc& d,
                          const std::string& desc_name) {
  const Namer name{desc_name};
  if (d.kind != AETHERCL_OPTIMIZER_SGD && d.kind != AETHERCL_OPTIMIZER_ADAMW) {
    fail(Status::kInvalidArgument, "{} = {} is not an aethercl_optimizer_kind", name("kind"),
         d.kind);
  }
  if (d.step < 1) fail(Status::kInvalidArgument, "{} = {} must be at least 1", name("step"), d.step);
  PreparedStep s;
  s.kind = d.kind;
  s.count = d.count;
  if (d.kind == AETHERCL_OPTIMIZER_SGD) prepare_sgd(call, d, name, s);
  else prepare_adamw(call, d, name, s);
  return s;
}

int update_mode(const PreparedStep& s) {
  constexpr int kNesterov = 16, kFirstStep = 32, kHasMomentum = 64, kGated = 128;
  return s.kind | (s.nesterov ? kNesterov : 0) | (s.first_step ? kFirstStep : 0) |
         (s.has_momentum ? kHasMomentum : 0) | (s.gate != nullptr ? kGated : 0);
}

UpdateKernels update_kernels(const Device& device) {
  if (cpu_kernel_forms(device)) return {{kFamily, "-DOPTIM_PER_ITEM=1"}, 1};
  return {{kFamily, ""}, 4};
}

void optimizer_step(DeviceCall& call, const aethercl_optimizer_desc& d) {
  const PreparedStep s = prepare_step(call, d, "desc");
  if (s.count == 0) return;
  // Without a gate the kernel is told not to test one and reads nothing through the argument.
  cl_mem gate = s.gate != nullptr ? s.gate : s.grad;
  const UpdateKernels kernels = update_kernels(call.device());
  const std::uint64_t items = (s.count + kernels.per_item - 1) / kernels.per_item;
  launch_linear(call, kernels.family, "optim_update", items, s.param, s.grad, s.state1, s.state2,
                ul(s.count), static_cast<cl_int>(update_mode(s)), s.hyper[0], s.hyper[1],
                s.hyper[2], s.hyper[3], s.hyper[4], s.hyper[5], gate);
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
  Scratch partials(call, bytes_of(std::max<std::uint64_t>(slots, 1), acc_bytes(device)),
                   "gradient clipping's partial sums");
  Scratch coefficient(call, sizeof(float), "gradient clipping's factor");
  std::uint64_t first = 0;
  const bool lanes = cpu_kernel_forms(device);
  for (int t = 0; t < num_tensors; ++t) {
    if (chunking[t].chunks == 0) continue;
    if (lanes) {  // one work-item per chunk in float16 vectors
      launch_linear(call, kFamily, "optim_sum_squares_lanes", chunking[t].chunks, mems[t],
                    ul(counts[t]), ul(chunking[t].chunk), ul(chunking[t].chunks), partials.mem(),
                    ul(first));
      first += chunking[t].chunks;
      continue;
    }
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
