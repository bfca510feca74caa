// Elementwise ops: validate every buffer against n float32 elements, then launch a grid-stride
// kernel of kernels/elementwise.cl.
#include "ops/elementwise.h"

#include "ops/launch_geometry.h"
#include "runtime/kernel_args.h"

namespace aethercl::ops {
namespace {

constexpr const char* kFamily = "elementwise";

template <typename... Buffers>
void launch(DeviceCall& call, const char* kernel_name, std::uint64_t n, Buffers... buffers) {
  Device& device = call.device();
  cl_kernel kernel = device.programs().kernel(kFamily, kernel_name);
  set_kernel_args(kernel, buffers..., static_cast<cl_ulong>(n));
  Geometry1D geometry = linear_geometry(device, n);
  device.launch(kernel, 1, &geometry.global, &geometry.local);
}

void binary(DeviceCall& call, const char* kernel_name, void* a, void* b, void* c, int n) {
  std::uint64_t count = element_count({{"num_elements", n}});
  std::uint64_t bytes = byte_count(count, sizeof(float));
  cl_mem a_mem = call.buffer(a, "buffer_a", bytes).mem;
  cl_mem b_mem = call.buffer(b, "buffer_b", bytes).mem;
  cl_mem c_mem = call.buffer(c, "buffer_c", bytes).mem;
  if (count == 0) return;
  launch(call, kernel_name, count, a_mem, b_mem, c_mem);
}

}  // namespace

void add(DeviceCall& call, void* a, void* b, void* c, int n) {
  binary(call, "kernel_add", a, b, c, n);
}

void mul(DeviceCall& call, void* a, void* b, void* c, int n) {
  binary(call, "kernel_mul", a, b, c, n);
}

void mul_backward(DeviceCall& call, void* dc, void* a, void* b, void* da, void* db, int n) {
  // ABI.md 4.3: NULL inputs are refused first; both outputs NULL is a successful no-op.
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
  if (count == 0) return;
  if (da_view) launch(call, "kernel_mul", count, dc_mem, b_mem, da_view->mem);
  if (db_view) launch(call, "kernel_mul", count, dc_mem, a_mem, db_view->mem);
}

void gelu(DeviceCall& call, void* x, void* y, int n) {
  std::uint64_t count = element_count({{"num_elements", n}});
  std::uint64_t bytes = byte_count(count, sizeof(float));
  cl_mem x_mem = call.buffer(x, "buffer_input", bytes).mem;
  cl_mem y_mem = call.buffer(y, "buffer_output", bytes).mem;
  if (count == 0) return;
  launch(call, "kernel_gelu", count, x_mem, y_mem);
}

void gelu_backward(DeviceCall& call, void* x, void* dy, void* dx, int n) {
  std::uint64_t count = element_count({{"num_elements", n}});
  std::uint64_t bytes = byte_count(count, sizeof(float));
  cl_mem x_mem = call.buffer(x, "buffer_input", bytes).mem;
  cl_mem dy_mem = call.buffer(dy, "buffer_grad_output", bytes).mem;
  cl_mem dx_mem = call.buffer(dx, "buffer_grad_input", bytes).mem;
  if (count == 0) return;
  launch(call, "kernel_gelu_backward", count, x_mem, dy_mem, dx_mem);
}

}  // namespace aethercl::ops
