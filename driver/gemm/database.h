// The GEMM tuning database: the tuning file written by tools/tune_gemm.py (keyed by device name,
// driver version and library version) and the built-in table of known devices.
#pragma once

#include "gemm/params.h"

#include <filesystem>
#include <optional>
#include <string>

namespace aethercl::gemm {

struct GemmTuningKey {
  std::string device;   // CL_DEVICE_NAME
  std::string driver;   // CL_DRIVER_VERSION
  std::string library;  // aethercl_version()
  bool operator==(const GemmTuningKey&) const = default;
};

// The tuning file: AETHERCL_TUNING_FILE, else gemm_tuning.tsv in the kernel binary cache's
// directory (BinaryCache::default_directory); nullopt when neither can be determined.
std::optional<std::filesystem::path> gemm_tuning_path();

// File format (UTF-8 text): '#' lines are comments; every other non-empty line is one entry of
// five tab-separated fields: device, driver, library, large parameters, small parameters (each
// in the AETHERCL_GEMM_PARAMS syntax). A later entry for the same key replaces an earlier one.
//
// The entry for key, parsed over the class defaults of kind. A missing or unreadable file, or no
// entry, gives nullopt; a malformed entry is logged and ignored.
std::optional<GemmParamSet> load_gemm_tuning(const std::filesystem::path& path,
                                             const GemmTuningKey& key, DeviceKind kind);

// Adds or replaces the entry for key (other entries are kept), through a temporary file renamed
// over the old one. Throws kInvalidArgument for keys containing tabs or newlines and
// kDeviceError when the file cannot be written.
void store_gemm_tuning(const std::filesystem::path& path, const GemmTuningKey& key,
                       const GemmParamSet& set);

// The built-in entry of the first known device whose name contains the table's substring.
std::optional<GemmParamSet> builtin_gemm_params(const std::string& device_name, DeviceKind kind);

// The tuning file's entry for a device, read once per process and path (thread-safe).
std::optional<GemmParamSet> cached_gemm_tuning(const GemmTuningKey& key, DeviceKind kind);

}  // namespace aethercl::gemm
