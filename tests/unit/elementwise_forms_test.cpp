// Both forms of every elementwise kernel (_lanes for CPU devices, _vec4 for GPUs)
// agree with float64 references on every device the tests run on, whichever the driver picks
// there, for sizes around the vector widths (vector part, scalar tail, both) and in place.
#include "runtime/device.h"
#include "runtime/family_launch.h"
#include "test_support.h"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace aethercl;

namespace {

constexpr std::uint64_t kLanes = 16;  // ACL_LANES of kernels/fastmath.cl

cl::Mem device_copy(Device& device, const std::vector<float>& values) {
  cl_int status = CL_SUCCESS;
  cl::Mem mem(clCreateBuffer(device.context(), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                             values.size() * sizeof(float), const_cast<float*>(values.data()),
                             &status));
  REQUIRE(status == CL_SUCCESS);
  return mem;
}

std::vector<float> read_back(Device& device, cl_mem mem, std::size_t n) {
  std::vector<float> out(n);
  device.read(device.default_stream(), mem, 0, n * sizeof(float), out.data());
  return out;
}

// Runs `name` over the buffers (inputs then outputs) with n bound last; lanes forms get the item
// count the driver gives them.
template <typename... Mems>
void run(Device& device, const std::string& name, std::size_t n, Mems... mems) {
  Kernel& kernel = device.programs().kernel("elementwise", name);
  const bool lanes = name.size() > 6 && name.compare(name.size() - 6, 6, "_lanes") == 0;
  const std::uint64_t width = lanes ? kLanes : 4;  // _lanes or _vec4
  std::uint64_t items = std::max<std::uint64_t>(n / width, n % width);
  std::lock_guard lock(device.mutex());
  device.enqueue(device.default_stream(),
                 make_launch(kernel, ops::linear_geometry(device, kernel, items), mems...,
                             cl_ulong{n}));
}

double gelu(double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }
double gelu_slope(double v) {
  return 0.5 * (1.0 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-0.5 * v * v) /
                                                            std::sqrt(2.0 * M_PI);
}

}  // namespace

TEST_CASE("elementwise kernels, both forms, match float64 references") {
  Device& device = testing::test_device();
  std::mt19937 generator(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (std::size_t n : {1u, 7u, 15u, 16u, 17u, 33u, 1003u, 4099u}) {
    std::vector<float> a(n), b(n), c(n);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = normal(generator), b[i] = normal(generator), c[i] = normal(generator);
    }
    for (const char* suffix : {"_vec4", "_lanes"}) {
      CAPTURE(n);
      CAPTURE(suffix);
      cl::Mem ma = device_copy(device, a), mb = device_copy(device, b), mc = device_copy(device, c);
      cl::Mem out = device_copy(device, std::vector<float>(n, NAN));
      cl::Mem out2 = device_copy(device, std::vector<float>(n, NAN));
      auto name = [&](const char* base) { return std::string(base) + suffix; };

      run(device, name("elementwise_add"), n, ma.get(), mb.get(), out.get());
      auto sum = read_back(device, out.get(), n);
      run(device, name("elementwise_mul"), n, ma.get(), mb.get(), out.get());
      auto product = read_back(device, out.get(), n);
      run(device, name("elementwise_mul_backward"), n, mc.get(), ma.get(), mb.get(), out.get(),
          out2.get());
      auto da = read_back(device, out.get(), n), db = read_back(device, out2.get(), n);
      run(device, name("elementwise_gelu"), n, ma.get(), out.get());
      auto y = read_back(device, out.get(), n);
      run(device, name("elementwise_gelu_backward"), n, ma.get(), mc.get(), out.get());
      auto dx = read_back(device, out.get(), n);
      run(device, name("elementwise_add"), n, ma.get(), mb.get(), ma.get());  // in place
      auto in_place = read_back(device, ma.get(), n);

      for (std::size_t i = 0; i < n; ++i) {
        CAPTURE(i);
        // add, mul: one float32 rounding of the exact result, so equal to the rounded float64.
        CHECK(sum[i] == static_cast<float>(double(a[i]) + b[i]));
        CHECK(product[i] == static_cast<float>(double(a[i]) * b[i]));
        CHECK(da[i] == static_cast<float>(double(c[i]) * b[i]));
        CHECK(db[i] == static_cast<float>(double(c[i]) * a[i]));
        CHECK(in_place[i] == sum[i]);
        // GELU: float32 erf and exp within a few ulp (docs/PERFORMANCE.md): 1e-6 relative plus
        // 1e-6 absolute; the gradient's two terms add another rounding: 2e-6 relative.
        const double want_y = gelu(a[i]), want_dx = c[i] * gelu_slope(a[i]);
        CHECK(std::fabs(y[i] - want_y) <= 1e-6 + 1e-6 * std::fabs(want_y));
        CHECK(std::fabs(dx[i] - want_dx) <= 1e-6 + 2e-6 * std::fabs(want_dx));
      }
    }
  }
}
