// GEMM tile parameters: per-class defaults, override parsing and device-fit checks.
#include "ops/gemm_params.h"

#include "support/error.h"

#include <charconv>
#include <fmt/format.h>

namespace aethercl::ops {
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
};

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
  return static_cast<std::uint64_t>(tile_k) * (tile_m + pad + tile_n + pad) * sizeof(float);
}

std::string GemmParams::build_options() const {
  return fmt::format("-DGEMM_TILE_M={} -DGEMM_TILE_N={} -DGEMM_TILE_K={} -DGEMM_WPT_M={} "
                     "-DGEMM_WPT_N={} -DGEMM_PAD={}",
                     tile_m, tile_n, tile_k, wpt_m, wpt_n, pad);
}

std::string GemmParams::to_string() const {
  return fmt::format("tile_m={},tile_n={},tile_k={},wpt_m={},wpt_n={},pad={}", tile_m, tile_n,
                     tile_k, wpt_m, wpt_n, pad);
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
           "unknown GEMM parameter '{}' (known: tile_m, tile_n, tile_k, wpt_m, wpt_n, pad)", key);
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

std::vector<GemmParams> gemm_param_candidates(DeviceKind kind) {
  // Measured on PoCL (1024^3 and the llm.py shapes): few work-items with large register blocks
  // are fastest there. GPU values are conventional starting points for a tuner.
  std::vector<GemmParams> candidates;
  if (kind == DeviceKind::kCpu) {
    candidates.push_back({128, 128, 16, 16, 16, 0});
    candidates.push_back({32, 32, 16, 8, 8, 0});
  } else {
    candidates.push_back({64, 64, 16, 4, 4, 1});
    candidates.push_back({32, 32, 16, 4, 4, 1});
  }
  const GemmParams fallbacks[] = {{16, 16, 16, 2, 2, 1}, {8, 8, 8, 2, 2, 0}, {4, 4, 4, 4, 4, 0}};
  candidates.insert(candidates.end(), std::begin(fallbacks), std::end(fallbacks));
  return candidates;
}

GemmParams select_gemm_params(DeviceKind kind, const GemmLimits& limits,
                              const std::optional<std::string>& override_text, std::uint64_t m,
                              std::uint64_t n) {
  if (override_text) {
    GemmParams params = parse_gemm_params(*override_text, gemm_param_candidates(kind).front());
    if (auto problem = gemm_params_problem(params, limits)) {
      fail(Status::kInvalidArgument, "AETHERCL_GEMM_PARAMS '{}' does not fit the device: {}",
           *override_text, *problem);
    }
    return params;
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
  bool small = m < static_cast<std::uint64_t>(first.tile_m) ||
               n < static_cast<std::uint64_t>(first.tile_n);
  return small && fitting.size() > 1 ? fitting[1] : first;
}

}  // namespace aethercl::ops
