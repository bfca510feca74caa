// Random fills and dropout: validate, then launch one work-item per Philox block (four values).
#include "ops/train/rng.h"

#include "ops/aliasing.h"
#include "ops/train/common.h"

#include <aethercl/driver.h>

namespace aethercl::ops::train {
namespace {

constexpr const char* kFamily = "rng";

// Blocks covering positions [offset, offset + count); refuses a range past 2^64.
std::uint64_t blocks_of(std::uint64_t count, std::uint64_t offset) {
  if (count - 1 > UINT64_MAX - offset) {
    fail(Status::kInvalidArgument, "offset {} + count {} runs past the end of the 2^64 stream",
         offset, count);
  }
  return (offset + count - 1) / 4 - offset / 4 + 1;
}

float dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

}  // namespace

void rng_fill(DeviceCall& call, void* buffer, std::size_t count, int distribution, float a,
              float b, std::uint64_t seed, std::uint64_t offset) {
  if (distribution < AETHERCL_RNG_BITS || distribution > AETHERCL_RNG_NORMAL) {
    fail(Status::kInvalidArgument, "distribution = {} is not an aethercl_rng_distribution",
         distribution);
  }
  if (distribution != AETHERCL_RNG_BITS) {
    require_finite("a", a);
    require_finite("b", b);
    if (distribution == AETHERCL_RNG_UNIFORM && !(a <= b)) {
      fail(Status::kInvalidArgument, "uniform range a = {} > b = {}", a, b);
    }
    if (distribution == AETHERCL_RNG_NORMAL && !(b >= 0.0f)) {
      fail(Status::kInvalidArgument, "normal std b = {} is negative", b);
    }
  }
  cl_mem mem = call.buffer(buffer, "buffer", bytes_of(count, 4)).mem;
  if (count == 0) return;
  const std::uint64_t blocks = blocks_of(count, offset);
  switch (distribution) {
    case AETHERCL_RNG_BITS:
      launch_linear(call, kFamily, "rng_bits", blocks, mem, ul(count), ul(seed), ul(offset));
      break;
    case AETHERCL_RNG_UNIFORM:
      launch_linear(call, kFamily, "rng_uniform", blocks, mem, ul(count), ul(seed), ul(offset),
                    a, b);
      break;
    default:
      launch_linear(call, kFamily, "rng_normal", blocks, mem, ul(count), ul(seed), ul(offset),
                    a, b);
      break;
  }
}

void dropout(DeviceCall& call, void* x, void* y, void* mask, std::size_t count, float p,
             std::uint64_t seed, std::uint64_t offset) {
  require_in_closed("p", p, 0.0f, 1.0f);
  const std::uint64_t bytes = bytes_of(count, sizeof(float));
  cl_mem x_mem = call.buffer(x, "x", bytes).mem;
  cl_mem y_mem = call.buffer(y, "y", bytes).mem;
  auto mask_view = call.optional_buffer(mask, "mask", count);
  require_distinct(mask, "mask", x, "x");
  require_distinct(mask, "mask", y, "y");
  if (count == 0) return;
  const std::uint64_t blocks = blocks_of(count, offset);
  // A kernel argument cannot be NULL portably: without a mask, y stands in and is never written
  // through it (has_mask = 0).
  cl_mem mask_mem = mask_view ? mask_view->mem : y_mem;
  launch_linear(call, kFamily, "rng_dropout", blocks, x_mem, y_mem, mask_mem,
                static_cast<cl_int>(mask_view ? 1 : 0), ul(count), p, dropout_scale(p), ul(seed),
                ul(offset));
}

void dropout_backward(DeviceCall& call, void* dy, void* mask, void* dx, std::size_t count,
                      float p) {
  require_in_closed("p", p, 0.0f, 1.0f);
  const std::uint64_t bytes = bytes_of(count, sizeof(float));
  cl_mem dy_mem = call.buffer(dy, "dy", bytes).mem;
  cl_mem mask_mem = call.buffer(mask, "mask", count).mem;
  cl_mem dx_mem = call.buffer(dx, "dx", bytes).mem;
  require_distinct(mask, "mask", dx, "dx");
  if (count == 0) return;
  // One item per four elements (kernels/rng.cl).
  launch_linear(call, kFamily, "rng_dropout_backward", (count + 3) / 4, dy_mem, mask_mem, dx_mem,
                ul(count), dropout_scale(p));
}

}  // namespace aethercl::ops::train
