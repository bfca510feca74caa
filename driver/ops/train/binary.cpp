// Broadcast binary ops: derive the output shape, pick the cheapest addressing for each operand,
// and for the backward the strides and reduced dimensions of each gradient.
#include "ops/train/binary.h"

#include "ops/aliasing.h"
#include "ops/reduce.h"
#include "ops/train/common.h"
#include "ops/train/operand_storage.h"

#include <array>
#include <string>

namespace aethercl::ops::train {
namespace {

constexpr const char* kFamily = "binary";
// Kernel suffixes (OpenCL builtin names such as max are avoided).
constexpr const char* kOpNames[] = {"add", "sub", "mul", "div", "maximum", "minimum", "power"};

using Shape = std::array<std::uint64_t, 4>;

const char* op_name(int op) {
  if (op < AETHERCL_BINARY_ADD || op > AETHERCL_BINARY_POW) {
    fail(Status::kInvalidArgument, "op = {} is not an aethercl_binary_op", op);
  }
  return kOpNames[op];
}

struct Layout {
  Shape a{1, 1, 1, 1}, b{1, 1, 1, 1}, out{1, 1, 1, 1};
  std::uint64_t count_a = 1, count_b = 1, count_out = 1;
};

// Pads to 4 dimensions and checks broadcast compatibility (desc.shape_a[d] names the field).
Layout layout_of(const aethercl_broadcast_desc& desc) {
  if (desc.ndim < 1 || desc.ndim > 4) {
    fail(Status::kInvalidArgument, "desc.ndim = {} must be 1 to 4", desc.ndim);
  }
  Layout l;
  const int pad = 4 - desc.ndim;
  for (int d = 0; d < desc.ndim; ++d) {
    const std::string a_name = fmt::format("desc.shape_a[{}]", d);
    const std::string b_name = fmt::format("desc.shape_b[{}]", d);
    const std::uint64_t a = dim(a_name.c_str(), desc.shape_a[d]);
    const std::uint64_t b = dim(b_name.c_str(), desc.shape_b[d]);
    if (a != b && a != 1 && b != 1) {
      fail(Status::kInvalidArgument, "{} = {} and {} = {} do not broadcast (equal, or one is 1)",
           a_name, a, b_name, b);
    }
    l.a[pad + d] = a;
    l.b[pad + d] = b;
    l.out[pad + d] = (a == 0 || b == 0) ? 0 : std::max(a, b);
  }
  l.count_a = product("desc.shape_a", {l.a[0], l.a[1], l.a[2], l.a[3]});
  l.count_b = product("desc.shape_b", {l.b[0], l.b[1], l.b[2], l.b[3]});
  l.count_out = product("the broadcast shape", {l.out[0], l.out[1], l.out[2], l.out[3]});
  return l;
}

// Row-major strides of a shape.
Shape strides_of(const Shape& shape) {
  Shape strides{};
  std::uint64_t stride = 1;
  for (int d = 3; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

// An operand's strides over output coordinates: 0 along the dimensions it is broadcast in.
Shape broadcast_strides(const Shape& shape, const Shape& out) {
  Shape strides = strides_of(shape);
  for (int d = 0; d < 4; ++d) {
    if (shape[d] != out[d]) strides[d] = 0;
  }
  return strides;
}

cl_ulong4 vec(const Shape& s) {
  cl_ulong4 v;
  for (int d = 0; d < 4; ++d) v.s[d] = static_cast<cl_ulong>(s[d]);
  return v;
}

struct Addressing {
  cl_int mode;  // 0 same index, 1 output index modulo count, 2 strided
  cl_ulong period;
  cl_ulong4 strides;
};

Addressing addressing_of(const Shape& shape, std::uint64_t count, const Layout& l) {
  if (shape == l.out) return {0, 1, vec(broadcast_strides(shape, l.out))};
  // Trailing-suffix operand: its dimensions after the leading 1s equal the output's.
  int first = 0;
  while (first < 4 && shape[first] == 1) ++first;
  bool suffix = true;
  for (int d = first; d < 4; ++d) suffix = suffix && shape[d] == l.out[d];
  if (suffix) return {1, static_cast<cl_ulong>(std::max<std::uint64_t>(count, 1)), vec(shape)};
  return {2, 1, vec(broadcast_strides(shape, l.out))};
}

// For launch_grad: the gradient's sign when it is +-dc whatever the inputs (ADD, SUB), else 0, and
// the formats of dc and the gradient.
struct ColumnSumGrad {
  float scale = 0.0f;
  Storage dc = Storage::kF32, dx = Storage::kF32;
};

// Whether an operand of `shape` is broadcast along leading dimensions only (a bias row of a
// matrix, ...): its gradient is then a sum of the output's rows.
bool broadcast_along_leading_dimensions(const Shape& shape, const Layout& l) {
  int first = 0;
  while (first < 4 && shape[first] == 1) ++first;
  for (int d = first; d < 4; ++d) {
    if (shape[d] != l.out[d]) return false;
  }
  return true;
}

void launch_grad(DeviceCall& call, const FamilyVariant& family, const char* op, const char* side,
                 cl_mem x, cl_mem y, cl_mem dc, cl_mem dx, std::uint64_t count_x,
                 const Shape& x_shape, const Shape& y_shape, const Layout& l,
                 const ColumnSumGrad& sums) {
  Shape reduced{1, 1, 1, 1};
  std::uint64_t red_count = 1;
  for (int d = 0; d < 4; ++d) {
    if (x_shape[d] != l.out[d]) reduced[d] = l.out[d];
    red_count *= reduced[d];
  }
  // +-dc summed over leading dimensions: the column tiles of ops/reduce (a work-item per
  // element of x would walk every row alone, at a few percent of bandwidth).
  if (sums.scale != 0.0f && red_count > 1 && broadcast_along_leading_dimensions(x_shape, l)) {
    column_sums(call, dc, dx, red_count, count_x, sums.scale,
                storage_options({{"RED_IN", sums.dc}, {"RED_OUT", sums.dx}}));
    return;
  }
  const std::string name = fmt::format("binary_{}_grad_{}", op, side);
  launch_linear(call, family, name.c_str(), count_x, x, y, dc, dx, ul(count_x), vec(x_shape),
                vec(strides_of(l.out)), vec(broadcast_strides(y_shape, l.out)), vec(reduced),
                ul(red_count));
}

// The roles of kernels/binary.cl. The forward has no gradients and names da and db in a's and
// b's formats, so calls whose operands keep their formats in both directions share one program
// (a backward with a missing input reads dc in its place, in dc's format).
FamilyVariant family_of(Storage a, Storage b, Storage c, Storage da, Storage db) {
  return {kFamily, storage_options({{"BIN_A", a}, {"BIN_B", b}, {"BIN_C", c}, {"BIN_DA", da},
                                    {"BIN_DB", db}})};
}

// Zeroes count elements of a gradient in its format.
void zero_gradient(DeviceCall& call, const Operand& gradient, std::uint64_t count) {
  if (count == 0) return;
  if (gradient.storage == Storage::kF32) {
    launch_linear(call, "fill", "fill_zero", count, gradient.view.mem, ul(count));
  } else {  // +0 is the all-zero pattern in every format
    call.device().fill(call.stream(), gradient.view.mem, 0, count * storage_bytes(gradient.storage),
                       0);
  }
}

}  // namespace

void binary(DeviceCall& call, int op, const aethercl_broadcast_desc& desc) {
  const char* name = op_name(op);
  const Layout l = layout_of(desc);
  const Operand a = operand(call, desc.a, "desc.a", l.count_a);
  const Operand b = operand(call, desc.b, "desc.b", l.count_b);
  const Operand c = operand(call, desc.c, "desc.c", l.count_out);
  // In place only over an operand of the full shape (a broadcast one is read by several items).
  if (desc.c == desc.a && l.count_a != l.count_out) require_distinct(desc.a, "desc.a", desc.c, "desc.c");
  if (desc.c == desc.b && l.count_b != l.count_out) require_distinct(desc.b, "desc.b", desc.c, "desc.c");
  if (l.count_out == 0) return;
  const Addressing at_a = addressing_of(l.a, l.count_a, l);
  const Addressing at_b = addressing_of(l.b, l.count_b, l);
  const FamilyVariant family = family_of(a.storage, b.storage, c.storage, a.storage, b.storage);
  if (at_a.mode == 0 && at_b.mode == 0) {  // no broadcast: four elements per work-item
    const std::string kernel = fmt::format("binary_{}_same", name);
    launch_linear(call, family, kernel.c_str(), (l.count_out + 3) / 4, a.view.mem, b.view.mem,
                  c.view.mem, ul(l.count_out));
    return;
  }
  const std::string kernel = fmt::format("binary_{}", name);
  launch_linear(call, family, kernel.c_str(), l.count_out, a.view.mem, b.view.mem, c.view.mem,
                ul(l.count_out), vec(l.out), at_a.mode, at_a.period, at_a.strides, at_b.mode,
                at_b.period, at_b.strides);
}

void binary_backward(DeviceCall& call, int op, const aethercl_broadcast_desc& desc, void* dc,
                     void* da, void* db) {
  const char* name = op_name(op);
  const Layout l = layout_of(desc);
  const bool reads_inputs = op != AETHERCL_BINARY_ADD && op != AETHERCL_BINARY_SUB;
  const Operand dc_op = operand(call, dc, "dc", l.count_out);
  std::optional<Operand> a_op, b_op;
  if (reads_inputs) {
    a_op = operand(call, desc.a, "desc.a", l.count_a);
    b_op = operand(call, desc.b, "desc.b", l.count_b);
  } else {
    a_op = optional_operand(call, desc.a, "desc.a", l.count_a);
    b_op = optional_operand(call, desc.b, "desc.b", l.count_b);
  }
  auto da_op = optional_operand(call, da, "da", l.count_a);
  auto db_op = optional_operand(call, db, "db", l.count_b);
  require_distinct(da, "da", dc, "dc");
  require_distinct(db, "db", dc, "dc");
  require_distinct(da, "da", db, "db");
  if (reads_inputs) {
    for (void* input : {desc.a, desc.b}) {
      require_distinct(da, "da", input, input == desc.a ? "desc.a" : "desc.b");
      require_distinct(db, "db", input, input == desc.a ? "desc.a" : "desc.b");
    }
  }
  if (l.count_out == 0) {  // nothing broadcast into the gradients: they are sums of nothing
    if (da_op) zero_gradient(call, *da_op, l.count_a);
    if (db_op) zero_gradient(call, *db_op, l.count_b);
    return;
  }
  // ADD and SUB never read the inputs; dc stands in for a missing one (in bounds: an operand
  // has at most dc's element count; unread).
  const Operand a_in = a_op ? *a_op : dc_op;
  const Operand b_in = b_op ? *b_op : dc_op;
  const FamilyVariant family =
      family_of(a_in.storage, b_in.storage, dc_op.storage, da_op ? da_op->storage : a_in.storage,
                db_op ? db_op->storage : b_in.storage);
  const float sign_a = reads_inputs ? 0.0f : 1.0f;
  const float sign_b = reads_inputs ? 0.0f : (op == AETHERCL_BINARY_SUB ? -1.0f : 1.0f);
  if (da_op && l.count_a > 0) {
    launch_grad(call, family, name, "a", a_in.view.mem, b_in.view.mem, dc_op.view.mem,
                da_op->view.mem, l.count_a, l.a, l.b, l,
                {sign_a, dc_op.storage, da_op->storage});
  }
  if (db_op && l.count_b > 0) {
    launch_grad(call, family, name, "b", b_in.view.mem, a_in.view.mem, dc_op.view.mem,
                db_op->view.mem, l.count_b, l.b, l.a, l,
                {sign_b, dc_op.storage, db_op->storage});
  }
}

}  // namespace aethercl::ops::train
