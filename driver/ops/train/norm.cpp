// Row normalisation: validation of the descriptor, then a row kernel (and a column kernel for
// dgamma / dbeta in the backward, from per-row statistics kept in scratch memory).
#include "ops/train/norm.h"

#include "ops/aliasing.h"
#include "ops/train/common.h"
#include "ops/train/operand_storage.h"
#include "ops/typed_memory.h"

#include <utility>

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

constexpr const char* kMaster = "a float32 master (gamma, beta and their gradients stay float32)";

// The roles of kernels/norm.cl. A direction names the operands it lacks in the format of their
// partners (dy as y, dx as x; y as dy), so training whose gradients keep their activations'
// formats builds one program for both directions. The forward's res and the backward's dx_copy
// name their formats apart (only where one is 16-bit), so the programs without them are the
// version-3 ones.
FamilyVariant family_of(Storage x, Storage y, Storage dy, Storage dx, Storage res = Storage::kF32,
                        Storage dx_copy = Storage::kF32) {
  std::string options = storage_options({{"NORM_X", x}, {"NORM_Y", y}, {"NORM_DY", dy},
                                         {"NORM_DX", dx}});
  const std::string extra = storage_options({{"NORM_RES", res}, {"NORM_DXC", dx_copy}});
  if (!options.empty() && !extra.empty()) options += ' ';
  return {kFamily, options + extra};
}

// Elements per item of kernels/norm.cl's register forms (NORM_QUADS quads).
constexpr std::uint64_t kRegisterElements = 16;

// acc_t sums the register forms reduce in one pass (kernels/norm.cl's group_sums: at most 4).
constexpr std::size_t kRegisterSums = 4;

// Launches the row kernel `name`, or its register form `name`_quads where the row is whole quads
// that the group holds in registers; args then the local scratch: one acc_t per item, or
// kRegisterSums for the register forms.
template <typename... Args>
void launch_rows(DeviceCall& call, const FamilyVariant& family, const std::string& name,
                 const NormShape& s, const Args&... args) {
  Device& device = call.device();
  std::size_t scratch = kRegisterSums * acc_bytes(device);
  Kernel& quads = named_kernel(call, family, (name + "_quads").c_str());
  RowGeometry geometry = row_geometry(device, quads, s.rows, s.cols, scratch, true);
  Kernel* kernel = &quads;
  if (s.cols % 4 != 0 || s.cols > geometry.local * kRegisterElements) {
    kernel = &named_kernel(call, family, name.c_str());
    scratch = acc_bytes(device);
    geometry = row_geometry(device, *kernel, s.rows, s.cols, scratch);
  }
  call.launch(*kernel, LaunchGeometry::linear(geometry.global, geometry.local), args...,
              LocalBytes{geometry.local * scratch});
}

}  // namespace

void norm_forward(DeviceCall& call, const aethercl_norm_desc& d) {
  const NormShape s = shape_of(d);
  const Operand x = operand(call, d.x, "desc.x", s.count);
  auto gamma = float32_operand(call, d.gamma, "desc.gamma", s.cols, kMaster, true);
  auto beta = float32_operand(call, d.beta, "desc.beta", s.cols, kMaster, true);
  const Operand y = operand(call, d.y, "desc.y", s.count);
  auto res = optional_operand(call, d.res, "desc.res", s.count);
  auto sum = optional_operand(call, d.sum, "desc.sum", s.count);
  require_distinct(d.x, "desc.x", d.y, "desc.y");
  require_distinct(d.gamma, "desc.gamma", d.y, "desc.y");
  require_distinct(d.beta, "desc.beta", d.y, "desc.y");
  if (bool(res) != bool(sum)) {
    fail(Status::kInvalidArgument, "desc.{} is set but desc.{} is NULL: the residual add takes "
         "both", res ? "res" : "sum", res ? "sum" : "res");
  }
  if (sum) {
    if (sum->storage != x.storage) {
      fail(Status::kInvalidArgument, "desc.sum is stored as {} but desc.x as {}: the sum is "
           "written in x's format", dtype_constant_name(static_cast<int>(sum->storage)),
           dtype_constant_name(static_cast<int>(x.storage)));
    }
    for (auto [other, name] : {std::pair{d.x, "desc.x"}, {d.res, "desc.res"}, {d.y, "desc.y"},
                               {d.gamma, "desc.gamma"}, {d.beta, "desc.beta"}}) {
      require_distinct(d.sum, "desc.sum", other, name);
    }
    require_distinct(d.res, "desc.res", d.y, "desc.y");
  }
  if (s.count == 0) return;
  cl_mem x_mem = x.view.mem;
  const Storage res_storage = res ? res->storage : Storage::kF32;
  launch_rows(call, family_of(x.storage, y.storage, y.storage, x.storage, res_storage),
              "norm_forward", s, x_mem, gamma ? gamma->mem : x_mem, beta ? beta->mem : x_mem,
              y.view.mem, ul(s.rows), ul(s.cols), d.eps,
              static_cast<cl_int>(d.kind == AETHERCL_NORM_RMS), static_cast<cl_int>(bool(gamma)),
              static_cast<cl_int>(bool(beta)), res ? res->view.mem : x_mem,
              sum ? sum->view.mem : x_mem, static_cast<cl_int>(bool(res)));
}

