// The GELU kernels of both widths (float8 for CPU devices, one element per item for GPUs) agree
// with the exact erf form on every device the tests run on, whichever the driver picks there.
#include "ops/launch.h"
#include "runtime/device.h"
#include "test_support.h"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace aethercl;

namespace {

std::vector<float> run(Device& device, const char* name, const std::vector<float>& x,
                       const std::vector<float>* dy, std::uint64_t per_item) {
  const std::size_t n = x.size();
  const std::size_t bytes = n * sizeof(float);
  cl_int status = CL_SUCCESS;
  cl::Mem in(clCreateBuffer(device.context(), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes,
                            const_cast<float*>(x.data()), &status));
  REQUIRE(status == CL_SUCCESS);
  cl::Mem grad(clCreateBuffer(device.context(), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes,
                              const_cast<float*>(dy ? dy->data() : x.data()), &status));
  REQUIRE(status == CL_SUCCESS);
  cl::Mem out(clCreateBuffer(device.context(), CL_MEM_READ_WRITE, bytes, nullptr, &status));
  REQUIRE(status == CL_SUCCESS);
  Kernel& kernel = device.programs().kernel("elementwise", name);
  std::uint64_t items = per_item == 1 ? n : std::max<std::uint64_t>((n + 7) / 8, 8);
  LaunchGeometry geometry = ops::linear_geometry(device, kernel, items);
  std::lock_guard lock(device.mutex());
  if (dy != nullptr) {
    device.enqueue(device.default_stream(),
                   make_launch(kernel, geometry, in.get(), grad.get(), out.get(), cl_ulong{n}));
  } else {
    device.enqueue(device.default_stream(),
                   make_launch(kernel, geometry, in.get(), out.get(), cl_ulong{n}));
  }
  std::vector<float> result(n);
  device.read(device.default_stream(), out.get(), 0, bytes, result.data());
  return result;
}

}  // namespace

TEST_CASE("GELU forward and backward: float8 and one-element kernels match the erf form") {
  Device& device = testing::test_device();
  std::mt19937 generator(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (std::size_t n : {1u, 7u, 8u, 9u, 1003u}) {
    std::vector<float> x(n), dy(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = normal(generator), dy[i] = normal(generator);
    auto wide = run(device, "elementwise_gelu", x, nullptr, 8);
    auto one = run(device, "elementwise_gelu_scalar", x, nullptr, 1);
    auto wide_back = run(device, "elementwise_gelu_backward", x, &dy, 8);
    auto one_back = run(device, "elementwise_gelu_backward_scalar", x, &dy, 1);
    for (std::size_t i = 0; i < n; ++i) {
      const double v = x[i];
      const double cdf = 0.5 * (1.0 + std::erf(v / std::sqrt(2.0)));
      const double y = v * cdf;
      const double slope = cdf + v * std::exp(-0.5 * v * v) / std::sqrt(2.0 * M_PI);
      CAPTURE(n);
      CAPTURE(i);
      // float32 erf and exp within a few ulp: 1e-6 relative plus 1e-6 absolute.
      CHECK(std::fabs(wide[i] - y) <= 1e-6 + 1e-6 * std::fabs(y));
      CHECK(std::fabs(one[i] - y) <= 1e-6 + 1e-6 * std::fabs(y));
      CHECK(std::fabs(wide_back[i] - dy[i] * slope) <= 1e-6 + 2e-6 * std::fabs(dy[i] * slope));
      CHECK(std::fabs(one_back[i] - dy[i] * slope) <= 1e-6 + 2e-6 * std::fabs(dy[i] * slope));
    }
  }
}
