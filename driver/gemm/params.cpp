// GEMM parameters: syntax, device-fit checks, per-class defaults and the selection order.
#include "gemm/params.h"

#include "support/error.h"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>

namespace aethercl::gemm {
namespace {

struct Field {
  const char* key;
  int GemmParams::*member;
  int min;
  int max;
};

constexpr Field kFields[] = {
    {"tile_m", &GemmParams::tile_m, 1, 256}, {"tile_n", &GemmParams::tile_n, 1, 256},
    {"tile_k", &GemmParams::tile_k, 1, 128}, {"wpt_m", &GemmParams::wpt_m, 1, 32},
    {"wpt_n", &GemmParams::wpt_n, 1, 32},    {"pad", &GemmParams::pad, 0, 32},
    {"vec", &GemmParams::vec, 1, 16},        {"a_kmajor", &GemmParams::a_kmajor, 0, 1},
    {"direct", &GemmParams::direct, 0, 1},   {"dbuf", &GemmParams::dbuf, 0, 1},
};

constexpr const char* kKnownKeys =
    "tile_m, tile_n, tile_k, wpt_m, wpt_n, pad, vec, a_kmajor, direct, dbuf";

std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

}  // namespace

std::size_t GemmParams::work_group_size() const {
  return static_cast<std::size_t>(threads_m()) * static_cast<std::size_t>(threads_n());
}

std::uint64_t GemmParams::local_bytes() const {
  if (direct) return 0;
  // As kernels/gemm.cl lays the tiles out: padded rows, each tile rounded up to whole vectors,
  // two buffers of each with dbuf.
  const std::uint64_t a_floats = a_kmajor ? static_cast<std::uint64_t>(tile_k) * (tile_m + pad)
                                          : static_cast<std::uint64_t>(tile_m) * (tile_k + pad);
  const std::uint64_t b_floats = static_cast<std::uint64_t>(tile_k) * (tile_n + pad);
  const auto width = static_cast<std::uint64_t>(vec);
  const std::uint64_t buffers = dbuf ? 2 : 1;
  return buffers * (round_up(a_floats, width) + round_up(b_floats, width)) * sizeof(float);
}

std::string GemmParams::build_options(int vec_a, int vec_b) const {
  return fmt::format("-DGEMM_TILE_M={} -DGEMM_TILE_N={} -DGEMM_TILE_K={} -DGEMM_WPT_M={} "
                     "-DGEMM_WPT_N={} -DGEMM_PAD={} -DGEMM_VEC={} -DGEMM_VEC_A={} -DGEMM_VEC_B={} "
                     "-DGEMM_A_KMAJOR={} -DGEMM_DIRECT={} -DGEMM_DBUF={}",
                     tile_m, tile_n, tile_k, wpt_m, wpt_n, pad, vec, direct ? 1 : vec_a,
                     direct ? 1 : vec_b, a_kmajor, direct, direct ? 0 : dbuf);
}

std::string GemmParams::to_string() const {
  return fmt::format("tile_m={},tile_n={},tile_k={},wpt_m={},wpt_n={},pad={},vec={},a_kmajor={},"
                     "direct={},dbuf={}",
                     tile_m, tile_n, tile_k, wpt_m, wpt_n, pad, vec, a_kmajor, direct, dbuf);
}

std::string to_string(const GemmParamSet& set) {
  return set.large.to_string() + ";" + set.small.to_string();
}

std::optional<std::string> gemm_params_problem(const GemmParams& params, const GemmLimits& limits) {
  for (const Field& field : kFields) {
    int value = params.*field.member;
    if (value < field.min || value > field.max) {
      return fmt::format("{}={} is outside [{}, {}]", field.key, value, field.min, field.max);
    }
  }
  if (params.tile_m % params.wpt_m != 0 || params.tile_n % params.wpt_n != 0) {
    return fmt::format("tile_m={} and tile_n={} must be multiples of wpt_m={} and wpt_n={}",
                       params.tile_m, params.tile_n, params.wpt_m, params.wpt_n);
  }
  const bool vec_ok = params.vec == 1 || params.vec == 2 || params.vec == 4 ||
                      (params.direct && (params.vec == 8 || params.vec == 16));
  if (!vec_ok) {
    return fmt::format("vec={} is not one of {}", params.vec,
                       params.direct ? "1, 2, 4, 8, 16 (direct kernel)" : "1, 2, 4 (tiled kernel)");
  }
  if (params.wpt_n % params.vec != 0) {
    return fmt::format("wpt_n={} must be a multiple of vec={}", params.wpt_n, params.vec);
  }
  if (params.direct && params.dbuf) {
    return "dbuf=1 applies to the tiled kernel only (direct=0)";
  }
  if (params.work_group_size() > limits.max_work_group_size) {
    return fmt::format("a work-group of {} items exceeds the device maximum of {}",
                       params.work_group_size(), limits.max_work_group_size);
  }
  if (params.local_bytes() > limits.local_mem_bytes) {
    return fmt::format("{} bytes of local memory exceed the device's {}", params.local_bytes(),
                       limits.local_mem_bytes);
  }
  return std::nullopt;
}

GemmParams parse_gemm_params(const std::string& text, GemmParams base) {
  std::string_view rest(text);
  while (!rest.empty()) {
    std::size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;
    std::size_t equals = item.find('=');
    if (equals == std::string_view::npos) {
      fail(Status::kInvalidArgument, "GEMM parameter '{}' is not key=value", item);
    }
    std::string_view key = trim(item.substr(0, equals));
    std::string_view value = trim(item.substr(equals + 1));
    const Field* field = nullptr;
    for (const Field& candidate : kFields) {
      if (key == candidate.key) field = &candidate;
    }
    if (field == nullptr) {
      fail(Status::kInvalidArgument,
           "unknown GEMM parameter '{}' (known: {})", key, kKnownKeys);
    }
    int number = 0;
    auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (error != std::errc() || end != value.data() + value.size() || number < field->min ||
        number > field->max) {
      fail(Status::kInvalidArgument, "GEMM parameter {}='{}' is not an integer in [{}, {}]", key,
           value, field->min, field->max);
    }
    base.*field->member = number;
  }
  return base;
}

GemmParamSet parse_gemm_param_set(const std::string& text, DeviceKind kind) {
  const std::vector<GemmParams> defaults = gemm_param_candidates(kind);
  const std::size_t semicolon = text.find(';');
  if (semicolon == std::string::npos) {
    GemmParams params = parse_gemm_params(text, defaults[0]);
    return {params, params};
  }
  return {parse_gemm_params(text.substr(0, semicolon), defaults[0]),
          parse_gemm_params(text.substr(semicolon + 1), defaults[1])};
}

int global_load_width(const GemmParams& params, std::uint64_t contiguous, std::uint64_t stride,
                      int tile_rows, int tile_cols) {
  const int width = params.vec;
  if (params.direct || width <= 1) return 1;
  const auto w = static_cast<std::uint64_t>(width);
  bool aligned = contiguous % w == 0 && stride % w == 0 && tile_rows % width == 0 &&
                 tile_cols % width == 0;
  return aligned ? width : 1;
}

std::vector<GemmParams> gemm_param_candidates(DeviceKind kind) {
  // CPUs (PoCL measured): the direct kernel with a wide block of row vectors. Other devices: the
  // tiled kernel with float4 loads, conventional starting points for the tuner.
  std::vector<GemmParams> candidates;
  if (kind == DeviceKind::kCpu) {
    candidates.push_back({64, 64, 4, 8, 16, 0, 8, 1, 1});
    candidates.push_back({32, 16, 4, 4, 16, 0, 8, 1, 1});
  } else {
    candidates.push_back({64, 64, 16, 4, 4, 4, 4, 1, 0});
    candidates.push_back({32, 32, 16, 4, 4, 4, 4, 1, 0});
  }
  const GemmParams fallbacks[] = {{16, 16, 16, 2, 2, 1}, {8, 8, 8, 2, 2, 0}, {4, 4, 4, 4, 4, 0}};
  candidates.insert(candidates.end(), std::begin(fallbacks), std::end(fallbacks));
  return candidates;
}

namespace {

bool is_small(const GemmParams& large, std::uint64_t m, std::uint64_t n) {
  return m < static_cast<std::uint64_t>(large.tile_m) ||
         n < static_cast<std::uint64_t>(large.tile_n);
}

GemmChoice select_unnarrowed(DeviceKind kind, const GemmLimits& limits,
                             const GemmParamSources& sources, std::uint64_t m, std::uint64_t n) {
  if (sources.override_text) {
    GemmParams params = parse_gemm_params(*sources.override_text, gemm_param_candidates(kind)[0]);
    if (auto problem = gemm_params_problem(params, limits)) {
      fail(Status::kInvalidArgument, "AETHERCL_GEMM_PARAMS '{}' does not fit the device: {}",
           *sources.override_text, *problem);
    }
    return {params, "AETHERCL_GEMM_PARAMS"};
  }
  const std::pair<const std::optional<GemmParamSet>*, const char*> sets[] = {
      {&sources.tuned, "tuning file"}, {&sources.builtin, "built-in table"}};
  for (const auto& [set, source] : sets) {
    if (!*set) continue;
    const GemmParams& params = is_small((*set)->large, m, n) ? (*set)->small : (*set)->large;
    if (!gemm_params_problem(params, limits)) return {params, source};
  }
  std::vector<GemmParams> fitting;
  for (const GemmParams& params : gemm_param_candidates(kind)) {
    if (!gemm_params_problem(params, limits)) fitting.push_back(params);
  }
  if (fitting.empty()) {
    fail(Status::kDeviceError, "no GEMM tile parameters fit the device (max work-group {}, {} "
         "bytes of local memory)", limits.max_work_group_size, limits.local_mem_bytes);
  }
  const GemmParams& first = fitting.front();
  bool small = is_small(first, m, n);
  return {small && fitting.size() > 1 ? fitting[1] : first, "class default"};
}

}  // namespace

GemmParams narrowed_to_columns(const GemmParams& params, std::uint64_t n) {
  if (!params.direct || n >= static_cast<std::uint64_t>(params.wpt_n)) return params;
  int width = 4;
  while (static_cast<std::uint64_t>(width) < n) width *= 2;
  if (width >= params.wpt_n) return params;
  GemmParams narrow = params;
  narrow.tile_n = params.threads_n() * width;
  narrow.wpt_n = width;
  narrow.vec = std::min(params.vec, width);
  return narrow;
}

GemmChoice select_gemm_params(DeviceKind kind, const GemmLimits& limits,
                              const GemmParamSources& sources, std::uint64_t m, std::uint64_t n) {
  GemmChoice choice = select_unnarrowed(kind, limits, sources, m, n);
  if (sources.override_text) return choice;  // the override is taken as given
  GemmParams narrow = narrowed_to_columns(choice.params, n);
  if (!gemm_params_problem(narrow, limits)) choice.params = narrow;
  return choice;
}

}  // namespace aethercl::gemm
