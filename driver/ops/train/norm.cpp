// Row normalisation: validation of the descriptor, then a row kernel (and a column kernel for
// dgamma / dbeta in the backward, from per-row statistics kept in scratch memory).
#include "ops/train/norm.h"

#include "ops/aliasing.h"
#include "ops/train/common.h"

namespace aethercl::ops::train {
namespace {

constexpr const char* kFamily = "norm";

struct NormShape {
  std::uint64_t rows, cols, count;
};

NormShape shape_of(const aethercl_norm_desc& d) {
  if (d.kind != AETHERCL_NORM_LAYER && d.kind != AETHERCL_NORM_RMS) {
    fail(Status::kInvalidArgument, "desc.kind = {} is not an aethercl_norm_kind", d.kind);
  }
  NormShape s{dim("desc.rows", d.rows), dim("desc.cols", d.cols), 0};
  s.count = product("desc.rows x desc.cols", {s.rows, s.cols});
  if (!(d.eps > 0.0f) || std::isinf(d.eps)) {
    fail(Status::kInvalidArgument, "desc.eps = {} must be finite and > 0", d.eps);
  }
  return s;
}

}  // namespace

void norm_forward(DeviceCall& call, const aethercl_norm_desc& d) {
  const NormShape s = shape_of(d);
  const std::uint64_t bytes = bytes_of(s.count, 4), param_bytes = bytes_of(s.cols, 4);
  cl_mem x = call.buffer(d.x, "desc.x", bytes).mem;
  auto gamma = call.optional_buffer(d.gamma, "desc.gamma", param_bytes);
  auto beta = call.optional_buffer(d.beta, "desc.beta", param_bytes);
  cl_mem y = call.buffer(d.y, "desc.y", bytes).mem;
  require_distinct(d.x, "desc.x", d.y, "desc.y");
  require_distinct(d.gamma, "desc.gamma", d.y, "desc.y");
  require_distinct(d.beta, "desc.beta", d.y, "desc.y");
  if (s.count == 0) return;
  Device& device = call.device();
  launch_slices(call, kFamily, "norm_forward", s.rows, s.cols, acc_bytes(device), x,
                gamma ? gamma->mem : x, beta ? beta->mem : x, y, ul(s.rows), ul(s.cols), d.eps,
                static_cast<cl_int>(d.kind == AETHERCL_NORM_RMS), static_cast<cl_int>(bool(gamma)),
                static_cast<cl_int>(bool(beta)));
}

void norm_backward(DeviceCall& call, const aethercl_norm_desc& d) {
  const NormShape s = shape_of(d);
  const std::uint64_t bytes = bytes_of(s.count, 4), param_bytes = bytes_of(s.cols, 4);
  cl_mem x = call.buffer(d.x, "desc.x", bytes).mem;
  auto gamma = call.optional_buffer(d.gamma, "desc.gamma", param_bytes);
  cl_mem dy = call.buffer(d.dy, "desc.dy", bytes).mem;
  auto dx = call.optional_buffer(d.dx, "desc.dx", bytes);
  auto dgamma = call.optional_buffer(d.dgamma, "desc.dgamma", param_bytes);
  auto dbeta = call.optional_buffer(d.dbeta, "desc.dbeta", param_bytes);
  for (auto [out, name] : {std::pair{d.dx, "desc.dx"}, {d.dgamma, "desc.dgamma"},
                           {d.dbeta, "desc.dbeta"}}) {
    require_distinct(out, name, d.x, "desc.x");
    require_distinct(out, name, d.dy, "desc.dy");
    require_distinct(out, name, d.gamma, "desc.gamma");
  }
  require_distinct(d.dx, "desc.dx", d.dgamma, "desc.dgamma");
  require_distinct(d.dx, "desc.dx", d.dbeta, "desc.dbeta");
  require_distinct(d.dgamma, "desc.dgamma", d.dbeta, "desc.dbeta");
  if (!dx && !dgamma && !dbeta) return;
  Device& device = call.device();
  if (s.count == 0) {
    // Parameter gradients over zero rows are zero; with zero columns there is nothing at all.
    if (s.cols > 0) {
      for (auto& view : {dgamma, dbeta}) {
        if (view) launch_linear(call, "fill", "fill_zero", s.cols, view->mem, ul(s.cols));
      }
    }
    return;
  }
  Scratch stats(call, bytes_of(s.rows, 2 * sizeof(float)), "the norm backward's row statistics");
  const cl_int rms = d.kind == AETHERCL_NORM_RMS;
  launch_slices(call, kFamily, "norm_backward_rows", s.rows, s.cols, acc_bytes(device), x,
                gamma ? gamma->mem : x, dy, dx ? dx->mem : stats.mem(), stats.mem(), ul(s.rows),
                ul(s.cols), d.eps, rms, static_cast<cl_int>(bool(gamma)),
                static_cast<cl_int>(bool(dx)));
  if (dgamma || dbeta) {
    launch_linear(call, kFamily, "norm_backward_params", s.cols, x, dy, stats.mem(),
                  dgamma ? dgamma->mem : stats.mem(), dbeta ? dbeta->mem : stats.mem(),
                  ul(s.rows), ul(s.cols), static_cast<cl_int>(bool(dgamma)),
                  static_cast<cl_int>(bool(dbeta)));
  }
}

}  // namespace aethercl::ops::train
