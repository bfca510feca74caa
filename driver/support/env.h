// Environment configuration: every AETHERCL_* variable the driver reads, parsed strictly. A value
// that does not parse is never turned into something else silently: the reader warns once per
// variable (naming the variable, the value and what is expected) and uses the default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace aethercl::env {

// Raw value of a variable, or nullopt when unset or empty.
std::optional<std::string> get(const char* name);
// "1", "true", "yes", "on" are true; "0", "false", "no", "off" false (any case, spaces
// trimmed); unset gives fallback; anything else warns and gives fallback.
bool flag(const char* name, bool fallback);
// A byte size: a decimal number with an optional unit K, M, G or T (powers of 1024; "KB",
// "KiB", "MiB", … and lower case accepted; a fraction only with a unit: "1.5G"), at least
// `minimum`. nullopt when unset or malformed (malformed warns).
std::optional<std::uint64_t> bytes(const char* name, std::uint64_t minimum = 0);
// A plain count (no units) in [minimum, maximum]; nullopt when unset or malformed (warns).
std::optional<std::uint64_t> count(const char* name, std::uint64_t minimum, std::uint64_t maximum);
// Any plain non-negative count (no units); nullopt when unset or malformed (warns).
std::optional<std::uint64_t> count(const char* name);
// A comma-separated list, entries trimmed; an empty entry warns and is dropped.
std::vector<std::string> list(const char* name);

// Parsers behind the readers above, for values that do not come from the environment (tests).
std::optional<bool> parse_flag(const std::string& text);
std::optional<std::uint64_t> parse_bytes(const std::string& text);
std::optional<std::uint64_t> parse_count(const std::string& text);

// Reports a malformed value: warns once per variable ("NAME='value' is not <expected>; <what
// happens instead>"). Used by the readers above and by code that parses a variable itself.
void report_malformed(const char* name, const std::string& value, const std::string& expected,
                      const std::string& consequence);
// Marks the variable reported; true only the first time (for readers that log by themselves).
bool claim_report(const char* name);
// Whether a malformed value of this variable has been reported (tests).
bool was_reported(const char* name);

// The variables (documented in README.md).
inline constexpr const char* kDevices = "AETHERCL_DEVICES";          // visible devices
inline constexpr const char* kLogLevel = "AETHERCL_LOG_LEVEL";       // spdlog level name
inline constexpr const char* kSync = "AETHERCL_SYNC";                // finish after every call
inline constexpr const char* kKernelDir = "AETHERCL_KERNEL_DIR";     // read .cl from here
inline constexpr const char* kCacheDir = "AETHERCL_CACHE_DIR";       // binary cache location
inline constexpr const char* kCache = "AETHERCL_CACHE";  // 0: no cache; 1: also on PoCL
inline constexpr const char* kMemoryLimit = "AETHERCL_MEMORY_LIMIT"; // per-device byte cap
inline constexpr const char* kPool = "AETHERCL_POOL";                // 0 disables caching
inline constexpr const char* kTrace = "AETHERCL_TRACE";              // Chrome-trace output path
inline constexpr const char* kDeterministic = "AETHERCL_DETERMINISTIC";  // 0: atomic fast paths
inline constexpr const char* kWorkGroupLimit = "AETHERCL_WG_LIMIT";  // testing: cap local sizes
inline constexpr const char* kRowGroup = "AETHERCL_ROW_GROUP";  // testing: row-kernel group size
inline constexpr const char* kGemmParams = "AETHERCL_GEMM_PARAMS";   // GEMM tile override
inline constexpr const char* kSimHostMatmul = "AETHERCL_SIM_HOST_MATMUL";  // 1: host fallback
inline constexpr const char* kFastMath = "AETHERCL_FAST_MATH";  // 0/1: force kernels' math
inline constexpr const char* kWarpShuffle = "AETHERCL_WARP_SHUFFLE";  // 0: no PTX shuffles
inline constexpr const char* kCpuKernels = "AETHERCL_CPU_KERNELS";  // 0: GPU forms on CPUs
inline constexpr const char* kTuningFile = "AETHERCL_TUNING_FILE";   // GEMM tuning database
inline constexpr const char* kSharedContext = "AETHERCL_SHARED_CONTEXT";  // 0: a context per device
inline constexpr const char* kPeerPath = "AETHERCL_PEER_PATH";       // device | host | auto
inline constexpr const char* kCollectiveChunk = "AETHERCL_COLLECTIVE_CHUNK";  // pipeline chunk bytes
inline constexpr const char* kVendorEngines = "AETHERCL_VENDOR_ENGINES";  // 0: no CUDA/NCCL
inline constexpr const char* kLibCuda = "AETHERCL_LIBCUDA";          // libcuda.so.1 to dlopen
inline constexpr const char* kLibNccl = "AETHERCL_LIBNCCL";          // libnccl.so.2 to dlopen
inline constexpr const char* kEngineImportBytes = "AETHERCL_ENGINE_IMPORT_BYTES";  // staging piece
inline constexpr const char* kSubmitThread = "AETHERCL_SUBMIT_THREAD";  // 0|1: submission thread
inline constexpr const char* kReadPath = "AETHERCL_READ_PATH";       // pinned|direct reads
inline constexpr const char* kRowKernel = "AETHERCL_ROW_KERNEL";     // loop: no register path
inline constexpr const char* kRowGroupMin = "AETHERCL_ROW_GROUP_MIN";  // benchmarks: register groups
inline constexpr const char* kReduceLaneRows = "AETHERCL_REDUCE_LANE_ROWS";  // benchmarks: chunking
inline constexpr const char* kLaunchCounters = "AETHERCL_LAUNCH_COUNTERS";  // 0: two-launch folds
inline constexpr const char* kMatmulPrecision = "AETHERCL_MATMUL_PRECISION";  // seed matmul mode
inline constexpr const char* kTensorCores = "AETHERCL_TENSOR_CORES";  // 0: portable GEMM only
inline constexpr const char* kMmaParams = "AETHERCL_MMA_PARAMS";  // tensor-core tile override
inline constexpr const char* kGemmNarrowing = "AETHERCL_GEMM_NARROWING";  // registers | copies
inline constexpr const char* kConvColsBytes = "AETHERCL_CONV_COLS_BYTES";  // testing: im2col chunk
inline constexpr const char* kKernelLog = "AETHERCL_KERNEL_LOG";     // 0: no kernel log
inline constexpr const char* kCaptureDir = "AETHERCL_CAPTURE_DIR";  // launches written here
inline constexpr const char* kCaptureKernels = "AETHERCL_CAPTURE_KERNELS";  // name substrings
inline constexpr const char* kCaptureLimit = "AETHERCL_CAPTURE_LIMIT";  // launches per kernel
inline constexpr const char* kCheckBounds = "AETHERCL_CHECK_BOUNDS";  // 1: guard zones on buffers
inline constexpr const char* kGraphCommandBuffer = "AETHERCL_GRAPH_COMMAND_BUFFER";  // 0: batch replay

}  // namespace aethercl::env
