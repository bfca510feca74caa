// Host blocks through the HostBlocks registry; the matrix product copies its operands into pooled
// device buffers, runs kernels/sim_matmul.cl and reads the result back asynchronously into a new
// host block, confirmed by an event callback.
#include "ops/sim_ops.h"

#include "runtime/callback_read.h"
#include "runtime/family_launch.h"
#include "runtime/host_blocks.h"
#include "support/env.h"
#include "support/log.h"

#include <atomic>
#include <cstring>
#include <utility>

namespace aethercl::ops {
namespace {

constexpr const char* kFamily = "sim_matmul";
constexpr const char* kKernel = "sim_matmul_f64";

// A pool block released when it goes out of scope, on success and on failure alike. Release is
// stream-ordered, so commands still using the buffer finish before anyone else gets it.
class PooledBuffer {
 public:
  PooledBuffer(Device& device, Stream& stream, std::uint64_t size)
      : device_(device), block_(device.allocate(stream, size)) {}
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;
  ~PooledBuffer() { device_.free_block(block_, {}); }
  cl_mem mem() const { return block_.mem; }

 private:
  Device& device_;
  PoolBlock block_;
};

// Unregisters a freshly made result block unless the op got as far as returning it.
class ResultGuard {
 public:
  explicit ResultGuard(std::uint64_t address) : address_(address) {}
  ResultGuard(const ResultGuard&) = delete;
  ResultGuard& operator=(const ResultGuard&) = delete;
  ~ResultGuard() {
    if (address_ == 0) return;
    try {
      HostBlocks::instance().free(address_, "result");
    } catch (...) {
    }
  }
  std::uint64_t release() { return std::exchange(address_, 0); }