void norm_backward(DeviceCall& call, const aethercl_norm_desc& d) {
  const NormShape s = shape_of(d);
  const Operand x_op = operand(call, d.x, "desc.x", s.count);
  auto gamma = float32_operand(call, d.gamma, "desc.gamma", s.cols, kMaster, true);
  const Operand dy_op = operand(call, d.dy, "desc.dy", s.count);
  auto dx_op = optional_operand(call, d.dx, "desc.dx", s.count);
  auto dgamma = float32_operand(call, d.dgamma, "desc.dgamma", s.cols, kMaster, true);
  auto dbeta = float32_operand(call, d.dbeta, "desc.dbeta", s.cols, kMaster, true);
  auto dres_op = optional_operand(call, d.dres, "desc.dres", s.count);
  auto copy_op = optional_operand(call, d.dx_copy, "desc.dx_copy", s.count);
  cl_mem x = x_op.view.mem, dy = dy_op.view.mem;
  std::optional<BufferView> dx;
  if (dx_op) dx = dx_op->view;
  for (auto [out, name] : {std::pair{d.dx, "desc.dx"}, {d.dgamma, "desc.dgamma"},
                           {d.dbeta, "desc.dbeta"}}) {
    require_distinct(out, name, d.x, "desc.x");
    require_distinct(out, name, d.dy, "desc.dy");
    require_distinct(out, name, d.gamma, "desc.gamma");
  }
  require_distinct(d.dx, "desc.dx", d.dgamma, "desc.dgamma");
  require_distinct(d.dx, "desc.dx", d.dbeta, "desc.dbeta");
  require_distinct(d.dgamma, "desc.dgamma", d.dbeta, "desc.dbeta");
  if (dres_op) {  // added to dx, possibly in place; never another operand
    if (!dx_op) fail(Status::kInvalidArgument, "desc.dres is set but desc.dx is NULL");
    if (dres_op->storage != dx_op->storage) {
      fail(Status::kInvalidArgument, "desc.dres is stored as {} but desc.dx as {}: dres is added "
           "to dx in dx's format", dtype_constant_name(static_cast<int>(dres_op->storage)),
           dtype_constant_name(static_cast<int>(dx_op->storage)));
    }
    for (auto [other, name] : {std::pair{d.x, "desc.x"}, {d.dy, "desc.dy"},
                               {d.gamma, "desc.gamma"}, {d.dgamma, "desc.dgamma"},
                               {d.dbeta, "desc.dbeta"}}) {
      require_distinct(d.dres, "desc.dres", other, name);
    }
  }
  if (copy_op) {  // a second store of dx's values, apart from everything else
    if (!dx_op) fail(Status::kInvalidArgument, "desc.dx_copy is set but desc.dx is NULL");
    for (auto [other, name] : {std::pair{d.x, "desc.x"}, {d.dy, "desc.dy"},
                               {d.gamma, "desc.gamma"}, {d.dx, "desc.dx"},
                               {d.dgamma, "desc.dgamma"}, {d.dbeta, "desc.dbeta"},
                               {d.dres, "desc.dres"}}) {
      require_distinct(d.dx_copy, "desc.dx_copy", other, name);
    }
  }
  if (!dx && !dgamma && !dbeta) return;
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
  const Storage dx_storage = dx_op ? dx_op->storage : x_op.storage;
  const Storage copy_storage = copy_op ? copy_op->storage : Storage::kF32;
  const FamilyVariant family = family_of(x_op.storage, dy_op.storage, dy_op.storage, dx_storage,
                                         Storage::kF32, copy_storage);
  launch_rows(call, family, "norm_backward_rows", s, x, gamma ? gamma->mem : x, dy,
              dx ? dx->mem : stats.mem(), dres_op ? dres_op->view.mem : x, stats.mem(),
              ul(s.rows), ul(s.cols), d.eps, rms, static_cast<cl_int>(bool(gamma)),
              static_cast<cl_int>(bool(dx)), static_cast<cl_int>(bool(dres_op)),
              copy_op ? copy_op->view.mem : stats.mem(), static_cast<cl_int>(bool(copy_op)));
  if (dgamma || dbeta) {
    launch_linear(call, family, "norm_backward_params", s.cols, x, dy, stats.mem(),
                  dgamma ? dgamma->mem : stats.mem(), dbeta ? dbeta->mem : stats.mem(),
                  ul(s.rows), ul(s.cols), static_cast<cl_int>(bool(dgamma)),
                  static_cast<cl_int>(bool(dbeta)));
  }
}

}  // namespace aethercl::ops::train
