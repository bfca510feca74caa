// GEMM tile parameters: override parsing, device-fit checks and the fallback order.
#include "gemm/params.h"

#include "support/error.h"

#include <doctest/doctest.h>

using namespace aethercl;
using namespace aethercl::gemm;

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
        "-DGEMM_PAD=1 -DGEMM_VEC=1 -DGEMM_VEC_A=1 -DGEMM_VEC_B=1 -DGEMM_A_KMAJOR=1 "
        "-DGEMM_DIRECT=0 -DGEMM_DBUF=0");
  GemmParams vector{64, 32, 16, 4, 4, 4, 4, 0, 0};
  CHECK(vector.build_options(4, 1).find("-DGEMM_VEC=4 -DGEMM_VEC_A=4 -DGEMM_VEC_B=1 "
                                        "-DGEMM_A_KMAJOR=0") != std::string::npos);
  // m-major A: TILE_M rows of TILE_K + PAD; each tile rounded up to whole vectors.
  CHECK(vector.local_bytes() == (64u * 20 + 16u * 36) * 4);
  GemmParams direct{64, 64, 4, 8, 16, 0, 8, 1, 1};
  CHECK(direct.local_bytes() == 0);
  // The direct kernel never gets vector global loads (it needs no alignment).
  CHECK(direct.build_options(4, 4).find("-DGEMM_VEC_A=1 -DGEMM_VEC_B=1") != std::string::npos);
  CHECK(parse_gemm_params(params.to_string(), GemmParams{}) == params);
  CHECK(parse_gemm_params(direct.to_string(), GemmParams{}) == direct);
  CHECK(direct.to_string() ==
        "tile_m=64,tile_n=64,tile_k=4,wpt_m=8,wpt_n=16,pad=0,vec=8,a_kmajor=1,direct=1,dbuf=0");
}

TEST_CASE("dbuf parses, doubles the local memory and must fit it") {
  const GemmParams single{64, 64, 16, 8, 8, 4, 4, 1, 0};
  const GemmParams prefetched = parse_gemm_params("dbuf=1", single);
  CHECK(prefetched.dbuf == 1);
  CHECK(parse_gemm_params(prefetched.to_string(), GemmParams{}) == prefetched);
  CHECK(prefetched.to_string().ends_with(",direct=0,dbuf=1"));
  CHECK(prefetched.build_options(4, 4).ends_with("-DGEMM_DIRECT=0 -DGEMM_DBUF=1"));
  // Two buffers of A (16 k-rows of 68) and B (16 k-rows of 68).
  CHECK(single.local_bytes() == 2u * 16 * 68 * 4);
  CHECK(prefetched.local_bytes() == 2 * single.local_bytes());
  // 8704 bytes fit single-buffered, 17408 do not fit 16 KiB.
  const GemmLimits small_local{1024, 16 * 1024};
  CHECK_FALSE(gemm_params_problem(single, small_local));
  auto local = gemm_params_problem(prefetched, small_local);
  REQUIRE(local);
  CHECK(local->find("17408 bytes") != std::string::npos);
  CHECK_FALSE(gemm_params_problem(prefetched, kRoomy));
  // The 128x128 / 8x8 / K16 GPU shape with prefetching fits an H100's 48 KiB.
  const GemmParams large = parse_gemm_params(
      "tile_m=128,tile_n=128,tile_k=16,wpt_m=8,wpt_n=8,pad=4,vec=4,dbuf=1", GemmParams{});
  CHECK(large.local_bytes() == 2u * 2 * 16 * 132 * 4);
  CHECK_FALSE(gemm_params_problem(large, GemmLimits{1024, 48 * 1024}));
  // The direct kernel has no local tiles to prefetch into.
  GemmParams direct{64, 64, 4, 8, 16, 0, 8, 1, 1};
  CHECK(direct.build_options().ends_with("-DGEMM_DBUF=0"));
  direct.dbuf = 1;
  auto problem = gemm_params_problem(direct, kRoomy);
  REQUIRE(problem);
  CHECK(problem->find("dbuf=1") != std::string::npos);
}

