// Losses: validate, then chunked partial sums and an ordered finish on the device.
#include "ops/train/losses.h"

#include "ops/aliasing.h"
#include "ops/train/common.h"
#include "ops/train/operand_storage.h"
#include "ops/train/optim.h"

#include <optional>

namespace aethercl::ops::train {
namespace {

constexpr const char* kFamily = "losses";

cl_int flag(bool value) { return value ? 1 : 0; }

void finish(DeviceCall& call, cl_mem partials, std::uint64_t chunks, std::uint64_t divisor,
            cl_mem counts, bool use_counts, cl_mem out) {
  launch_single(call, kFamily, "losses_finish_sum", partials, ul(chunks), ul(divisor), counts,
                flag(use_counts), out);
}

}  // namespace

void mse_loss(DeviceCall& call, void* pred, void* target, void* loss, void* grad,
              std::size_t count, int reduction) {
  if (reduction != AETHERCL_SUM && reduction != AETHERCL_MEAN) {
    fail(Status::kInvalidArgument, "reduction = {} must be AETHERCL_SUM or AETHERCL_MEAN",
         reduction);
  }
  const std::uint64_t bytes = bytes_of(count, 4);
  cl_mem p = call.buffer(pred, "pred", bytes).mem;
  cl_mem t = call.buffer(target, "target", bytes).mem;
  auto loss_view = call.optional_buffer(loss, "loss", sizeof(float));
  auto grad_view = call.optional_buffer(grad, "grad", bytes);
  for (const void* out : {loss, grad}) {
    const char* name = out == loss ? "loss" : "grad";
    require_distinct(out, name, pred, "pred");
    require_distinct(out, name, target, "target");
  }
  require_distinct(loss, "loss", grad, "grad");
  if (count == 0 || (!loss_view && !grad_view)) return;
  Device& device = call.device();
  const Chunks c = chunks_of(count);
  Scratch partials(call, bytes_of(c.chunks, acc_bytes(device)), "the loss's partial sums");
  const double scale = reduction == AETHERCL_MEAN ? 2.0 / static_cast<double>(count) : 2.0;
  launch_slices(call, kFamily, "losses_mse_chunks", c.chunks, c.chunk, acc_bytes(device), p, t,
                grad_view ? grad_view->mem : p, flag(bool(grad_view)), static_cast<float>(scale),
                ul(count), ul(c.chunk), ul(c.chunks), partials.mem());
  if (loss_view) {
    finish(call, partials.mem(), c.chunks, reduction == AETHERCL_MEAN ? count : 1,
           partials.mem(), false, loss_view->mem);
  }
}

void cross_entropy(DeviceCall& call, const aethercl_cross_entropy_desc& d) {
  const std::uint64_t rows = dim("desc.rows", d.rows), classes = dim("desc.classes", d.classes);
  const std::uint64_t count = product("desc.rows x desc.classes", {rows, classes});
  require_in_closed("desc.label_smoothing", d.label_smoothing, 0.0f, 1.0f);
  if (d.reduction != AETHERCL_SUM && d.reduction != AETHERCL_MEAN &&
      d.reduction != AETHERCL_NO_REDUCTION) {
    fail(Status::kInvalidArgument, "desc.reduction = {} must be AETHERCL_SUM, AETHERCL_MEAN or "
         "AETHERCL_NO_REDUCTION", d.reduction);
  }
  const bool per_row = d.reduction == AETHERCL_NO_REDUCTION;
  const Operand logits_op = operand(call, d.logits, "desc.logits", count);
  cl_mem logits = logits_op.view.mem;
  cl_mem targets = call.buffer(d.targets, "desc.targets", bytes_of(rows, 4)).mem;
  auto loss = float32_operand(call, d.loss, "desc.loss", per_row ? rows : 1,
                              "the loss (always float32)", true);
  auto grad_op = optional_operand(call, d.grad, "desc.grad", count);
  std::optional<BufferView> grad;
  if (grad_op) grad = grad_op->view;
  for (const void* out : {d.loss, d.grad}) {
    const char* name = out == d.loss ? "desc.loss" : "desc.grad";
    require_distinct(out, name, d.logits, "desc.logits");
    require_distinct(out, name, d.targets, "desc.targets");
  }
  require_distinct(d.loss, "desc.loss", d.grad, "desc.grad");
  if (!loss && !grad) return;
  Device& device = call.device();
  if (rows == 0) {
    // No rows: SUM is 0, MEAN is 0 / 0.
    if (loss && !per_row) {
      Scratch zero(call, acc_bytes(device), "an empty sum");
      finish(call, zero.mem(), 0, d.reduction == AETHERCL_MEAN ? 0 : 1, zero.mem(), false,
             loss->mem);
    }
    return;
  }
  if (classes == 0) fail(Status::kInvalidArgument, "desc.classes = 0 with {} rows", rows);
  const bool mean = d.reduction == AETHERCL_MEAN;
  const Chunks c = chunks_of(rows);
  Scratch partials(call, bytes_of(c.chunks, acc_bytes(device)), "the loss's partial sums");
  Scratch counts(call, acc_bytes(device), "the count of valid targets");
  if (mean) {
    launch_slices(call, kFamily, "losses_count_valid_chunks", c.chunks, c.chunk, acc_bytes(device),
                  targets, ul(rows), static_cast<cl_int>(d.ignore_index), ul(c.chunk),
                  ul(c.chunks), partials.mem());
    launch_single(call, kFamily, "losses_finish_count", partials.mem(), ul(c.chunks),
                  counts.mem());
  }
  std::optional<Scratch> row_scratch;
  cl_mem row_loss;
  if (per_row && loss) {
    row_loss = loss->mem;
  } else {
    row_scratch.emplace(call, bytes_of(rows, 4), "the per-row losses");
    row_loss = row_scratch->mem();
  }
  // The logits' and grad's formats (a missing grad named as the logits) pick the program; both
  // float32 is the plain build.
  const std::string options = storage_options(
      {{"CE_LOGITS", logits_op.storage},
       {"CE_GRAD", grad_op ? grad_op->storage : logits_op.storage}});
  Kernel& kernel = options.empty()
                       ? family_kernel(call, kFamily, "losses_cross_entropy_rows")
                       : named_kernel(call, FamilyVariant{kFamily, options},
                                      "losses_cross_entropy_rows");
  RowGeometry g = row_geometry(device, kernel, rows, classes, acc_bytes(device) + sizeof(float));
  call.launch(kernel, LaunchGeometry::linear(g.global, g.local), logits, targets, row_loss, grad ? grad->mem : row_loss,
                  flag(bool(grad)), ul(rows), ul(classes), static_cast<cl_int>(d.ignore_index),
                  d.label_smoothing, counts.mem(), flag(mean),
                  LocalBytes{g.local * acc_bytes(device)}, LocalBytes{g.local * sizeof(float)});

  if (loss && !per_row) {
    launch_slices(call, kFamily, "losses_sum_chunks", c.chunks, c.chunk, acc_bytes(device), row_loss,
                  ul(rows), ul(c.chunk), ul(c.chunks), partials.mem());
    finish(call, partials.mem(), c.chunks, 1, counts.mem(), mean, loss->mem);
  }
}

}  // namespace aethercl::ops::train
