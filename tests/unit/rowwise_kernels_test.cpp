// Row-wise kernels: work-group sizes follow the row length, and the family builds and computes
// correctly without FP64 (float accumulation), even when the test device has FP64.
#include "runtime/family_launch.h"

#include "runtime/kernel_sources.h"
#include "runtime/program_cache.h"
#include "test_support.h"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

using namespace aethercl;

namespace {

bool is_power_of_two(std::size_t value) { return value != 0 && (value & (value - 1)) == 0; }

cl::Mem upload(Device& device, std::vector<float>& data) {
  cl_int status = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(device.context(), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              data.size() * sizeof(float), data.data(), &status);
  REQUIRE(status == CL_SUCCESS);
  return cl::Mem(mem);
}

std::vector<float> download(Device& device, const cl::Mem& mem, std::size_t count) {
  std::vector<float> out(count);
  device.read(device.default_stream(), mem.get(), 0, count * sizeof(float), out.data());
  return out;
}

// A program cache that builds with AETHERCL_FP64=0, as on a device without double support.
struct FloatOnly {
  explicit FloatOnly(Device& device)
      : info([&] {
          DeviceInfo copy = device.info();
          copy.fp64 = false;
          return copy;
        }()),
        cache(info, device.context(),
              BinaryCache(std::filesystem::temp_directory_path() / "aethercl-unit-rowwise",
                          false)) {}
  DeviceInfo info;
  ProgramCache cache;
};

template <typename... Args>
void run_rows(Device& device, Kernel& kernel, std::uint64_t rows, std::uint64_t cols,
              const Args&... args) {
  ops::RowGeometry geometry = ops::row_geometry(device, kernel, rows, cols, sizeof(float));
  device.enqueue(device.default_stream(),
                 make_launch(kernel, LaunchGeometry::linear(geometry.global, geometry.local),
                             args..., LocalBytes{geometry.local * sizeof(float)}));
}

}  // namespace

TEST_CASE("CPU devices reduce each row with one work-item unless a group size is forced") {
  Device& device = testing::test_device();
  Kernel& kernel = device.programs().kernel("rowwise", "rowwise_softmax");
  if (device.info().kind == DeviceKind::kCpu) {
    CHECK(ops::row_geometry(device, kernel, 5, 64, 4).local == 1);
  } else {
    CHECK(ops::row_geometry(device, kernel, 5, 64, 4).local == 64);
  }
}

TEST_CASE("row work-group sizes are powers of two that follow the row length") {
  Device& device = testing::test_device();
  setenv("AETHERCL_ROW_GROUP", "256", 1);  // the GPU rule, on whatever device runs the tests
  Kernel& kernel = device.programs().kernel("rowwise", "rowwise_softmax");
  for (std::uint64_t cols : {1, 2, 3, 16, 53, 64, 127, 257, 100003}) {
    ops::RowGeometry geometry = ops::row_geometry(device, kernel, 10, cols, sizeof(double));
    CAPTURE(cols);
    CHECK(is_power_of_two(geometry.local));
    CHECK(geometry.local <= 256);
    CHECK(geometry.local <= device.info().max_work_group_size);
    CHECK(geometry.global % geometry.local == 0);
    CHECK(geometry.global / geometry.local <= 10);
    // No more than one power of two above the row length.
    if (geometry.local > 1) CHECK(geometry.local / 2 < cols);
  }
  CHECK(ops::row_geometry(device, kernel, 5, 1, 4).local == 1);
  CHECK(ops::row_geometry(device, kernel, 5, 16, 4).local == 16);
  CHECK(ops::row_geometry(device, kernel, 5, 53, 4).local == 64);
  // Many rows: the group count is capped and the kernels walk the rest.
  ops::RowGeometry many = ops::row_geometry(device, kernel, 1ull << 30, 64, 4);
  CHECK(many.global / many.local <= std::uint64_t{device.info().compute_units} * 64);
  setenv("AETHERCL_ROW_GROUP", "7", 1);
  CHECK(ops::row_geometry(device, kernel, 5, 53, 4).local == 4);
  unsetenv("AETHERCL_ROW_GROUP");
}

