// Unary ops: map the op code to its kernel, check alpha where the op reads it, launch.
#include "ops/train/unary.h"

#include "ops/train/common.h"

#include <aethercl/driver.h>

#include <array>
#include <string>

namespace aethercl::ops::train {
namespace {

struct UnaryKernel {
  const char* name;
  bool uses_alpha;
};

// Indexed by aethercl_unary_op.
constexpr std::array<UnaryKernel, 22> kUnary = {{
    {"unary_relu", false},       {"unary_leaky_relu", true},  {"unary_sigmoid", false},
    {"unary_tanh", false},       {"unary_silu", false},       {"unary_gelu", false},
    {"unary_gelu_tanh", false},  {"unary_exp", false},        {"unary_log", false},
    {"unary_sqrt", false},       {"unary_rsqrt", false},      {"unary_abs", false},
    {"unary_neg", false},        {"unary_add_scalar", true},  {"unary_sub_scalar", true},
    {"unary_rsub_scalar", true}, {"unary_mul_scalar", true},  {"unary_div_scalar", true},
    {"unary_rdiv_scalar", true}, {"unary_max_scalar", true},  {"unary_min_scalar", true},
    {"unary_pow_scalar", true},
}};
static_assert(kUnary.size() == AETHERCL_UNARY_POW_SCALAR + 1);

const UnaryKernel& kernel_for(int op, float alpha) {
  if (op < 0 || op >= static_cast<int>(kUnary.size())) {
    fail(Status::kInvalidArgument, "op = {} is not an aethercl_unary_op", op);
  }
  const UnaryKernel& kernel = kUnary[static_cast<std::size_t>(op)];
  if (kernel.uses_alpha) require_finite("alpha", alpha);
  return kernel;
}

}  // namespace

void unary(DeviceCall& call, int op, void* x, void* y, std::size_t count, float alpha) {
  const UnaryKernel& kernel = kernel_for(op, alpha);
  const std::uint64_t bytes = bytes_of(count, sizeof(float));
  cl_mem x_mem = call.buffer(x, "x", bytes).mem;
  cl_mem y_mem = call.buffer(y, "y", bytes).mem;
  if (count == 0) return;
  launch_linear(call, "unary", kernel.name, count, x_mem, y_mem, ul(count), alpha);
}

void unary_backward(DeviceCall& call, int op, void* x, void* dy, void* dx, std::size_t count,
                    float alpha) {
  const UnaryKernel& kernel = kernel_for(op, alpha);
  const std::uint64_t bytes = bytes_of(count, sizeof(float));
  cl_mem x_mem = call.buffer(x, "x", bytes).mem;
  cl_mem dy_mem = call.buffer(dy, "dy", bytes).mem;
  cl_mem dx_mem = call.buffer(dx, "dx", bytes).mem;
  if (count == 0) return;
  const std::string name = std::string(kernel.name) + "_backward";
  launch_linear(call, "unary", name.c_str(), count, x_mem, dy_mem, dx_mem,
                ul(count), alpha);
}

}  // namespace aethercl::ops::train
