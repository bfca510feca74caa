// Tile parameters of the GEMM engine (kernels/gemm.cl): defaults per device class, the
// AETHERCL_GEMM_PARAMS override for tuning, and the checks that a device can run a choice.
#pragma once

#include "runtime/device_info.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace aethercl::ops {

struct GemmParams {
  int tile_m = 64;  // output rows per work-group
  int tile_n = 64;  // output columns per work-group
  int tile_k = 16;  // depth of one local-memory stage
  int wpt_m = 4;    // outputs per work-item along M
  int wpt_n = 4;    // outputs per work-item along N
  int pad = 1;      // floats of padding per local-memory row

  int threads_m() const { return tile_m / wpt_m; }
  int threads_n() const { return tile_n / wpt_n; }
  std::size_t work_group_size() const;
  std::uint64_t local_bytes() const;
  // The -D options kernels/gemm.cl is built with.
  std::string build_options() const;
  // "tile_m=64,tile_n=64,tile_k=16,wpt_m=4,wpt_n=4,pad=1": the AETHERCL_GEMM_PARAMS syntax.
  std::string to_string() const;

  bool operator==(const GemmParams&) const = default;
};

struct GemmLimits {
  std::size_t max_work_group_size = 1;
  std::uint64_t local_mem_bytes = 0;
};

// Why a device with these limits cannot run the parameters (shape rules, work-group size, local
// memory), or nullopt when it can.
std::optional<std::string> gemm_params_problem(const GemmParams& params, const GemmLimits& limits);

// Applies "key=value,..." (keys tile_m, tile_n, tile_k, wpt_m, wpt_n, pad; any subset) to base.
// Throws kInvalidArgument for unknown keys and malformed or out-of-range values.
GemmParams parse_gemm_params(const std::string& text, GemmParams base);

// Parameters for a device class in order of preference: the first for products that fill at
// least one of its tiles in both M and N, the second for smaller or skinny products, then
// fallbacks for devices with small work-group or local-memory limits. The last runs anywhere.
std::vector<GemmParams> gemm_param_candidates(DeviceKind kind);

// The parameters for an m x n product (per batch): the override (when given), which must fit
// the limits; else, among the candidates that fit, the first one unless the product is smaller
// than its tile in M or N and another fits, in which case the next. Throws kInvalidArgument for
// an override that does not fit and kDeviceError when no candidate fits.
GemmParams select_gemm_params(DeviceKind kind, const GemmLimits& limits,
                              const std::optional<std::string>& override_text, std::uint64_t m,
                              std::uint64_t n);

}  // namespace aethercl::ops
