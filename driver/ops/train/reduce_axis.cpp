// Axis reductions: view the tensor as (outer, len, inner); one work-group per output row when the
// axis is the innermost, otherwise tiles of inner positions by lanes along the axis (cut into
// chunks of the axis with a fold when the tiles alone would leave the device idle; plans in
// ops/column_tiles.h). CPU devices take SUM, MEAN, MAX and MIN in their lanes forms: a row per
// work-item, or blocks of inner positions per work-item (ops/column_lanes.h).
#include "ops/train/reduce_axis.h"

#include "ops/aliasing.h"
#include "ops/column_lanes.h"
#include "ops/column_tiles.h"
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

// The ops the CPU forms take (the index reductions keep the general forms).
bool lanes_op(cl_int op) {
  return op == AETHERCL_SUM || op == AETHERCL_MEAN || op == AETHERCL_MAX || op == AETHERCL_MIN;
}

// reduce_axis_lanes (and with chunks its fold) over inner > 1, len > 0.
void reduce_blocks(DeviceCall& call, cl_mem x_mem, cl_mem y_mem, const AxisView& v, cl_int op) {
  Device& device = call.device();
  Kernel& kernel = family_kernel(call, kFamily, "reduce_axis_lanes");
  ColumnLanes plan = column_lanes(device, v.outer, v.len, v.inner);
  const bool summing = op == AETHERCL_SUM || op == AETHERCL_MEAN;
  std::optional<Scratch> parts;
  if (plan.chunks > 1) {
    // The chunks' partials (sums or values) are an optional workspace: where they do not fit,
    // one chunk of the whole axis.
    const std::uint64_t count = v.outer * plan.chunks * v.inner;
    if (!optional_scratch(parts, call, bytes_of(count, summing ? acc_bytes(device) : 4),
                          fmt::format("the partials of {} chunks of the axis", plan.chunks))) {
      plan.chunks = 1;
      plan.span = v.len;
    }
  }
  // Without chunks the partials are not written: y stands in for them.
  cl_mem partials = parts ? parts->mem() : y_mem;
  call.launch(kernel, plan.geometry(), x_mem, y_mem, partials, partials, ul(v.outer), ul(v.len),
              ul(v.inner), ul(plan.chunks), ul(plan.span), op);
  if (!parts) return;
  launch_linear(call, kFamily, "reduce_axis_lanes_fold", v.outputs(), partials, partials, y_mem,
                ul(v.outer), ul(v.len), ul(v.inner), ul(plan.chunks), op);
}

// reduce_axis_tiles (and with chunks its fold) over inner > 1. y is the float output
// (SUM/MEAN/MAX/MIN) or the int output (ARGMAX/ARGMIN) by op.
void reduce_tiles(DeviceCall& call, cl_mem x_mem, cl_mem y_mem, const AxisView& v, cl_int op) {
  Device& device = call.device();
  Kernel& kernel = family_kernel(call, kFamily, "reduce_axis_tiles");
  ColumnTiles plan = column_tiles(device, kernel, v.outer, v.len, v.inner);
  const std::size_t acc4 = 4 * acc_bytes(device);
  const cl_int aligned = v.inner % 4 == 0 ? 1 : 0;
  std::optional<Scratch> sums, values, indices;
  if (plan.chunks > 1) {
    // The chunks' partials are an optional workspace: where they do not fit, one chunk of the
    // whole axis.
    const std::uint64_t parts = v.outer * plan.chunks * v.inner;
    const std::string purpose = fmt::format("the partials of {} chunks of the axis", plan.chunks);
    if (!optional_scratch(sums, call, bytes_of(parts, acc_bytes(device)), purpose) ||
        !optional_scratch(values, call, bytes_of(parts, sizeof(float)), purpose) ||
        !optional_scratch(indices, call, bytes_of(parts, sizeof(cl_int)), purpose)) {
      sums.reset();
      values.reset();
      indices.reset();
      plan.chunks = 1;
      plan.span = v.len;
    }
  }
  // Without chunks the partials are not written: y stands in for them.
  call.launch(kernel, capped_groups(device, plan.tiles * plan.chunks * v.outer, plan.local()),
              x_mem, y_mem, y_mem, sums ? sums->mem() : y_mem, values ? values->mem() : y_mem,
              indices ? indices->mem() : y_mem, ul(v.outer), ul(v.len), ul(v.inner),
              ul(plan.tiles), ul(plan.chunks), ul(plan.span), static_cast<cl_uint>(plan.cx),
              aligned, op, LocalBytes{plan.local() * acc4},
              LocalBytes{plan.local() * 4 * sizeof(float)},
              LocalBytes{plan.local() * 4 * sizeof(cl_int)});
  if (plan.chunks == 1) return;
  Kernel& fold = family_kernel(call, kFamily, "reduce_axis_tiles_fold");
  const ColumnTiles folding = fold_tiles(device, fold, plan, v.inner);
  const std::size_t local = folding.local();
  call.launch(fold, capped_groups(device, folding.tiles * v.outer, local), sums->mem(),
              values->mem(), indices->mem(), y_mem, y_mem, ul(v.outer), ul(v.len), ul(v.inner),
              ul(folding.tiles), ul(plan.chunks), static_cast<cl_uint>(folding.cx), op,
              LocalBytes{local * acc4}, LocalBytes{local * 4 * sizeof(float)},
              LocalBytes{local * 4 * sizeof(cl_int)});
}

// One item per output (reduce_axis_items: an empty axis, whose sums are 0 and means NaN), or the
// tiles. y is the float output (SUM/MEAN/MAX/MIN) or the int output (ARGMAX/ARGMIN) by op.
void reduce_items(DeviceCall& call, cl_mem x_mem, cl_mem y_mem, const AxisView& v, cl_int op) {
  if (v.len > 0 && v.inner > 1 && cpu_kernel_forms(call.device()) && lanes_op(op)) {
    reduce_blocks(call, x_mem, y_mem, v, op);
    return;
  }
  if (v.len > 0 && v.inner > 1) {
    reduce_tiles(call, x_mem, y_mem, v, op);
    return;
  }
  launch_linear(call, kFamily, "reduce_axis_items", v.outputs(), x_mem, y_mem, y_mem, ul(v.outer),
                ul(v.len), ul(v.inner), op);
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
  if (v.inner == 1 && v.len > 1 && row_lanes_forms(device) && lanes_op(code)) {
    launch_linear(call, kFamily, "reduce_axis_rows_lanes", v.outer, x_mem, y_mem, ul(v.outer),
                  ul(v.len), code);
    return;
  }
  if (v.inner == 1 && v.len > 1) {
    Kernel& kernel = family_kernel(call, kFamily, "reduce_axis_groups");
    // Rows of a multiple of 4 are read as float4s: the group is sized for len / 4 lanes with
    // several float4s per item (the register-row sizing of the row kernels).
    const bool aligned = v.len % 4 == 0;
    RowGeometry g = row_geometry(device, kernel, v.outer, aligned ? v.len / 4 : v.len,
                                 acc_bytes(device) + sizeof(float) + sizeof(cl_int), aligned);
    call.launch(kernel, LaunchGeometry::linear(g.global, g.local), x_mem, y_mem, y_mem,
                ul(v.outer), ul(v.len), code, static_cast<cl_int>(aligned ? 1 : 0),
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
