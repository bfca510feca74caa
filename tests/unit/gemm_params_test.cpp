// GEMM tile parameters: override parsing, device-fit checks and the fallback order.
#include "ops/gemm_params.h"

#include "support/error.h"

#include <doctest/doctest.h>

using namespace aethercl;
using namespace aethercl::ops;

namespace {

constexpr GemmLimits kRoomy{1024, 64 * 1024};

Status status_of(void (*action)()) {
  try {
    action();
  } catch (const Error& error) {
    return error.status();
  }
  return Status::kOk;
}

}  // namespace

TEST_CASE("derived sizes and build options follow the fields") {
  GemmParams params{64, 32, 16, 4, 2, 1};
  CHECK(params.threads_m() == 16);
  CHECK(params.threads_n() == 16);
  CHECK(params.work_group_size() == 256);
  CHECK(params.local_bytes() == 16u * (65 + 33) * 4);
  CHECK(params.build_options() ==
        "-DGEMM_TILE_M=64 -DGEMM_TILE_N=32 -DGEMM_TILE_K=16 -DGEMM_WPT_M=4 -DGEMM_WPT_N=2 "
        "-DGEMM_PAD=1");
  CHECK(parse_gemm_params(params.to_string(), GemmParams{}) == params);
}

TEST_CASE("the override applies any subset of keys to the base") {
  GemmParams base{64, 64, 16, 4, 4, 1};
  GemmParams parsed = parse_gemm_params(" tile_k=8 , wpt_n=2,pad=0,", base);
  CHECK(parsed == GemmParams{64, 64, 8, 4, 2, 0});
  CHECK(parse_gemm_params("", base) == base);
}

TEST_CASE("malformed overrides are refused") {
  for (const char* text : {"tile_m", "tile_m=", "tile_m=x", "tile_m=12x", "tile_m=0", "wpt_m=-1",
                           "tile_m=257", "pad=33", "bogus=4"}) {
    CAPTURE(text);
    CHECK_THROWS_AS(parse_gemm_params(text, GemmParams{}), Error);
  }
}

TEST_CASE("device-fit problems are named") {
  CHECK_FALSE(gemm_params_problem(GemmParams{64, 64, 16, 4, 4, 1}, kRoomy));
  auto shape = gemm_params_problem(GemmParams{64, 60, 16, 4, 8, 1}, kRoomy);
  REQUIRE(shape);
  CHECK(shape->find("multiples") != std::string::npos);
  auto group = gemm_params_problem(GemmParams{64, 64, 16, 4, 4, 1}, GemmLimits{128, 65536});
  REQUIRE(group);
  CHECK(group->find("256 items") != std::string::npos);
  auto local = gemm_params_problem(GemmParams{64, 64, 16, 4, 4, 1}, GemmLimits{1024, 8192});
  REQUIRE(local);
  CHECK(local->find("8320 bytes") != std::string::npos);
  CHECK(gemm_params_problem(GemmParams{64, 64, 16, 4, 4, -1}, kRoomy));
}

TEST_CASE("every device class has fitting candidates ending with a one-item fallback") {
  for (DeviceKind kind : {DeviceKind::kGpu, DeviceKind::kAccelerator, DeviceKind::kCpu,
                          DeviceKind::kOther}) {
    auto candidates = gemm_param_candidates(kind);
    REQUIRE(candidates.size() >= 2);
    for (const GemmParams& params : candidates) {
      CAPTURE(params.to_string());
      CHECK_FALSE(gemm_params_problem(params, kRoomy));
    }
    CHECK(candidates.back().work_group_size() == 1);
    CHECK_FALSE(gemm_params_problem(candidates.back(), GemmLimits{1, 128}));
    CHECK(select_gemm_params(kind, kRoomy, std::nullopt, 4096, 4096) == candidates.front());
  }
}

TEST_CASE("selection falls back to smaller parameters on constrained devices") {
  GemmParams small =
      select_gemm_params(DeviceKind::kGpu, GemmLimits{64, 32 * 1024}, std::nullopt, 4096, 4096);
  CHECK(small.work_group_size() <= 64);
  CHECK(small == GemmParams{32, 32, 16, 4, 4, 1});
  GemmParams tiny =
      select_gemm_params(DeviceKind::kGpu, GemmLimits{1, 1024}, std::nullopt, 4096, 4096);
  CHECK(tiny.work_group_size() == 1);
  CHECK(status_of([] {
          select_gemm_params(DeviceKind::kGpu, GemmLimits{0, 0}, std::nullopt, 1, 1);
        }) == Status::kDeviceError);
}

TEST_CASE("an override must fit the device and starts from the class default") {
  GemmParams params =
      select_gemm_params(DeviceKind::kGpu, kRoomy, std::string("tile_k=8"), 1, 1);
  GemmParams expected = gemm_param_candidates(DeviceKind::kGpu).front();
  expected.tile_k = 8;
  CHECK(params == expected);
  CHECK(status_of([] {
          select_gemm_params(DeviceKind::kGpu, GemmLimits{64, 65536}, std::string("pad=0"), 1, 1);
        }) == Status::kInvalidArgument);
}

TEST_CASE("products smaller than the first candidate's tile use the second") {
  for (DeviceKind kind : {DeviceKind::kGpu, DeviceKind::kCpu}) {
    auto candidates = gemm_param_candidates(kind);
    const GemmParams& large = candidates[0];
    const auto tm = static_cast<std::uint64_t>(large.tile_m);
    const auto tn = static_cast<std::uint64_t>(large.tile_n);
    CHECK(select_gemm_params(kind, kRoomy, std::nullopt, tm, tn) == large);
    CHECK(select_gemm_params(kind, kRoomy, std::nullopt, tm - 1, 1u << 20) == candidates[1]);
    CHECK(select_gemm_params(kind, kRoomy, std::nullopt, 1u << 20, tn - 1) == candidates[1]);
    CHECK(select_gemm_params(kind, kRoomy, std::nullopt, 1, 1) == candidates[1]);
  }
  // With only one candidate that fits, it serves every shape.
  CHECK(select_gemm_params(DeviceKind::kGpu, GemmLimits{1, 1024}, std::nullopt, 1, 1)
            .work_group_size() == 1);
  // An override applies to every shape.
  CHECK(select_gemm_params(DeviceKind::kCpu, kRoomy, std::string("tile_m=8,tile_n=8,wpt_m=1,"
                                                                 "wpt_n=1"), 1, 1)
            .tile_m == 8);
}
