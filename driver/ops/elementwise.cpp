// Elementwise ops: validate every buffer against n float32 elements, then launch a grid-stride
// kernel of kernels/elementwise.cl.
#include "ops/elementwise.h"

#include "ops/aliasing.h"
#include "runtime/family_launch.h"

#include <algorithm>
#include <array>
#include <tuple>

namespace aethercl::ops {
namespace {

constexpr const char* kFamily = "elementwise";

// Launches kernel_name over `items` work-items with the buffers and the element count n bound.
template <typename... Buffers>
void launch_linear(DeviceCall& call, const char* kernel_name, std::uint64_t n, std::uint64_t items,
                   Buffers... buffers) {
  Kernel& kernel = family_kernel(call, kFamily, kernel_name);
  call.launch(kernel, linear_geometry(call.device(), kernel, items), buffers...,
              static_cast<cl_ulong>(n));
}

struct Operand {
  void* handle;
  const char* name;
};

// A kernel of kernels/elementwise.cl in the form the device runs: CPU devices the _lanes form
// (ACL_LANES elements per work-item step in its own vector code; PoCL vectorises nothing else),
// other devices the _vec4 form (one 16-byte access per operand and item: four loads in flight per
// item where one element per item left a GPU's memory system short of requests).
struct Form {
  const char* kernel_name;
  std::uint64_t per_item;  // elements per vector step
};

constexpr std::uint64_t kLanes = 16;  // ACL_LANES of kernels/fastmath.cl
constexpr std::uint64_t kVec4 = 4;

Form form(DeviceCall& call, const char* vec4, const char* lanes) {
  return cpu_kernel_forms(call.device()) ? Form{lanes, kLanes} : Form{vec4, kVec4};
}

// Work-items for `count` elements: a vector form needs count / per_item for its vector part and
// count % per_item for its scalar tail, which items 0 .. tail-1 take.
std::uint64_t items_for(std::uint64_t count, std::uint64_t per_item) {
  return std::max(count / per_item, count % per_item);
}

// Validates the operands of an n-element op and launches the op's kernel over them.
template <std::size_t N>
void launch_over(DeviceCall& call, Form kernel_form, int n, const Operand (&operands)[N]) {
  std::uint64_t count = element_count({{"num_elements", n}});
  std::uint64_t bytes = byte_count(count, sizeof(float));
  std::array<cl_mem, N> mems{};
  for (std::size_t i = 0; i < N; ++i) {
    mems[i] = call.buffer(operands[i].handle, operands[i].name, bytes).mem;
  }
  if (count == 0) return;
  std::apply(
      [&](auto... mem) {
        launch_linear(call, kernel_form.kernel_name, count,
                      items_for(count, kernel_form.per_item), mem...);
      },
      mems);
}

}  // namespace

void add(DeviceCall& call, void* a, void* b, void* c, int n) {
  launch_over(call, form(call, "elementwise_add_vec4", "elementwise_add_lanes"), n,
              {{a, "buffer_a"}, {b, "buffer_b"}, {c, "buffer_c"}});
}

void mul(DeviceCall& call, void* a, void* b, void* c, int n) {
  launch_over(call, form(call, "elementwise_mul_vec4", "elementwise_mul_lanes"), n,
              {{a, "buffer_a"}, {b, "buffer_b"}, {c, "buffer_c"}});
}

void mul_backward(DeviceCall& call, void* dc, void* a, void* b, void* da, void* db, int n) {
  // NULL inputs are refused first; both outputs NULL is a successful no-op (docs/ABI.md
  // section 4.5).
  if (dc == nullptr) fail(Status::kInvalidArgument, "buffer_dC is NULL");
  if (a == nullptr) fail(Status::kInvalidArgument, "buffer_A is NULL");
  if (b == nullptr) fail(Status::kInvalidArgument, "buffer_B is NULL");
  std::uint64_t count = element_count({{"num_elements", n}});
  std::uint64_t bytes = byte_count(count, sizeof(float));
  cl_mem dc_mem = call.buffer(dc, "buffer_dC", bytes).mem;
  cl_mem a_mem = call.buffer(a, "buffer_A", bytes).mem;
  cl_mem b_mem = call.buffer(b, "buffer_B", bytes).mem;
  auto da_view = call.optional_buffer(da, "buffer_dA", bytes);
  auto db_view = call.optional_buffer(db, "buffer_dB", bytes);
  // Two launches, each safe in place; the second must not read what the first overwrote.
  require_distinct(da, "buffer_dA", db, "buffer_dB");
  const bool da_overwrites_db_input = da != nullptr && (da == dc || da == a);
  const bool db_overwrites_da_input = db != nullptr && (db == dc || db == b);
  if (da_overwrites_db_input && db_overwrites_da_input) {
    fail(Status::kInvalidArgument,
         "buffer_dA and buffer_dB each overwrite an input of the other's product (buffer_dA is "
         "{}, buffer_dB is {}); give one of them a buffer of its own",
         da == dc ? "buffer_dC" : "buffer_A", db == dc ? "buffer_dC" : "buffer_B");
  }
  if (count == 0) return;
  if (da_view && db_view) {
    // Both gradients in one launch: every item reads dC, A and B before writing dA and dB, so any
    // whole-buffer aliasing above is safe and the products are the ones two launches compute.
    Form both = form(call, "elementwise_mul_backward_vec4", "elementwise_mul_backward_lanes");
    launch_linear(call, both.kernel_name, count, items_for(count, both.per_item), dc_mem, a_mem,
                  b_mem, da_view->mem, db_view->mem);
    return;
  }
  Form one = form(call, "elementwise_mul_vec4", "elementwise_mul_lanes");
  const std::uint64_t items = items_for(count, one.per_item);
  auto launch_da = [&] {
    if (da_view) launch_linear(call, one.kernel_name, count, items, dc_mem, b_mem, da_view->mem);
  };
  auto launch_db = [&] {
    if (db_view) launch_linear(call, one.kernel_name, count, items, dc_mem, a_mem, db_view->mem);
  };
  if (da_overwrites_db_input) {
    launch_db();
    launch_da();
  } else {
    launch_da();
    launch_db();
  }
}

void gelu(DeviceCall& call, void* x, void* y, int n) {
  launch_over(call, form(call, "elementwise_gelu_vec4", "elementwise_gelu_lanes"), n,
              {{x, "buffer_input"}, {y, "buffer_output"}});
}

void gelu_backward(DeviceCall& call, void* x, void* dy, void* dx, int n) {
  launch_over(call,
              form(call, "elementwise_gelu_backward_vec4", "elementwise_gelu_backward_lanes"), n,
              {{x, "buffer_input"}, {dy, "buffer_grad_output"}, {dx, "buffer_grad_input"}});
}

}  // namespace aethercl::ops
