// Error of kernels/fastmath.cl (acl_exp16, acl_tanh16, acl_erf16: the lane forms the kernels
// call) in ulps against double-precision std::exp/tanh/erf, over a strided sweep of all float bit
// patterns (stride 4093 by default, about a million inputs per function). AETHERCL_ULP_STRIDE=1
// makes it the exhaustive sweep over every finite float (tools/bench/fastmath_ulp.sh runs it and
// prints the maxima).
#include "runtime/family_launch.h"
#include "runtime/program_cache.h"
#include "support/env.h"
#include "test_support.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <future>
#include <limits>
#include <string>
#include <vector>

using namespace aethercl;

// The documented maxima (docs/PERFORMANCE.md, "Math functions and GELU on the CPU"), rounded up:
// these are the tolerances of the sweep, strided or exhaustive.
constexpr double kErfBound = 4.0;
constexpr double kExpBound = 1.0;
constexpr double kTanhBound = 1.5;

namespace {

float from_bits(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// |y - ref| in units of the float spacing at ref (2^-149 at and below the subnormals); 0 when
// both are the same infinity or both NaN; infinite when only one side is inf or NaN.
double ulp_error(float y, double ref) {
  if (std::isnan(ref)) return std::isnan(y) ? 0.0 : INFINITY;
  float rounded = static_cast<float>(ref);
  if (std::isinf(rounded) || std::isinf(y)) return y == rounded ? 0.0 : INFINITY;
  if (std::isnan(y)) return INFINITY;
  int exponent = 0;
  std::frexp(ref, &exponent);
  double ulp = std::ldexp(1.0, std::max(exponent - 24, -149));
  return std::fabs(static_cast<double>(y) - ref) / ulp;
}

struct Worst {
  double ulps = 0.0;
  float input = 0.0f;
  float output = 0.0f;
};

Worst worst_of(const std::vector<float>& out, std::uint64_t first_index, std::size_t begin,
               std::size_t end, std::uint32_t stride, double (*reference)(double)) {
  Worst worst;
  for (std::size_t i = begin; i < end; ++i) {
    float x = from_bits(static_cast<std::uint32_t>((first_index + i) * stride));
    if (!std::isfinite(x)) {
      if (std::isnan(x) && !std::isnan(out[i])) worst = {INFINITY, x, out[i]};
      continue;
    }
    double error = ulp_error(out[i], reference(static_cast<double>(x)));
    if (error > worst.ulps) worst = {error, x, out[i]};
  }
  return worst;
}

// Runs `probe` over every stride-th bit pattern in chunks; returns the worst error seen.
Worst sweep(const char* probe, double (*reference)(double), std::uint32_t stride) {
  Device& device = testing::test_device();
  Kernel& kernel = device.programs().kernel("fastmath", probe, "-DAETHERCL_FASTMATH_PROBES");
  // Rounded up to whole float16 groups (the probes' unit); the extra patterns wrap modulo 2^32.
  const std::uint64_t total = (((std::uint64_t{1} << 32) + stride - 1) / stride + 15) / 16 * 16;
  const std::uint64_t chunk = std::min<std::uint64_t>(total, std::uint64_t{1} << 23);
  cl_int status = CL_SUCCESS;
  cl::Mem buffer(clCreateBuffer(device.context(), CL_MEM_READ_WRITE, chunk * sizeof(float),
                                nullptr, &status));
  REQUIRE(status == CL_SUCCESS);
  std::vector<float> out(chunk);
  Worst worst;
  for (std::uint64_t first = 0; first < total; first += chunk) {
    cl_uint n = static_cast<cl_uint>(std::min(chunk, total - first));
    cl_uint first_bits = static_cast<cl_uint>(first * stride);
    cl_uint stride_arg = stride;
    cl_mem mem = buffer.get();
    device.enqueue(device.default_stream(),
                   make_launch(kernel, ops::linear_geometry(device, kernel, n / 16), first_bits,
                               stride_arg, mem, n));
    device.read(device.default_stream(), mem, 0, n * sizeof(float), out.data());
    std::size_t half = n / 2;
    auto upper = std::async(std::launch::async, worst_of, std::cref(out), first, half,
                            std::size_t{n}, stride, reference);
    Worst lower = worst_of(out, first, 0, half, stride, reference);
    for (Worst part : {lower, upper.get()})
      if (part.ulps > worst.ulps) worst = part;
  }
  return worst;
}

std::uint32_t sweep_stride() {
  return static_cast<std::uint32_t>(env::count("AETHERCL_ULP_STRIDE", 1, 0xFFFFFFFFull).value_or(4093));
}

void report(const char* probe, const Worst& worst, std::uint32_t stride) {
  MESSAGE(std::string(probe) << ": max " << worst.ulps << " ulp at x=" << worst.input);
  // The exhaustive sweep is run by a tool that wants the figures on its output.
  if (stride != 4093) {
    std::fprintf(stderr, "%s stride %u: max %.3f ulp at x=%.9g (got %.9g)\n", probe, stride,
                 worst.ulps, static_cast<double>(worst.input), static_cast<double>(worst.output));
  }
}

double ref_exp(double x) { return std::exp(x); }
double ref_tanh(double x) { return std::tanh(x); }
double ref_erf(double x) { return std::erf(x); }

}  // namespace

TEST_CASE("fastmath acl_erf is within its documented ulp bound") {
  std::uint32_t stride = sweep_stride();
  Worst worst = sweep("fastmath_erf_probe", ref_erf, stride);
  report("acl_erf", worst, stride);
  CHECK(worst.ulps <= kErfBound);
}

TEST_CASE("fastmath acl_exp is within its documented ulp bound") {
  std::uint32_t stride = sweep_stride();
  Worst worst = sweep("fastmath_exp_probe", ref_exp, stride);
  report("acl_exp", worst, stride);
  CHECK(worst.ulps <= kExpBound);
}

TEST_CASE("fastmath acl_tanh is within its documented ulp bound") {
  std::uint32_t stride = sweep_stride();
  Worst worst = sweep("fastmath_tanh_probe", ref_tanh, stride);
  report("acl_tanh", worst, stride);
  CHECK(worst.ulps <= kTanhBound);
}
