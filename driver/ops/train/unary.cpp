// Unary ops: map the op code to its kernel, check alpha where the op reads it, launch.
#include "ops/train/unary.h"

#include "ops/train/common.h"
#include "ops/train/operand_storage.h"

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

// The roles of kernels/unary.cl. A direction names the operands it lacks in the format of their
// partners (dy as y, dx as x; y as dy), so training whose gradients keep their activations'
// formats builds one program for both directions.
FamilyVariant family_of(Storage x, Storage y, Storage dy, Storage dx) {
  return {"unary", storage_options({{"UN_X", x}, {"UN_Y", y}, {"UN_DY", dy}, {"UN_DX", dx}})};
}

// Work-items of a launch over count elements: kernels/unary.cl takes four per item.
std::uint64_t quads(std::uint64_t count) { return (count + 3) / 4; }

}  // namespace

void unary(DeviceCall& call, int op, void* x, void* y, std::size_t count, float alpha) {
  const UnaryKernel& kernel = kernel_for(op, alpha);
  const Operand x_op = operand(call, x, "x", count);
  const Operand y_op = operand(call, y, "y", count);
  if (count == 0) return;
  launch_linear(call, family_of(x_op.storage, y_op.storage, y_op.storage, x_op.storage),
                kernel.name, quads(count), x_op.view.mem, y_op.view.mem, ul(count), alpha);
}

void unary_backward(DeviceCall& call, int op, void* x, void* dy, void* dx, std::size_t count,
                    float alpha) {
  const UnaryKernel& kernel = kernel_for(op, alpha);
  const Operand x_op = operand(call, x, "x", count);
  const Operand dy_op = operand(call, dy, "dy", count);
  const Operand dx_op = operand(call, dx, "dx", count);
  if (count == 0) return;
  const FamilyVariant family =
      family_of(x_op.storage, dy_op.storage, dy_op.storage, dx_op.storage);
  const std::string name = std::string(kernel.name) + "_backward";
  launch_linear(call, family, name.c_str(), quads(count), x_op.view.mem, dy_op.view.mem,
                dx_op.view.mem, ul(count), alpha);
}

}  // namespace aethercl::ops::train
