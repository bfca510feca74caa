// Axis reductions: view the tensor as (outer, len, inner); one work-item per output (split into
// partials when there are few outputs), or one work-group per output row when the axis is the
// innermost.
#include "ops/train/reduce_axis.h"

#include "ops/aliasing.h"
#include "ops/train/common.h"

#include <aethercl/driver.h>

#include <algorithm>
#include <fmt/format.h>
#include <optional>
#include <string>

namespace aethercl::ops::train {
namespace {

constexpr const char* kFamily = "reduce_axis";

struct AxisView {
  std::uint64_t outer = 1, len = 1, inner = 1;
  std::uint64_t count() const { return outer * len * inner; }
  std::uint64_t outputs() const { return outer * inner; }
};

void check_op(int op) {
  if (op < AETHERCL_SUM || op > AETHERCL_ARGMIN) {
    fail(Status::kInvalidArgument, "op = {} is not a reduction op (AETHERCL_SUM .. AETHERCL_ARGMIN)",
         op);
  }
}

AxisView view_of(int ndim, const int* shape, int axis) {
  if (ndim < 1 || ndim > 4) fail(Status::kInvalidArgument, "ndim = {} must be 1 to 4", ndim);
  if (shape == nullptr) fail(Status::kInvalidArgument, "shape is NULL");
  if (axis < -ndim || axis >= ndim) {
    fail(Status::kInvalidArgument, "axis = {} is outside [-{}, {})", axis, ndim, ndim);
  }
  const int a = axis < 0 ? axis + ndim : axis;
  std::uint64_t dims[4] = {1, 1, 1, 1};
  for (int d = 0; d < ndim; ++d) {
    const std::string name = fmt::format("shape[{}]", d);
    dims[d] = dim(name.c_str(), shape[d]);
  }
  AxisView v;
  // product() refuses an overflowing total before the partial products are used.
  product("shape", {dims[0], dims[1], dims[2], dims[3]});
  for (int d = 0; d < ndim; ++d) {
    if (d < a) v.outer *= dims[d];
    else if (d == a) v.len = dims[d];
    else v.inner *= dims[d];
  }
  return v;
}

// Pass 1 of the split reduction cuts the axis into chunks when one item per output would leave
// the device mostly idle: fewer outputs than half of `wanted` items (1,024 per compute unit on
// GPUs, 16 on CPUs) and an axis of 64 or more. Spans of at least 32 elements. chunks == 1: no
// split.
struct Split {
  std::uint64_t chunks = 1, span = 0;
};

Split split_of(const Device& device, const AxisView& v) {
  const std::uint64_t per_unit = device.info().kind == DeviceKind::kCpu ? 16 : 1024;
  const std::uint64_t wanted = std::max<std::uint64_t>(1, device.info().compute_units) * per_unit;
  Split s;
  if (v.outputs() * 2 > wanted || v.len < 64) return s;
  const std::uint64_t by_items = (wanted + v.outputs() - 1) / v.outputs();
  const std::uint64_t by_length = (v.len + 31) / 32;
  s.chunks = std::max<std::uint64_t>(1, std::min(by_items, by_length));
  s.span = (v.len + s.chunks - 1) / s.chunks;
  s.chunks = (v.len + s.span - 1) / s.span;  // no empty chunk
  return s;
}

// One item per output (reduce_axis_items), or the split form into partials and their fold. y is
// the float output (SUM/MEAN/MAX/MIN) or the int output (ARGMAX/ARGMIN) by op.
// The partials are an optional workspace: half as many chunks where they do not fit, down to
// two; without room for those, one item per output.
void reduce_items(DeviceCall& call, cl_mem x_mem, cl_mem y_mem, const AxisView& v, cl_int op) {
  Split s = split_of(call.device(), v);
  std::optional<Scratch> sums_slot, values_slot, indices_slot;
  for (; s.chunks >= 2; s.chunks /= 2) {
    s.span = (v.len + s.chunks - 1) / s.chunks;
    const std::uint64_t chunks = (v.len + s.span - 1) / s.span;  // no empty chunk
    const std::uint64_t parts = v.outer * chunks * v.inner;
    const std::string purpose = fmt::format("the partials of {} chunks per output", chunks);
    values_slot.reset();
    if (optional_scratch(sums_slot, call, bytes_of(parts, acc_bytes(call.device())), purpose) &&
        optional_scratch(values_slot, call, bytes_of(parts, sizeof(float)), purpose) &&
        optional_scratch(indices_slot, call, bytes_of(parts, sizeof(cl_int)), purpose)) {
      s.chunks = chunks;
      break;
    }
    sums_slot.reset();
    values_slot.reset();
  }
  if (!indices_slot) {
    launch_linear(call, kFamily, "reduce_axis_items", v.outputs(), x_mem, y_mem, y_mem,
                  ul(v.outer), ul(v.len), ul(v.inner), op);
    return;
  }
  const std::uint64_t parts = v.outer * s.chunks * v.inner;
  const Scratch& sums = *sums_slot;
  const Scratch& values = *values_slot;
  const Scratch& indices = *indices_slot;
  launch_linear(call, kFamily, "reduce_axis_partial", parts, x_mem, sums.mem(), values.mem(),
                indices.mem(), ul(v.outer), ul(v.len), ul(v.inner), ul(s.chunks), ul(s.span), op);
  launch_linear(call, kFamily, "reduce_axis_combine", v.outputs(), sums.mem(), values.mem(),
                indices.mem(), y_mem, y_mem, ul(v.outer), ul(v.len), ul(v.inner), ul(s.chunks),
                op);
}

}  // namespace

void reduce_axis(DeviceCall& call, int op, void* x, void* y, int ndim, const int* shape,
                 int axis) {
  check_op(op);
  const AxisView v = view_of(ndim, shape, axis);
  cl_mem x_mem = call.buffer(x, "x", bytes_of(v.count(), 4)).mem;
  cl_mem y_mem = call.buffer(y, "y", bytes_of(v.outputs(), 4)).mem;
  require_distinct(x, "x", y, "y");
  if (v.outputs() == 0) return;
  if (v.len == 0 && op != AETHERCL_SUM && op != AETHERCL_MEAN) {
    fail(Status::kInvalidArgument, "axis {} is empty: op {} has no identity", axis, op);
  }
  Device& device = call.device();
  const cl_int code = op;
  if (v.inner == 1 && v.len > 1) {
    Kernel& kernel = family_kernel(call, kFamily, "reduce_axis_groups");
    RowGeometry g = row_geometry(device, kernel, v.outer, v.len,
                                 acc_bytes(device) + sizeof(float) + sizeof(cl_int));
    call.launch(kernel, LaunchGeometry::linear(g.global, g.local), x_mem, y_mem, y_mem, ul(v.outer), ul(v.len), code,
                    LocalBytes{g.local * acc_bytes(device)}, LocalBytes{g.local * sizeof(float)},
                    LocalBytes{g.local * sizeof(cl_int)});
    return;
  }
  reduce_items(call, x_mem, y_mem, v, code);
}

void reduce_axis_backward(DeviceCall& call, int op, void* x, void* dy, void* dx, int ndim,
                          const int* shape, int axis) {
  check_op(op);
  if (op == AETHERCL_ARGMAX || op == AETHERCL_ARGMIN) {
    fail(Status::kInvalidArgument, "op = {} (an index reduction) has no gradient", op);
  }
  const AxisView v = view_of(ndim, shape, axis);
  const bool needs_x = op == AETHERCL_MAX || op == AETHERCL_MIN;
  std::optional<BufferView> x_view = needs_x ? call.buffer(x, "x", bytes_of(v.count(), 4))
                                             : call.optional_buffer(x, "x", bytes_of(v.count(), 4));
  cl_mem dy_mem = call.buffer(dy, "dy", bytes_of(v.outputs(), 4)).mem;
  cl_mem dx_mem = call.buffer(dx, "dx", bytes_of(v.count(), 4)).mem;
  require_distinct(dy, "dy", dx, "dx");
  if (needs_x) require_distinct(x, "x", dx, "dx");
  if (v.count() == 0) return;
  if (!needs_x) {
    // picked is not read for SUM and MEAN: dy stands in.
    launch_linear(call, kFamily, "reduce_axis_backward", v.count(), dy_mem, dy_mem, dx_mem,
                  ul(v.outer), ul(v.len), ul(v.inner), static_cast<cl_int>(op));
    return;
  }
  // The index each output picked, then the routing.
  Scratch picked(call, bytes_of(v.outputs(), sizeof(cl_int)), "the index each output picked");
  reduce_items(call, x_view->mem, picked.mem(), v,
               static_cast<cl_int>(op == AETHERCL_MAX ? AETHERCL_ARGMAX : AETHERCL_ARGMIN));
  launch_linear(call, kFamily, "reduce_axis_backward", v.count(), dy_mem, picked.mem(), dx_mem,
                ul(v.outer), ul(v.len), ul(v.inner), static_cast<cl_int>(op));
}

}  // namespace aethercl::ops::train