TEST_CASE("the override applies any subset of keys to the base") {
  GemmParams base{64, 64, 16, 4, 4, 1};
  GemmParams parsed = parse_gemm_params(" tile_k=8 , wpt_n=2,pad=0,", base);
  CHECK(parsed == GemmParams{64, 64, 8, 4, 2, 0});
  CHECK(parse_gemm_params("", base) == base);
}

TEST_CASE("malformed overrides are refused") {
  for (const char* text : {"tile_m", "tile_m=", "tile_m=x", "tile_m=12x", "tile_m=0", "wpt_m=-1",
                           "tile_m=257", "pad=33", "bogus=4", "vec=0", "vec=32", "direct=2",
                           "a_kmajor=-1", "dbuf=2", "dbuf=-1", "dbuf="}) {
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

TEST_CASE("vector widths: 1, 2, 4 tiled, up to 16 direct, dividing wpt_n") {
  for (int vec : {1, 2, 4}) {
    CAPTURE(vec);
    CHECK_FALSE(gemm_params_problem(GemmParams{64, 64, 16, 4, 4, 4, vec, 1, 0}, kRoomy));
  }
  for (int vec : {3, 8, 16}) {
    CAPTURE(vec);
    CHECK(gemm_params_problem(GemmParams{64, 64, 16, 4, 16, 4, vec, 1, 0}, kRoomy));
  }
  CHECK_FALSE(gemm_params_problem(GemmParams{64, 64, 4, 8, 16, 0, 16, 1, 1}, kRoomy));
  CHECK_FALSE(gemm_params_problem(GemmParams{64, 64, 4, 8, 16, 0, 8, 1, 1}, kRoomy));
  CHECK(gemm_params_problem(GemmParams{64, 64, 4, 8, 16, 0, 12, 1, 1}, kRoomy));
  auto divides = gemm_params_problem(GemmParams{64, 64, 16, 4, 2, 4, 4, 1, 0}, kRoomy);
  REQUIRE(divides);
  CHECK(divides->find("wpt_n=2 must be a multiple of vec=4") != std::string::npos);
  // The direct kernel needs no local memory, so it fits a device without any.
  CHECK_FALSE(gemm_params_problem(GemmParams{64, 64, 4, 8, 16, 0, 8, 1, 1}, GemmLimits{32, 0}));
}

TEST_CASE("global loads are vectors only where the operand and the tiles allow") {
  GemmParams tiled{64, 64, 16, 4, 4, 4, 4, 1, 0};
  CHECK(global_load_width(tiled, 1024, 0, 64, 16) == 4);
  CHECK(global_load_width(tiled, 1024, 1024 * 64, 64, 16) == 4);
  CHECK(global_load_width(tiled, 1022, 0, 64, 16) == 1);     // leading dimension
  CHECK(global_load_width(tiled, 1024, 1024 * 3 + 2, 64, 16) == 1);  // batch offset
  CHECK(global_load_width(tiled, 1024, 0, 64, 6) == 1);      // tile not whole vectors
  GemmParams two = tiled;
  two.vec = 2;
  CHECK(global_load_width(two, 1022, 2, 64, 6) == 2);
  GemmParams direct{64, 64, 4, 8, 16, 0, 8, 1, 1};
  CHECK(global_load_width(direct, 1024, 0, 64, 64) == 1);
}

TEST_CASE("parameter sets: LARGE;SMALL over the class defaults, or one list for both") {
  auto defaults = gemm_param_candidates(DeviceKind::kGpu);
  GemmParamSet both = parse_gemm_param_set("tile_k=8", DeviceKind::kGpu);
  GemmParams expected = defaults[0];
  expected.tile_k = 8;
  CHECK(both.large == expected);
  CHECK(both.small == expected);
  GemmParamSet pair = parse_gemm_param_set("tile_k=8;wpt_m=2", DeviceKind::kGpu);
  CHECK(pair.large == expected);
  GemmParams small = defaults[1];
  small.wpt_m = 2;
  CHECK(pair.small == small);
  CHECK(parse_gemm_param_set(to_string(pair), DeviceKind::kCpu) == pair);
  CHECK_THROWS_AS(parse_gemm_param_set("tile_k=8;bogus=1", DeviceKind::kGpu), Error);
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
    CHECK(select_gemm_params(kind, kRoomy, {}, 4096, 4096).params == candidates.front());
  }
}

TEST_CASE("selection falls back to smaller parameters on constrained devices") {
  GemmParams small =
      select_gemm_params(DeviceKind::kGpu, GemmLimits{64, 32 * 1024}, {}, 4096, 4096).params;
  CHECK(small.work_group_size() <= 64);
  CHECK(small == gemm_param_candidates(DeviceKind::kGpu)[1]);
  GemmParams tiny =
      select_gemm_params(DeviceKind::kGpu, GemmLimits{1, 1024}, {}, 4096, 4096).params;
  CHECK(tiny.work_group_size() == 1);
  CHECK(status_of([] {
          select_gemm_params(DeviceKind::kGpu, GemmLimits{0, 0}, {}, 1, 1);
        }) == Status::kDeviceError);
}

TEST_CASE("an override must fit the device and starts from the class default") {
  GemmParamSources sources;
  sources.override_text = "tile_k=8";
  GemmChoice choice = select_gemm_params(DeviceKind::kGpu, kRoomy, sources, 1, 1);
  GemmParams expected = gemm_param_candidates(DeviceKind::kGpu).front();
  expected.tile_k = 8;
  CHECK(choice.params == expected);
  CHECK(std::string(choice.source) == "AETHERCL_GEMM_PARAMS");
  CHECK(status_of([] {
          GemmParamSources bad;
          bad.override_text = "pad=0";
          select_gemm_params(DeviceKind::kGpu, GemmLimits{64, 65536}, bad, 1, 1);
        }) == Status::kInvalidArgument);
}

TEST_CASE("products smaller than the first candidate's tile use the second") {
  for (DeviceKind kind : {DeviceKind::kGpu, DeviceKind::kCpu}) {
    auto candidates = gemm_param_candidates(kind);
    const GemmParams& large = candidates[0];
    const auto tm = static_cast<std::uint64_t>(large.tile_m);
    const auto tn = static_cast<std::uint64_t>(large.tile_n);
    CHECK(select_gemm_params(kind, kRoomy, {}, tm, tn).params == large);
    CHECK(select_gemm_params(kind, kRoomy, {}, tm - 1, 1u << 20).params == candidates[1]);
    CHECK(select_gemm_params(kind, kRoomy, {}, 1u << 20, tn - 1).params == candidates[1]);
    // One column: the direct (CPU) parameters narrow as well.
    CHECK(select_gemm_params(kind, kRoomy, {}, 1, 1).params ==
          narrowed_to_columns(candidates[1], 1));
  }
  // With only one candidate that fits, it serves every shape.
  CHECK(select_gemm_params(DeviceKind::kGpu, GemmLimits{1, 1024}, {}, 1, 1)
            .params.work_group_size() == 1);
  // An override applies to every shape.
  GemmParamSources sources;
  sources.override_text = "tile_m=8,tile_n=8,wpt_m=1,wpt_n=1,vec=1";
  CHECK(select_gemm_params(DeviceKind::kCpu, kRoomy, sources, 1, 1).params.tile_m == 8);
  CHECK(select_gemm_params(DeviceKind::kCpu, kRoomy, sources, 4096, 4096).params.tile_m == 8);
}

TEST_CASE("selection order: override > tuning file > built-in table > class default") {
  GemmParamSet tuned{{128, 128, 8, 8, 8, 4, 4, 1, 0}, {16, 16, 8, 2, 2, 0, 2, 1, 0}};
  GemmParamSet builtin{{64, 128, 16, 4, 16, 4, 4, 1, 0}, {32, 16, 16, 2, 2, 2, 2, 0, 0}};
  GemmParamSources sources;
  sources.tuned = tuned;
  sources.builtin = builtin;
  auto pick = [&](const GemmLimits& limits, std::uint64_t m, std::uint64_t n) {
    GemmChoice choice = select_gemm_params(DeviceKind::kGpu, limits, sources, m, n);
    return std::make_pair(choice.params, std::string(choice.source));
  };
  // Large or small member by the large tile of the set that is used.
  CHECK(pick(kRoomy, 128, 128) == std::make_pair(tuned.large, std::string("tuning file")));
  CHECK(pick(kRoomy, 127, 4096) == std::make_pair(tuned.small, std::string("tuning file")));
  CHECK(pick(kRoomy, 4096, 127) == std::make_pair(tuned.small, std::string("tuning file")));
  // A tuned member that does not fit the device falls through to the next source.
  GemmLimits narrow{128, 64 * 1024};
  CHECK(pick(narrow, 4096, 4096) == std::make_pair(builtin.large, std::string("built-in table")));
  CHECK(pick(narrow, 1, 1) == std::make_pair(tuned.small, std::string("tuning file")));
  sources.tuned.reset();
  CHECK(pick(kRoomy, 64, 128) == std::make_pair(builtin.large, std::string("built-in table")));
  CHECK(pick(kRoomy, 64, 127) == std::make_pair(builtin.small, std::string("built-in table")));
  CHECK(pick(GemmLimits{64, 64 * 1024}, 4096, 4096).second == "class default");
  sources.builtin.reset();
  CHECK(pick(kRoomy, 4096, 4096) ==
        std::make_pair(gemm_param_candidates(DeviceKind::kGpu)[0], std::string("class default")));
  // The override beats everything, for every shape.
  sources.tuned = tuned;
  sources.override_text = "wpt_m=8";
  CHECK(pick(kRoomy, 1, 1).second == "AETHERCL_GEMM_PARAMS");
  CHECK(pick(kRoomy, 1, 1).first.wpt_m == 8);
}

TEST_CASE("direct parameters narrow to products with fewer columns than an item computes") {
  const GemmParams wide{32, 16, 4, 4, 16, 0, 16, 1, 1};
  GemmParams four = narrowed_to_columns(wide, 4);
  CHECK(four.wpt_n == 4);
  CHECK(four.vec == 4);
  CHECK(four.tile_n == 4);  // the same one item along N
  CHECK(four.threads_m() == wide.threads_m());
  CHECK(four.tile_m == wide.tile_m);
  CHECK(narrowed_to_columns(wide, 1).wpt_n == 4);  // at least 4
  CHECK(narrowed_to_columns(wide, 5).wpt_n == 8);
  CHECK(narrowed_to_columns(wide, 9) == wide);  // 16 is the smallest power of two >= 9
  CHECK(narrowed_to_columns(wide, 16) == wide);
  const GemmParams tiled{64, 64, 16, 4, 4, 4, 4, 1, 0};
  CHECK(narrowed_to_columns(tiled, 2) == tiled);  // only the direct kernel narrows
  // Selection applies it to every source but the override.
  GemmParamSources sources;
  sources.builtin = GemmParamSet{wide, wide};
  CHECK(select_gemm_params(DeviceKind::kCpu, kRoomy, sources, 64, 4).params == four);
  sources.override_text = "tile_m=32,tile_n=16,wpt_m=4,wpt_n=16,vec=16,direct=1";
  CHECK(select_gemm_params(DeviceKind::kCpu, kRoomy, sources, 64, 4).params.wpt_n == 16);
}
