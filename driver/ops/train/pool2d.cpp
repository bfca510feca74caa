// Pooling: validate the window geometry, then one work-item per output (forward) or per input
// element (backward).
#include "ops/train/pool2d.h"

#include "ops/aliasing.h"
#include "ops/train/common.h"

namespace aethercl::ops::train {
namespace {

constexpr const char* kFamily = "pool";

// Mirrors pool_geometry in kernels/pool.cl.
struct PoolGeometry {
  cl_ulong h, w, kh, kw, sh, sw, ph, pw, oh, ow;
};

struct PoolShape {
  std::uint64_t planes;
  PoolGeometry g;
  std::uint64_t x_count, y_count;
};

std::uint64_t pooled(const char* pad_name, std::uint64_t in, std::uint64_t k, std::uint64_t s,
                     std::uint64_t pad) {
  if (2 * pad > k) {
    fail(Status::kInvalidArgument, "{} = {} exceeds half the kernel size {}", pad_name, pad, k);
  }
  if (in == 0) fail(Status::kInvalidArgument, "an empty input plane has only padding in its windows");
  if (in + 2 * pad < k) {
    fail(Status::kInvalidArgument, "the kernel ({}) exceeds the padded input ({})", k,
         in + 2 * pad);
  }
  return (in + 2 * pad - k) / s + 1;
}

PoolShape shape_of(const aethercl_pool2d_desc& d) {
  if (d.kind != AETHERCL_POOL_MAX && d.kind != AETHERCL_POOL_AVG) {
    fail(Status::kInvalidArgument, "desc.kind = {} is not an aethercl_pool_kind", d.kind);
  }
  if (d.count_include_pad != 0 && d.count_include_pad != 1) {
    fail(Status::kInvalidArgument, "desc.count_include_pad = {} must be 0 or 1",
         d.count_include_pad);
  }
  PoolShape s{};
  const std::uint64_t n = dim("desc.n", d.n), channels = dim("desc.channels", d.channels);
  PoolGeometry& g = s.g;
  g.h = dim("desc.h", d.h);
  g.w = dim("desc.w", d.w);
  g.kh = positive("desc.kernel_h", d.kernel_h);
  g.kw = positive("desc.kernel_w", d.kernel_w);
  g.sh = positive("desc.stride_h", d.stride_h);
  g.sw = positive("desc.stride_w", d.stride_w);
  g.ph = dim("desc.pad_h", d.pad_h);
  g.pw = dim("desc.pad_w", d.pad_w);
  g.oh = pooled("desc.pad_h", g.h, g.kh, g.sh, g.ph);
  g.ow = pooled("desc.pad_w", g.w, g.kw, g.sw, g.pw);
  s.planes = product("desc.n x desc.channels", {n, channels});
  s.x_count = product("desc.x", {n, channels, g.h, g.w});
  s.y_count = product("desc.y", {n, channels, g.oh, g.ow});
  if (g.h * g.w > static_cast<std::uint64_t>(INT32_MAX)) {
    fail(Status::kInvalidArgument, "desc.h x desc.w = {} exceeds the int32 index range", g.h * g.w);
  }
  return s;
}

}  // namespace

void pool2d_forward(DeviceCall& call, const aethercl_pool2d_desc& d) {
  const PoolShape s = shape_of(d);
  const bool max = d.kind == AETHERCL_POOL_MAX;
  cl_mem x = call.buffer(d.x, "desc.x", bytes_of(s.x_count, 4)).mem;
  cl_mem y = call.buffer(d.y, "desc.y", bytes_of(s.y_count, 4)).mem;
  auto indices = max ? call.optional_buffer(d.indices, "desc.indices", bytes_of(s.y_count, 4))
                     : std::optional<BufferView>();
  require_distinct(d.y, "desc.y", d.x, "desc.x");
  if (max) {
    require_distinct(d.indices, "desc.indices", d.x, "desc.x");
    require_distinct(d.indices, "desc.indices", d.y, "desc.y");
  }
  if (s.y_count == 0) return;
  if (max) {
    launch_linear(call, kFamily, "pool_max_forward", s.y_count, x, y, indices ? indices->mem : y,
                  static_cast<cl_int>(bool(indices)), ul(s.planes), s.g);
  } else {
    launch_linear(call, kFamily, "pool_avg_forward", s.y_count, x, y, ul(s.planes), s.g,
                  static_cast<cl_int>(d.count_include_pad));
  }
}

void pool2d_backward(DeviceCall& call, const aethercl_pool2d_desc& d) {
  const PoolShape s = shape_of(d);
  const bool max = d.kind == AETHERCL_POOL_MAX;
  cl_mem dy = call.buffer(d.dy, "desc.dy", bytes_of(s.y_count, 4)).mem;
  auto indices = max ? std::optional(call.buffer(d.indices, "desc.indices", bytes_of(s.y_count, 4)))
                     : std::optional<BufferView>();
  cl_mem dx = call.buffer(d.dx, "desc.dx", bytes_of(s.x_count, 4)).mem;
  require_distinct(d.dx, "desc.dx", d.dy, "desc.dy");
  if (max) require_distinct(d.dx, "desc.dx", d.indices, "desc.indices");
  if (s.x_count == 0) return;
  if (max) {
    launch_linear(call, kFamily, "pool_max_backward", s.x_count, dy, indices->mem, dx,
                  ul(s.planes), s.g);
  } else {
    launch_linear(call, kFamily, "pool_avg_backward", s.x_count, dy, dx, ul(s.planes), s.g,
                  static_cast<cl_int>(d.count_include_pad));
  }
}

}  // namespace aethercl::ops::train