TEST_CASE("the rowwise family builds and accumulates correctly without FP64") {
  Device& device = testing::test_device();
  FloatOnly float_only(device);
  CHECK(float_only.cache.base_options().find("-DAETHERCL_FP64=0") != std::string::npos);
  for (const char* name : {"rowwise_softmax", "rowwise_log_softmax", "rowwise_softmax_backward",
                           "rowwise_layernorm", "rowwise_layernorm_backward",
                           "rowwise_cross_entropy"}) {
    CHECK(float_only.cache.kernel("rowwise", name).get() != nullptr);
  }

  const std::uint64_t rows = 3, cols = 1000;
  const float eps = 1e-5f;
  std::mt19937 generator(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(rows * cols), dy(rows * cols), y_soft(rows * cols);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = 2.0f * normal(generator) + 3.0f;
    dy[i] = normal(generator);
  }
  // Softmax of x in double, as the y input of softmax_backward.
  for (std::uint64_t r = 0; r < rows; ++r) {
    double max = -INFINITY, sum = 0;
    for (std::uint64_t j = 0; j < cols; ++j) max = std::fmax(max, x[r * cols + j]);
    for (std::uint64_t j = 0; j < cols; ++j) sum += std::exp(x[r * cols + j] - max);
    for (std::uint64_t j = 0; j < cols; ++j) {
      y_soft[r * cols + j] = static_cast<float>(std::exp(x[r * cols + j] - max) / sum);
    }
  }
  cl::Mem x_mem = upload(device, x), dy_mem = upload(device, dy), y_mem = upload(device, y_soft);
  std::vector<float> zeros(rows * cols, 0.0f);
  cl::Mem ln_mem = upload(device, zeros), lnb_mem = upload(device, zeros),
          smb_mem = upload(device, zeros);
  run_rows(device, float_only.cache.kernel("rowwise", "rowwise_layernorm"), rows, cols,
           x_mem.get(), ln_mem.get(), cl_ulong{rows}, cl_ulong{cols}, eps);
  run_rows(device, float_only.cache.kernel("rowwise", "rowwise_layernorm_backward"), rows, cols,
           dy_mem.get(), x_mem.get(), lnb_mem.get(), cl_ulong{rows}, cl_ulong{cols}, eps);
  run_rows(device, float_only.cache.kernel("rowwise", "rowwise_softmax_backward"), rows, cols,
           dy_mem.get(), y_mem.get(), smb_mem.get(), cl_ulong{rows}, cl_ulong{cols});
  std::vector<float> ln = download(device, ln_mem, x.size());
  std::vector<float> lnb = download(device, lnb_mem, x.size());
  std::vector<float> smb = download(device, smb_mem, x.size());

  double ln_err = 0, lnb_err = 0, lnb_max = 0, smb_err = 0, smb_max = 0;
  for (std::uint64_t r = 0; r < rows; ++r) {
    const std::uint64_t base = r * cols;
    double mean = 0, var = 0, sum_dy = 0, sum_dy_xhat = 0, dot = 0;
    for (std::uint64_t j = 0; j < cols; ++j) mean += x[base + j];
    mean /= static_cast<double>(cols);
    for (std::uint64_t j = 0; j < cols; ++j) var += (x[base + j] - mean) * (x[base + j] - mean);
    var /= static_cast<double>(cols);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (std::uint64_t j = 0; j < cols; ++j) {
      sum_dy += dy[base + j];
      sum_dy_xhat += dy[base + j] * (x[base + j] - mean) * inv;
      dot += static_cast<double>(dy[base + j]) * y_soft[base + j];
    }
    for (std::uint64_t j = 0; j < cols; ++j) {
      const double xhat = (x[base + j] - mean) * inv;
      const double dx = inv / static_cast<double>(cols) *
                        (static_cast<double>(cols) * dy[base + j] - sum_dy - xhat * sum_dy_xhat);
      const double sdx = (dy[base + j] - dot) * y_soft[base + j];
      ln_err = std::fmax(ln_err, std::fabs(ln[base + j] - xhat));
      lnb_err = std::fmax(lnb_err, std::fabs(lnb[base + j] - dx));
      lnb_max = std::fmax(lnb_max, std::fabs(dx));
      smb_err = std::fmax(smb_err, std::fabs(smb[base + j] - sdx));
      smb_max = std::fmax(smb_max, std::fabs(sdx));
    }
  }
  CHECK(ln_err < 1e-5);
  CHECK(lnb_err < 1e-4 * lnb_max);
  CHECK(smb_err < 1e-4 * smb_max);
}
