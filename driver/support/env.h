// Environment configuration: every AETHERCL_* variable the driver reads, in one place.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace aethercl::env {

// Raw value of a variable, or nullopt when unset or empty.
std::optional<std::string> get(const char* name);
// "1", "true", "yes", "on" (any case) are true; "0", "false", "no", "off" false; else fallback.
bool flag(const char* name, bool fallback);
// A non-negative integer with an optional K/M/G suffix (powers of 1024), or nullopt.
std::optional<std::uint64_t> bytes(const char* name);
// A plain non-negative integer (work-item counts, group sizes: no unit suffix), or nullopt; a
// malformed value is refused with a warning naming the variable and the value.
std::optional<std::uint64_t> count(const char* name);

// The variables (documented in README.md).
inline constexpr const char* kDevices = "AETHERCL_DEVICES";          // visible devices
inline constexpr const char* kLogLevel = "AETHERCL_LOG_LEVEL";       // spdlog level name
inline constexpr const char* kSync = "AETHERCL_SYNC";                // finish after every call
inline constexpr const char* kKernelDir = "AETHERCL_KERNEL_DIR";     // read .cl from here
inline constexpr const char* kCacheDir = "AETHERCL_CACHE_DIR";       // binary cache location
inline constexpr const char* kCache = "AETHERCL_CACHE";              // 0 disables the cache
inline constexpr const char* kMemoryLimit = "AETHERCL_MEMORY_LIMIT"; // per-device byte cap
inline constexpr const char* kPool = "AETHERCL_POOL";                // 0 disables caching
inline constexpr const char* kTrace = "AETHERCL_TRACE";              // Chrome-trace output path
inline constexpr const char* kDeterministic = "AETHERCL_DETERMINISTIC";  // 0: atomic fast paths
inline constexpr const char* kWorkGroupLimit = "AETHERCL_WG_LIMIT";  // testing: cap local sizes
inline constexpr const char* kRowGroup = "AETHERCL_ROW_GROUP";  // testing: row-kernel group size
inline constexpr const char* kGemmParams = "AETHERCL_GEMM_PARAMS";   // GEMM tile override
inline constexpr const char* kSimHostMatmul = "AETHERCL_SIM_HOST_MATMUL";  // 1: host fallback
inline constexpr const char* kTuningFile = "AETHERCL_TUNING_FILE";   // GEMM tuning database
inline constexpr const char* kKernelLog = "AETHERCL_KERNEL_LOG";     // 0: no kernel log

}  // namespace aethercl::env
