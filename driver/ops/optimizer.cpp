// Adam: validate buffers, then (for n > 0) the hyper-parameters (docs/ABI.md section 4.9), then
// launch kernels/optimizer.cl with beta^t computed here as double pow rounded to float.
#include "ops/optimizer.h"

#include "ops/aliasing.h"
#include "runtime/family_launch.h"

#include <cmath>

namespace aethercl::ops {
namespace {

void check_hyper(const AdamHyper& h) {
  if (h.t <= 0) fail(Status::kInvalidArgument, "t = {} must be at least 1", h.t);
  // Written so that NaN fails every test; infinities are refused as well.
  if (!(h.lr >= 0.0f) || std::isinf(h.lr)) {
    fail(Status::kInvalidArgument, "lr = {} must be finite and >= 0", h.lr);
  }
  if (!(h.beta1 >= 0.0f && h.beta1 < 1.0f)) {
    fail(Status::kInvalidArgument, "beta1 = {} must lie in [0, 1)", h.beta1);
  }
  if (!(h.beta2 >= 0.0f && h.beta2 < 1.0f)) {
    fail(Status::kInvalidArgument, "beta2 = {} must lie in [0, 1)", h.beta2);
  }
  if (!(h.eps >= 0.0f) || std::isinf(h.eps)) {
    fail(Status::kInvalidArgument, "eps = {} must be finite and >= 0", h.eps);
  }
  if (!(h.weight_decay >= 0.0f) || std::isinf(h.weight_decay)) {
    fail(Status::kInvalidArgument, "weight_decay = {} must be finite and >= 0", h.weight_decay);
  }
}

}  // namespace

void adam_update(DeviceCall& call, void* p, void* g, void* m, void* v, int n, const AdamHyper& h) {
  std::uint64_t count = element_count({{"num_elements", n}});
  std::uint64_t bytes = byte_count(count, sizeof(float));
  cl_mem p_mem = call.buffer(p, "param_buffer", bytes).mem;
  cl_mem g_mem = call.buffer(g, "grad_buffer", bytes).mem;
  cl_mem m_mem = call.buffer(m, "m_buffer", bytes).mem;
  cl_mem v_mem = call.buffer(v, "v_buffer", bytes).mem;
  // grad may be any of the three: every element is read before it is written.
  require_distinct(p, "param_buffer", m, "m_buffer");
  require_distinct(p, "param_buffer", v, "v_buffer");
  require_distinct(m, "m_buffer", v, "v_buffer");
  if (count == 0) return;  // docs/ABI.md section 3.6: before the hyper-parameters are checked
  check_hyper(h);

  const float beta1_t = static_cast<float>(std::pow(static_cast<double>(h.beta1), h.t));
  const float beta2_t = static_cast<float>(std::pow(static_cast<double>(h.beta2), h.t));
  Kernel& kernel = family_kernel(call, "optimizer", "optimizer_adam");
  call.launch(kernel, linear_geometry(call.device(), kernel, count), p_mem, g_mem, m_mem, v_mem,
         static_cast<cl_ulong>(count), h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, beta1_t,
         beta2_t);
}

}  // namespace aethercl::ops