 private:
  std::uint64_t address_;
};

struct Shape {
  std::uint64_t rows;
  std::uint64_t cols;
};

Shape read_shape(const int* shape, const char* argument) {
  if (shape == nullptr) fail(Status::kInvalidArgument, "{} is NULL", argument);
  if (shape[0] <= 0 || shape[1] <= 0) {
    fail(Status::kInvalidArgument, "{} = ({}, {}) has a non-positive dimension", argument,
         shape[0], shape[1]);
  }
  return Shape{static_cast<std::uint64_t>(shape[0]), static_cast<std::uint64_t>(shape[1])};
}

// The live block at address, at least size bytes long.
std::shared_ptr<HostBlock> operand(std::uint64_t address, const char* argument,
                                   std::uint64_t size) {
  auto block = HostBlocks::instance().find(address, argument);
  if (block->size() < size) {
    fail(Status::kOutOfRange, "{} 0x{:x} holds {} bytes, but the matrix needs {} bytes", argument,
         address, block->size(), size);
  }
  return block;
}

// The largest square tile (work-group) the kernel and the device allow.
std::pair<Kernel*, std::size_t> pick_kernel(Device& device) {
  const DeviceInfo& info = device.info();
  for (std::size_t tile : {16, 8, 4, 2, 1}) {
    if (tile * tile > info.max_work_group_size) continue;
    if (2 * tile * tile * sizeof(double) > info.local_mem_bytes) continue;
    Kernel& kernel =
        device.programs().kernel(kFamily, kKernel, fmt::format("-DSIM_TILE={}", tile));
    if (tile * tile <= kernel.max_work_group_size) return {&kernel, tile};
  }
  fail(Status::kDeviceError, "{} cannot run even a 1x1 work-group on {}", kKernel, info.name);
}

void multiply_on_device(DeviceCall& call, const HostBlock& a, const HostBlock& b, HostBlock& c,
                        std::uint64_t size_a, std::uint64_t size_b, std::uint64_t m,
                        std::uint64_t n, std::uint64_t k) {
  Device& device = call.device();
  Stream& stream = call.stream();
  device.refuse_during_capture(stream, "the simulated matrix product reads its result back");
  auto [kernel, tile] = pick_kernel(device);
  PooledBuffer a_buffer(device, stream, size_a);
  PooledBuffer b_buffer(device, stream, size_b);
  PooledBuffer c_buffer(device, stream, c.size());
  device.write(stream, a_buffer.mem(), 0, size_a, a.data(), false);
  device.write(stream, b_buffer.mem(), 0, size_b, b.data(), false);
  const std::size_t global[2] = {(n + tile - 1) / tile * tile, (m + tile - 1) / tile * tile};
  const std::size_t local[2] = {tile, tile};
  call.launch(*kernel, LaunchGeometry::grid(2, global, local), a_buffer.mem(), b_buffer.mem(),
              c_buffer.mem(), static_cast<cl_ulong>(m), static_cast<cl_ulong>(n),
              static_cast<cl_ulong>(k));
  try {
    device.drain();
    read_confirmed_by_callback(stream.queue(), c_buffer.mem(), c.size(), c.data());
  } catch (const Error&) {
    device.synchronize();  // names an earlier failed command (the kernel) if that is the cause
    throw;
  }
  device.synchronize();
}

bool host_fallback(const Device& device) {
  static std::atomic<bool> warned{false};
  bool forced = env::flag(env::kSimHostMatmul, false);
  if (device.info().fp64 && !forced) return false;
  if (!warned.exchange(true)) {
    log().warn("simulated_matrix_multiply computes on the host: {}",
               forced ? fmt::format("{}=1", env::kSimHostMatmul)
                      : fmt::format("device {} ({}) has no fp64", device.index(),
                                    device.info().name));
  }
  return true;
}

}  // namespace

std::uint64_t sim_allocate(std::size_t size) {
  return HostBlocks::instance().allocate(size)->address();
}

void sim_free(std::uint64_t address) { HostBlocks::instance().free(address, "address"); }

void sim_write(std::uint64_t address, std::size_t size, const void* source) {
  auto block = HostBlocks::instance().find(address, "address");
  if (size > block->size()) {
    fail(Status::kOutOfRange, "size {} exceeds the block at 0x{:x} ({} bytes)", size, address,
         block->size());
  }
  if (size == 0) return;
  if (source == nullptr) fail(Status::kInvalidArgument, "source is NULL");
  std::memcpy(block->data(), source, size);
}

void sim_read(std::uint64_t address, std::size_t size, void* destination) {
  auto block = HostBlocks::instance().find(address, "address");
  if (size > block->size()) {
    fail(Status::kOutOfRange, "size {} exceeds the block at 0x{:x} ({} bytes)", size, address,
         block->size());
  }
  if (size == 0) return;
  if (destination == nullptr) fail(Status::kInvalidArgument, "destination is NULL");
  std::memcpy(destination, block->data(), size);
}

std::uint64_t sim_matrix_multiply(DeviceCall& call, std::uint64_t address_a,
                                  std::uint64_t address_b, std::size_t size_a, std::size_t size_b,
                                  const int* shape_a, const int* shape_b) {
  Shape sa = read_shape(shape_a, "shape_a");
  Shape sb = read_shape(shape_b, "shape_b");
  if (sa.cols != sb.rows) {
    fail(Status::kInvalidArgument, "cols_a = {} differs from rows_b = {}", sa.cols, sb.rows);
  }
  // int dimensions: every element count fits 64 bits, the byte counts may not.
  std::uint64_t bytes_a = byte_count(sa.rows * sa.cols, sizeof(double));
  std::uint64_t bytes_b = byte_count(sb.rows * sb.cols, sizeof(double));
  std::uint64_t bytes_c = byte_count(sa.rows * sb.cols, sizeof(double));
  if (size_a != bytes_a) {
    fail(Status::kInvalidArgument, "size_a = {} bytes, but shape_a ({}, {}) of float64 is {} bytes",
         size_a, sa.rows, sa.cols, bytes_a);
  }
  if (size_b != bytes_b) {
    fail(Status::kInvalidArgument, "size_b = {} bytes, but shape_b ({}, {}) of float64 is {} bytes",
         size_b, sb.rows, sb.cols, bytes_b);
  }
  auto a = operand(address_a, "address_a", bytes_a);
  auto b = operand(address_b, "address_b", bytes_b);

  auto c = HostBlocks::instance().allocate(bytes_c);
  ResultGuard guard(c->address());
  Device& device = call.device();
  if (host_fallback(device)) {
    sim_matmul_host(reinterpret_cast<const double*>(a->data()),
                    reinterpret_cast<const double*>(b->data()),
                    reinterpret_cast<double*>(c->data()), sa.rows, sb.cols, sa.cols);
  } else {
    multiply_on_device(call, *a, *b, *c, bytes_a, bytes_b, sa.rows, sb.cols, sa.cols);
  }
  return guard.release();
}

void sim_matmul_host(const double* a, const double* b, double* c, std::uint64_t m,
                     std::uint64_t n, std::uint64_t k) {
  // Row by row, k outermost inside a row: every c[i][j] still sees its terms with k ascending.
  // Separate statements keep the compiler from fusing the multiply and the add.
  for (std::uint64_t i = 0; i < m; ++i) {
    double* c_row = c + i * n;
    for (std::uint64_t j = 0; j < n; ++j) c_row[j] = 0.0;
    for (std::uint64_t p = 0; p < k; ++p) {
      const double a_ip = a[i * k + p];
      const double* b_row = b + p * n;
      for (std::uint64_t j = 0; j < n; ++j) {
        const double product = a_ip * b_row[j];
        c_row[j] = c_row[j] + product;
      }
    }
  }
}

}  // namespace aethercl::ops
