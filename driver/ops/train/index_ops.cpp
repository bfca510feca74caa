// Gather and scatter-add: validate the descriptor (shapes equal but along the axis, buffer sizes,
// aliasing), view both tensors as (outer, length, inner) and launch kernels/index.cl.
#include "ops/train/index_ops.h"

#include "ops/aliasing.h"
#include "ops/train/common.h"

#include <string>

namespace aethercl::ops::train {
namespace {

constexpr const char* kFamily = "index";

struct IndexView {
  std::uint64_t outer = 1, len_a = 1, len_b = 1, inner = 1;
  std::uint64_t count_a() const { return outer * len_a * inner; }
  std::uint64_t count_b() const { return outer * len_b * inner; }
};

IndexView view_of(const aethercl_index_desc& d) {
  if (d.ndim < 1 || d.ndim > 4) {
    fail(Status::kInvalidArgument, "desc.ndim = {} must be 1 to 4", d.ndim);
  }
  if (d.axis < -d.ndim || d.axis >= d.ndim) {
    fail(Status::kInvalidArgument, "desc.axis = {} is outside [-{}, {})", d.axis, d.ndim, d.ndim);
  }
  const int axis = d.axis < 0 ? d.axis + d.ndim : d.axis;
  std::uint64_t a[4] = {1, 1, 1, 1}, b[4] = {1, 1, 1, 1};
  for (int i = 0; i < d.ndim; ++i) {
    a[i] = dim(fmt::format("desc.shape_a[{}]", i).c_str(), d.shape_a[i]);
    b[i] = dim(fmt::format("desc.shape_b[{}]", i).c_str(), d.shape_b[i]);
    if (i != axis && a[i] != b[i]) {
      fail(Status::kInvalidArgument,
           "desc.shape_a[{}] = {} and desc.shape_b[{}] = {} differ outside the axis ({})", i, a[i],
           i, b[i], axis);
    }
  }
  // product() refuses an overflowing total before the partial products are used.
  product("desc.shape_a", {a[0], a[1], a[2], a[3]});
  product("desc.shape_b", {b[0], b[1], b[2], b[3]});
  IndexView v;
  for (int i = 0; i < d.ndim; ++i) {
    if (i < axis) v.outer *= a[i];
    if (i > axis) v.inner *= a[i];
  }
  v.len_a = a[axis];
  v.len_b = b[axis];
  return v;
}

struct IndexBuffers {
  cl_mem x, index, y;
};

IndexBuffers buffers_of(DeviceCall& call, const aethercl_index_desc& d, const IndexView& v) {
  IndexBuffers m{};
  m.x = call.buffer(d.x, "desc.x", bytes_of(v.count_a(), 4)).mem;
  m.index = call.buffer(d.index, "desc.index", bytes_of(v.count_b(), 4)).mem;
  m.y = call.buffer(d.y, "desc.y", bytes_of(v.count_b(), 4)).mem;
  require_distinct(d.x, "desc.x", d.index, "desc.index");
  require_distinct(d.x, "desc.x", d.y, "desc.y");
  return m;
}

}  // namespace

void gather(DeviceCall& call, const aethercl_index_desc& d) {
  const IndexView v = view_of(d);
  const IndexBuffers m = buffers_of(call, d, v);
  require_distinct(d.y, "desc.y", d.index, "desc.index");
  if (v.count_b() == 0) return;
  launch_linear(call, kFamily, "index_gather", v.count_b(), m.x, m.index, m.y, ul(v.outer),
                ul(v.len_a), ul(v.len_b), ul(v.inner));
}

void scatter_add(DeviceCall& call, const aethercl_index_desc& d) {
  const IndexView v = view_of(d);
  const IndexBuffers m = buffers_of(call, d, v);
  if (v.count_b() == 0 || v.count_a() == 0) return;
  launch_linear(call, kFamily, "index_scatter_add", v.outer * v.inner, m.x, m.index, m.y,
                ul(v.outer), ul(v.len_a), ul(v.len_b), ul(v.inner));
}

}  // namespace aethercl::ops::train
