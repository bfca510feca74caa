// Row-wise ops: validate every buffer against rows * row_size float32 elements, then launch one
// work-group per row (kernels/rowwise.cl).
#include "ops/rowwise.h"

#include "runtime/family_launch.h"

namespace aethercl::ops {
namespace {

constexpr float kDefaultLayerNormEps = 1e-5f;

struct RowShape {
  std::uint64_t rows = 0;
  std::uint64_t cols = 0;
  std::uint64_t bytes = 0;  // rows * cols float32 elements
  bool empty() const { return bytes == 0; }
};

RowShape row_shape(int num_rows, int row_size) {
  std::uint64_t count = element_count({{"num_rows", num_rows}, {"row_size", row_size}});
  if (count == 0) return RowShape{};
  return RowShape{static_cast<std::uint64_t>(num_rows), static_cast<std::uint64_t>(row_size),
                  byte_count(count, sizeof(float))};
}

float effective_eps(float eps) { return eps <= 0.0f ? kDefaultLayerNormEps : eps; }

}  // namespace

void softmax(DeviceCall& call, void* x, void* y, int num_rows, int row_size) {
  RowShape shape = row_shape(num_rows, row_size);
  cl_mem x_mem = call.buffer(x, "buffer_input", shape.bytes).mem;
  cl_mem y_mem = call.buffer(y, "buffer_output", shape.bytes).mem;
  if (shape.empty()) return;
  if (row_lanes_forms(call.device())) {
    launch_rows(call, "rowwise_softmax_lanes", shape.rows, shape.cols, 0, x_mem, y_mem,
                cl_ulong{shape.rows}, cl_ulong{shape.cols});
    return;
  }
  launch_rows(call, "rowwise_softmax", shape.rows, shape.cols, sizeof(float), x_mem, y_mem,
              cl_ulong{shape.rows}, cl_ulong{shape.cols});
}

void softmax_backward(DeviceCall& call, void* dy, void* y, void* dx, int num_rows, int row_size) {
  RowShape shape = row_shape(num_rows, row_size);
  cl_mem dy_mem = call.buffer(dy, "buffer_dy", shape.bytes).mem;
  cl_mem y_mem = call.buffer(y, "buffer_y", shape.bytes).mem;
  cl_mem dx_mem = call.buffer(dx, "buffer_dx", shape.bytes).mem;
  if (shape.empty()) return;
  Device& device = call.device();
  launch_rows(call, "rowwise_softmax_backward", shape.rows, shape.cols, accumulator_bytes(device),
              dy_mem, y_mem, dx_mem, cl_ulong{shape.rows}, cl_ulong{shape.cols});
}

void layernorm(DeviceCall& call, void* x, void* y, int num_rows, int row_size, float eps) {
  RowShape shape = row_shape(num_rows, row_size);
  cl_mem x_mem = call.buffer(x, "buffer_input", shape.bytes).mem;
  cl_mem y_mem = call.buffer(y, "buffer_output", shape.bytes).mem;
  if (shape.empty()) return;
  Device& device = call.device();
  if (row_lanes_forms(device) && device.info().fp64) {
    // The lanes form exists where rowwise.cl fuses the statistics in double (FP64 devices).
    launch_rows(call, "rowwise_layernorm_lanes", shape.rows, shape.cols, 0, x_mem, y_mem,
                cl_ulong{shape.rows}, cl_ulong{shape.cols}, effective_eps(eps));
    return;
  }
  // Two acc_t per item: the fused (sum, sum of squares) reduction of FP64 devices (rowwise.cl).
  launch_rows(call, "rowwise_layernorm", shape.rows, shape.cols, 2 * accumulator_bytes(device),
              x_mem, y_mem, cl_ulong{shape.rows}, cl_ulong{shape.cols}, effective_eps(eps));
}

void layernorm_backward(DeviceCall& call, void* dy, void* x, void* dx, int num_rows, int row_size,
                        float eps) {
  RowShape shape = row_shape(num_rows, row_size);
  cl_mem dy_mem = call.buffer(dy, "buffer_dy", shape.bytes).mem;
  cl_mem x_mem = call.buffer(x, "buffer_x", shape.bytes).mem;
  cl_mem dx_mem = call.buffer(dx, "buffer_dx", shape.bytes).mem;
  if (shape.empty()) return;
  Device& device = call.device();
  // Four acc_t per item: the fused reduction of x, x^2, dy and dy * x (rowwise.cl).
  launch_rows(call, "rowwise_layernorm_backward", shape.rows, shape.cols,
              4 * accumulator_bytes(device), dy_mem, x_mem, dx_mem, cl_ulong{shape.rows},
              cl_ulong{shape.cols}, effective_eps(eps));
}

}  // namespace aethercl::ops
