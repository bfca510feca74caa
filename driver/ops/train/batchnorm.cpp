// Batch normalisation: validate the descriptor for the mode, then statistics per channel and an
// elementwise pass.
#include "ops/train/batchnorm.h"

#include "ops/aliasing.h"
#include "ops/train/common.h"

#include <optional>

namespace aethercl::ops::train {
namespace {

constexpr const char* kFamily = "batchnorm";

struct BnShape {
  std::uint64_t n, channels, spatial, count;
};

BnShape shape_of(const aethercl_batchnorm_desc& d) {
  BnShape s{dim("desc.n", d.n), dim("desc.channels", d.channels), dim("desc.spatial", d.spatial),
            0};
  s.count = product("desc.n x desc.channels x desc.spatial", {s.n, s.channels, s.spatial});
  if (d.training != 0 && d.training != 1) {
    fail(Status::kInvalidArgument, "desc.training = {} must be 0 or 1", d.training);
  }
  if (!(d.eps > 0.0f) || std::isinf(d.eps)) {
    fail(Status::kInvalidArgument, "desc.eps = {} must be finite and > 0", d.eps);
  }
  require_in_closed("desc.momentum", d.momentum, 0.0f, 1.0f);
  return s;
}

cl_int flag(bool value) { return value ? 1 : 0; }

}  // namespace

void batchnorm_forward(DeviceCall& call, const aethercl_batchnorm_desc& d) {
  const BnShape s = shape_of(d);
  const std::uint64_t bytes = bytes_of(s.count, 4), channel_bytes = bytes_of(s.channels, 4);
  const bool training = d.training == 1;
  cl_mem x = call.buffer(d.x, "desc.x", bytes).mem;
  cl_mem y = call.buffer(d.y, "desc.y", bytes).mem;
  auto gamma = call.optional_buffer(d.gamma, "desc.gamma", channel_bytes);
  auto beta = call.optional_buffer(d.beta, "desc.beta", channel_bytes);
  auto running_mean = training ? call.optional_buffer(d.running_mean, "desc.running_mean", channel_bytes)
                               : call.buffer(d.running_mean, "desc.running_mean", channel_bytes);
  auto running_var = training ? call.optional_buffer(d.running_var, "desc.running_var", channel_bytes)
                              : call.buffer(d.running_var, "desc.running_var", channel_bytes);
  if (bool(running_mean) != bool(running_var)) {
    fail(Status::kInvalidArgument, "desc.running_mean and desc.running_var must both be given "
         "or both be NULL");
  }
  auto save_mean = call.optional_buffer(d.save_mean, "desc.save_mean", channel_bytes);
  auto save_rstd = call.optional_buffer(d.save_rstd, "desc.save_rstd", channel_bytes);
  const void* outputs[] = {d.y, d.save_mean, d.save_rstd, training ? d.running_mean : nullptr,
                           training ? d.running_var : nullptr};
  const char* output_names[] = {"desc.y", "desc.save_mean", "desc.save_rstd", "desc.running_mean",
                                "desc.running_var"};
  const void* inputs[] = {d.x, d.gamma, d.beta};
  const char* input_names[] = {"desc.x", "desc.gamma", "desc.beta"};
  for (int o = 0; o < 5; ++o) {
    for (int i = 0; i < 3; ++i) require_distinct(outputs[o], output_names[o], inputs[i], input_names[i]);
    for (int p = o + 1; p < 5; ++p) require_distinct(outputs[o], output_names[o], outputs[p], output_names[p]);
  }
  if (s.count == 0) return;
  Device& device = call.device();
  if (!training) {
    launch_linear(call, kFamily, "batchnorm_apply", s.count, x, running_mean->mem, running_var->mem,
                  gamma ? gamma->mem : x, beta ? beta->mem : x, y, ul(s.count), ul(s.channels),
                  ul(s.spatial), flag(true), d.eps, flag(bool(gamma)), flag(bool(beta)));
    return;
  }
  const std::uint64_t per_channel = s.n * s.spatial;
  if (per_channel < 2) {
    fail(Status::kInvalidArgument, "training needs more than one value per channel (n x spatial "
         "= {})", per_channel);
  }
  // Statistics go to save_mean / save_rstd, or to scratch when the caller does not keep them.
  std::optional<Scratch> mean_scratch, rstd_scratch;
  if (!save_mean) mean_scratch.emplace(call, channel_bytes, "the batch mean");
  if (!save_rstd) rstd_scratch.emplace(call, channel_bytes, "the batch rstd");
  cl_mem mean_mem = save_mean ? save_mean->mem : mean_scratch->mem();
  cl_mem rstd_mem = save_rstd ? save_rstd->mem : rstd_scratch->mem();
  launch_slices(call, kFamily, "batchnorm_stats", s.channels, per_channel, acc_bytes(device), x,
                mean_mem, rstd_mem, running_mean ? running_mean->mem : mean_mem,
                running_var ? running_var->mem : rstd_mem, ul(s.n), ul(s.channels), ul(s.spatial),
                d.eps, d.momentum, flag(bool(running_mean)));
  launch_linear(call, kFamily, "batchnorm_apply", s.count, x, mean_mem, rstd_mem,
                gamma ? gamma->mem : x, beta ? beta->mem : x, y, ul(s.count), ul(s.channels),
                ul(s.spatial), flag(false), d.eps, flag(bool(gamma)), flag(bool(beta)));
}

void batchnorm_backward(DeviceCall& call, const aethercl_batchnorm_desc& d) {
  const BnShape s = shape_of(d);
  const std::uint64_t bytes = bytes_of(s.count, 4), channel_bytes = bytes_of(s.channels, 4);
  const bool training = d.training == 1;
  cl_mem x = call.buffer(d.x, "desc.x", bytes).mem;
  cl_mem dy = call.buffer(d.dy, "desc.dy", bytes).mem;
  auto gamma = call.optional_buffer(d.gamma, "desc.gamma", channel_bytes);
  BufferView mean = training ? call.buffer(d.save_mean, "desc.save_mean", channel_bytes)
                             : call.buffer(d.running_mean, "desc.running_mean", channel_bytes);
  BufferView stat = training ? call.buffer(d.save_rstd, "desc.save_rstd", channel_bytes)
                             : call.buffer(d.running_var, "desc.running_var", channel_bytes);
  auto dx = call.optional_buffer(d.dx, "desc.dx", bytes);
  auto dgamma = call.optional_buffer(d.dgamma, "desc.dgamma", channel_bytes);
  auto dbeta = call.optional_buffer(d.dbeta, "desc.dbeta", channel_bytes);
  const void* outputs[] = {d.dx, d.dgamma, d.dbeta};
  const char* output_names[] = {"desc.dx", "desc.dgamma", "desc.dbeta"};
  const void* inputs[] = {d.x, d.dy, d.gamma, training ? d.save_mean : d.running_mean,
                          training ? d.save_rstd : d.running_var};
  const char* input_names[] = {"desc.x", "desc.dy", "desc.gamma",
                               training ? "desc.save_mean" : "desc.running_mean",
                               training ? "desc.save_rstd" : "desc.running_var"};
  for (int o = 0; o < 3; ++o) {
    for (int i = 0; i < 5; ++i) require_distinct(outputs[o], output_names[o], inputs[i], input_names[i]);
    for (int p = o + 1; p < 3; ++p) require_distinct(outputs[o], output_names[o], outputs[p], output_names[p]);
  }
  if (!dx && !dgamma && !dbeta) return;
  Device& device = call.device();
  if (s.count == 0) {
    if (s.channels > 0) {
      for (auto& view : {dgamma, dbeta}) {
        if (view) launch_linear(call, "fill", "fill_zero", s.channels, view->mem, ul(s.channels));
      }
    }
    return;
  }
  const cl_int from_var = flag(!training);
  Scratch sums(call, bytes_of(s.channels, 2 * sizeof(float)), "the batch-norm backward's sums");
  if (training || dgamma || dbeta) {
    launch_slices(call, kFamily, "batchnorm_backward_sums", s.channels, s.n * s.spatial,
                  acc_bytes(device), x, dy, mean.mem, stat.mem, sums.mem(),
                  dgamma ? dgamma->mem : sums.mem(), dbeta ? dbeta->mem : sums.mem(), ul(s.n),
                  ul(s.channels), ul(s.spatial), from_var, d.eps, flag(bool(dgamma)),
                  flag(bool(dbeta)));
  }
  if (dx) {
    launch_linear(call, kFamily, "batchnorm_backward_dx", s.count, x, dy, mean.mem, stat.mem,
                  gamma ? gamma->mem : x, sums.mem(), dx->mem, ul(s.count), ul(s.channels),
                  ul(s.spatial), flag(training), from_var, d.eps, flag(bool(gamma)));
  }
}

}  // namespace aethercl::ops::train
