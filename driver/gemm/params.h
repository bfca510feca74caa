// Parameters of the GEMM engine (kernels/gemm.cl): their syntax, the checks that a device can run
// a choice, the defaults per device class and the selection among the sources of parameters
// (AETHERCL_GEMM_PARAMS > tuning file > built-in table > class defaults; gemm/database.h).
#pragma once

#include "runtime/device_info.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace aethercl::gemm {

struct GemmParams {
  int tile_m = 64;    // output rows per work-group
  int tile_n = 64;    // output columns per work-group
  int tile_k = 16;    // tiled: depth of one local-memory stage; direct: k-loop unroll factor
  int wpt_m = 4;      // outputs per work-item along M
  int wpt_n = 4;      // outputs per work-item along N
  int pad = 1;        // tiled: floats of padding per local-memory row
  int vec = 1;        // tiled: global-load and local-read vector width (1, 2, 4);
                      // direct: width of the register block's row vectors (1, 2, 4, 8, 16)
  int a_kmajor = 1;   // tiled: 1 stores the A tile k-major (transposed) in local memory
  int direct = 0;     // 1: the direct kernel (no local memory; for CPUs)
  int dbuf = 0;       // tiled: 1 prefetches the next K-tile into registers during the math of
                      // the current one, with two local buffers (twice the local memory)

  int threads_m() const { return tile_m / wpt_m; }
  int threads_n() const { return tile_n / wpt_n; }
  std::size_t work_group_size() const;
  std::uint64_t local_bytes() const;
  // The -D options kernels/gemm.cl is built with, given the global-load widths of A and B that
  // the operands allow (global_load_width; always 1 for the direct kernel).
  std::string build_options(int vec_a = 1, int vec_b = 1) const;
  // "tile_m=64,tile_n=64,...,direct=0,dbuf=0": the AETHERCL_GEMM_PARAMS syntax, every key.
  std::string to_string() const;

  bool operator==(const GemmParams&) const = default;
};

// The parameters of one device: `large` for products that fill at least one of its tiles in both
// M and N, `small` for the others (skinny and small products).
struct GemmParamSet {
  GemmParams large;
  GemmParams small;
  bool operator==(const GemmParamSet&) const = default;
};

struct GemmLimits {
  std::size_t max_work_group_size = 1;
  std::uint64_t local_mem_bytes = 0;
};

// Why a device with these limits cannot run the parameters (ranges, shape rules, work-group
// size, local memory), or nullopt when it can.
std::optional<std::string> gemm_params_problem(const GemmParams& params, const GemmLimits& limits);

// Applies "key=value,..." (any subset of the keys of to_string()) to base. Throws
// kInvalidArgument for unknown keys and malformed or out-of-range values.
GemmParams parse_gemm_params(const std::string& text, GemmParams base);

// "LARGE;SMALL" (two parameter lists, each applied to the class default of its role) or a single
// list used for both. Throws like parse_gemm_params.
GemmParamSet parse_gemm_param_set(const std::string& text, DeviceKind kind);
std::string to_string(const GemmParamSet& set);  // "LARGE;SMALL"

// The vector width for the global loads of one operand: params.vec when the tiled kernel can use
// aligned vectors of that width, i.e. the operand's contiguous dimension (`contiguous`), its batch
// stride and both tile sizes it is staged in are multiples of it; else 1.
int global_load_width(const GemmParams& params, std::uint64_t contiguous, std::uint64_t stride,
                      int tile_rows, int tile_cols);

// Class defaults in order of preference: [0] for large products, [1] for small ones, then
// fallbacks for devices with small work-group or local-memory limits. The last runs anywhere.
std::vector<GemmParams> gemm_param_candidates(DeviceKind kind);

// Where the parameters of a device can come from, highest priority first.
struct GemmParamSources {
  std::optional<std::string> override_text;  // AETHERCL_GEMM_PARAMS: every shape
  std::optional<GemmParamSet> tuned;         // the tuning file's entry for the device
  std::optional<GemmParamSet> builtin;       // the built-in table's entry
};

struct GemmChoice {
  GemmParams params;
  const char* source;  // "AETHERCL_GEMM_PARAMS", "tuning file", "built-in table", "class default"
};

// The parameters for an m x n product (per batch). The override, when given, must fit the limits
// (else kInvalidArgument). Otherwise the first of tuned, builtin and the class defaults whose
// member for the shape fits: `small` when m < large.tile_m or n < large.tile_n, else `large`; the
// class defaults fall back along gemm_param_candidates. kDeviceError when nothing fits. Direct
// parameters (from any source but the override) are narrowed to products with fewer columns than
// their wpt_n (narrowed_to_columns).
GemmChoice select_gemm_params(DeviceKind kind, const GemmLimits& limits,
                              const GemmParamSources& sources, std::uint64_t m, std::uint64_t n);

// Direct-kernel parameters for a product of n < wpt_n columns: wpt_n (and vec, tile_n with the
// same items along N) cut to the smallest power of two >= n, at least 4, so an item does not
// compute and drop columns past N: measured faster on PoCL for the attention product's few
// columns (docs/PERFORMANCE.md). Other parameters are returned unchanged.
GemmParams narrowed_to_columns(const GemmParams& params, std::uint64_t n);

}  // namespace aethercl::gemm
