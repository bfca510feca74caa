// Loading the vendor engines once, with the one-warning policy of vendor/engines.h.
#include "vendor/engines.h"

#include "support/env.h"
#include "support/log.h"

#include <mutex>

namespace aethercl::vendor {
namespace {

#if !defined(_WIN32)
// Opens the library variable names (or default_name). Returns the library or nullopt with why
// filled; a library present but failing sets broken.
std::optional<SharedLibrary> open_library(const char* variable, const char* default_name,
                                          std::string& why, bool& broken) {
  auto named = env::get(variable);
  std::string path = named.value_or(default_name);
  bool absent = false;
  auto library = SharedLibrary::open(path, why, absent);
  if (!library) {
    // An absent default is the normal case off NVIDIA; a file the user named is worth a warning.
    broken = !absent || named.has_value();
    why = fmt::format("{} cannot be loaded: {}", path, why);
  }
  return library;
}

Engines load() {
  Engines result;
  if (!env::flag(env::kVendorEngines, true)) {
    result.why_not = fmt::format("{}=0", env::kVendorEngines);
    log().debug("vendor engines off ({})", result.why_not);
    return result;
  }
  static CudaDriver cuda;
  static Nccl nccl;
  bool broken = false;
  std::string why;
  auto cuda_library = open_library(env::kLibCuda, "libcuda.so.1", why, broken);
  if (cuda_library) {
    std::string problem = load_cuda_driver(*cuda_library, cuda);
    if (problem.empty()) {
      result.cuda = &cuda;
      log().debug("vendor engines: CUDA driver {}.{} from {}{}", cuda.version / 1000,
                  cuda.version % 1000 / 10, cuda_library->path(),
                  cuda.host_memory ? " (a host-memory test engine)" : "");
    } else {
      broken = true;
      why = fmt::format("{} is not usable: {}", cuda_library->path(), problem);
    }
  }
  if (result.cuda != nullptr) {
    auto nccl_library = open_library(env::kLibNccl, "libnccl.so.2", why, broken);
    if (nccl_library) {
      std::string problem = load_nccl(*nccl_library, nccl);
      if (problem.empty()) {
        result.nccl = &nccl;
        log().debug("vendor engines: NCCL {}.{}.{} from {}", nccl.version / 10000,
                    nccl.version % 10000 / 100, nccl.version % 100, nccl_library->path());
      } else {
        broken = true;
        why = fmt::format("{} is not usable: {}", nccl_library->path(), problem);
      }
    }
  }
  if (result.cuda == nullptr || result.nccl == nullptr) {
    result.why_not = why;
    if (broken) {
      log().warn("vendor engines: {}; collectives and peer copies take the OpenCL paths", why);
    } else {
      log().debug("vendor engines: {}; collectives and peer copies take the OpenCL paths", why);
    }
  }
  return result;
}
#else
Engines load() {
  Engines result;
  result.why_not = "vendor engines are not built on Windows";
  return result;
}
#endif

}  // namespace

const Engines& engines() {
  static const Engines loaded = load();
  return loaded;
}

}  // namespace aethercl::vendor
