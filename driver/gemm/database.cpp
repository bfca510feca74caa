// GEMM tuning database: the tuning file (load, store, per-process cache) and the built-in table.
#include "gemm/database.h"

#include "runtime/binary_cache.h"
#include "support/env.h"
#include "support/error.h"
#include "support/log.h"
#include "support/process.h"

#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>
#include <vector>

namespace aethercl::gemm {
namespace {

// Known devices: a substring of CL_DEVICE_NAME, then the large and small parameters (any keys
// left out keep the device class default). One line per device; the first match wins.
struct KnownDevice {
  const char* name_substring;
  const char* large;
  const char* small;
};

constexpr KnownDevice kKnownDevices[] = {
    // NVIDIA H200 and H100 80GB: the large entry is the double-buffered kernel tuned on the H100
    // (tools/tune_gemm.py), also the fastest measured on the H200 (docs/PERFORMANCE.md). Small
    // entries as tuned on each card.
    {"NVIDIA H200", "tile_m=128,tile_n=128,tile_k=8,wpt_m=8,wpt_n=8,pad=4,vec=4,a_kmajor=1,direct=0,dbuf=1",
     "tile_m=32,tile_n=32,tile_k=8,wpt_m=4,wpt_n=4,pad=1,vec=1,a_kmajor=1,direct=0"},
    {"NVIDIA H100", "tile_m=128,tile_n=128,tile_k=8,wpt_m=8,wpt_n=8,pad=4,vec=4,a_kmajor=1,direct=0,dbuf=1",
     "tile_m=32,tile_n=32,tile_k=8,wpt_m=4,wpt_n=4,pad=4,vec=4,a_kmajor=1,direct=0,dbuf=0"},
    // PoCL on AVX-512 CPUs (tools/tune_gemm.py on a 2-core Xeon, shared machine).
    {"avx512", "tile_m=96,tile_n=128,tile_k=4,wpt_m=12,wpt_n=32,vec=16,direct=1",
     "tile_m=32,tile_n=16,tile_k=4,wpt_m=4,wpt_n=16,vec=16,direct=1"},
};

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (;;) {
    std::size_t tab = line.find('\t', start);
    std::size_t length = tab == std::string::npos ? std::string::npos : tab - start;
    fields.push_back(line.substr(start, length));
    if (tab == std::string::npos) return fields;
    start = tab + 1;
  }
}

bool valid_field(const std::string& text) {
  return text.find_first_of("\t\r\n") == std::string::npos;
}

}  // namespace

std::optional<std::filesystem::path> gemm_tuning_path() {
  if (auto file = env::get(env::kTuningFile)) return std::filesystem::path(*file);
  if (auto directory = BinaryCache::default_directory()) return *directory / "gemm_tuning.tsv";
  return std::nullopt;
}

std::optional<GemmParamSet> load_gemm_tuning(const std::filesystem::path& path,
                                             const GemmTuningKey& key, DeviceKind kind) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  std::optional<GemmParamSet> found;
  std::string line;
  for (int number = 1; std::getline(file, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.front() == '#') continue;
    std::vector<std::string> fields = split_tabs(line);
    if (fields.size() != 5) {
      log().warn("{}:{}: a GEMM tuning entry needs 5 tab-separated fields, not {}; ignored",
                 path.string(), number, fields.size());
      continue;
    }
    if (fields[0] != key.device || fields[1] != key.driver || fields[2] != key.library) continue;
    try {
      GemmParamSet set = parse_gemm_param_set(fields[3] + ";" + fields[4], kind);
      if (auto problem = gemm_params_problem(set.large, GemmLimits{1u << 30, 1ull << 40})) {
        fail(Status::kInvalidArgument, "large: {}", *problem);
      }
      if (auto problem = gemm_params_problem(set.small, GemmLimits{1u << 30, 1ull << 40})) {
        fail(Status::kInvalidArgument, "small: {}", *problem);
      }
      found = set;
    } catch (const Error& error) {
      log().warn("{}:{}: GEMM tuning entry ignored: {}", path.string(), number, error.what());
    }
  }
  return found;
}

void store_gemm_tuning(const std::filesystem::path& path, const GemmTuningKey& key,
                       const GemmParamSet& set) {
  if (!valid_field(key.device) || !valid_field(key.driver) || !valid_field(key.library)) {
    fail(Status::kInvalidArgument, "a GEMM tuning key may not contain tabs or line breaks");
  }
  std::vector<std::string> kept;
  {
    std::ifstream file(path);
    std::string line;
    while (file && std::getline(file, line)) {
      std::vector<std::string> fields = split_tabs(line);
      bool same = fields.size() >= 3 && fields[0] == key.device && fields[1] == key.driver &&
                  fields[2] == key.library;
      if (!same && !line.empty()) kept.push_back(line);
    }
  }
  if (kept.empty() || kept.front().rfind('#', 0) != 0) {
    kept.insert(kept.begin(), "# AetherCL GEMM tuning: device, driver, library, large, small");
  }
  kept.push_back(key.device + "\t" + key.driver + "\t" + key.library + "\t" +
                 set.large.to_string() + "\t" + set.small.to_string());
  std::error_code error;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), error);
  std::filesystem::path temp = path;
  temp += ".tmp." + std::to_string(current_process_id());
  {
    std::ofstream out(temp, std::ios::trunc);
    for (const std::string& line : kept) out << line << '\n';
    if (!out) {
      std::filesystem::remove(temp, error);
      fail(Status::kDeviceError, "cannot write the GEMM tuning file {}", temp.string());
    }
  }
  std::filesystem::rename(temp, path, error);
  if (error) {
    std::filesystem::remove(temp, error);
    fail(Status::kDeviceError, "cannot replace the GEMM tuning file {}", path.string());
  }
}

std::optional<GemmParamSet> builtin_gemm_params(const std::string& device_name, DeviceKind kind) {
  for (const KnownDevice& known : kKnownDevices) {
    if (device_name.find(known.name_substring) != std::string::npos) {
      return parse_gemm_param_set(std::string(known.large) + ";" + known.small, kind);
    }
  }
  return std::nullopt;
}

std::optional<GemmParamSet> cached_gemm_tuning(const GemmTuningKey& key, DeviceKind kind) {
  auto path = gemm_tuning_path();
  if (!path) return std::nullopt;
  static std::mutex mutex;
  static std::map<std::tuple<std::string, std::string, std::string, std::string>,
                  std::optional<GemmParamSet>>
      cache;
  auto cache_key = std::make_tuple(path->string(), key.device, key.driver, key.library);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(cache_key);
  if (it == cache.end()) {
    auto entry = load_gemm_tuning(*path, key, kind);
    if (entry) {
      log().debug("GEMM tuning for {}: {} (from {})", key.device, to_string(*entry),
                  path->string());
    }
    it = cache.emplace(cache_key, entry).first;
  }
  return it->second;
}

}  // namespace aethercl::gemm
